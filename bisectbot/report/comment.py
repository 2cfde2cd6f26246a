"""Comments on an issue the bot filed: a re-detection or an update (:func:`render_comment`),
with the hidden marker that says which run it came from (:func:`seen_marker`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..models import ProbeResult, RunResult
from ..sanitize import GITHUB_BODY_LIMIT, github_length, sanitize
from .evidence import exit_text
from .history import NightlyResult
from .issue import issue_chart
from .markdown import render_markdown
from .templating import DEFAULT_BUDGET, fit, template
from .views import candidate_link, format_threshold
from .words import ends_words


def seen_marker(kind: str, key: str) -> str:
    """Hidden marker of a bot comment, e.g. ``<!-- bisectbot:redetected=<key> -->``: a retry of
    the same night finds it and does not comment twice."""
    safe = re.sub(r"[^A-Za-z0-9._:@+-]", "_", key)[:120]
    return f"<!-- bisectbot:{kind}={safe} -->"


def _probe_view(p: ProbeResult) -> dict[str, Any]:
    rows = []
    for r in p.table:
        reasons = r.get("reasons", "")
        rows.append({"size": sanitize(r.get("size", "?"), 20), "outcome": sanitize(r.get("outcome", ""), 30),
                     "reasons": ", ".join(map(str, reasons)) if isinstance(reasons, list) else str(reasons)})
    measure = (f"exit code {exit_text(p)}" if "returncode" in p.extra
               else f"threshold {format_threshold(p.threshold)}")  # a command run has no threshold
    return {"candidate": candidate_link(p.candidate), "verdict": p.verdict.value,
            "threshold": format_threshold(p.threshold), "measure": measure, "reason": p.reason, "rows": rows}


def render_comment(
    what: str,
    result: RunResult | None,
    newest: ProbeResult | None,
    nightly: NightlyResult | None = None,
    *,
    key: str,
    when: str = "",
    closing: bool = False,
    include_report: bool = False,
    limit: int = GITHUB_BODY_LIMIT,
    chart_png: Path | None = None,
) -> str:
    """Body of a bot comment, at most ``limit`` characters.

    ``what`` is ``redetected`` (tonight's result on a tracked issue) or ``not-reproduced``
    ("not reproduced since <nightly>" with the evidence: verdict, threshold, per-size table).
    ``key`` identifies the night (session id or nightly ref) for :func:`seen_marker`.
    ``include_report`` adds tonight's full report of ``result`` in a collapsed block, sized to
    what is left of ``limit``, with tonight's chart ``chart_png`` as the issue shows it
    (:func:`issue_chart`). Raises ``ValueError`` for an unknown ``what``.
    """
    if what not in ("redetected", "not-reproduced"):
        raise ValueError(f"unknown comment kind {what!r}")
    tpl = template("comment.md.j2")
    ctx = {
        "seen_marker": seen_marker(what, key), "what": what,
        "kind_word": "Fix" if result is not None and result.kind == "fix" else "Regression",
        "words": ends_words(result.kind, result.regress) if result is not None else ends_words("regression"),
        "when": sanitize(when, 60) if when else "tonight",
        "newest": _probe_view(newest) if newest is not None else None,
        "streak": nightly.streak() if nightly is not None and nightly.probes else None,
        "closing": closing,
    }
    base = fit(lambda b: tpl.render(**ctx, b=b, details=""), limit)
    if not include_report or result is None:
        return base
    plain = tpl.render(**ctx, b=DEFAULT_BUDGET, details="")
    room = limit - github_length(plain) - 100
    if github_length(plain) > limit or room < 2000:
        return base
    url, note = issue_chart(result, chart_png)
    return tpl.render(**ctx, b=DEFAULT_BUDGET, details=render_markdown(result, nightly, limit=room,
                                                                        for_github=True, chart=url, chart_note=note))
