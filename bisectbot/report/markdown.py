"""The run's report: ``report.md`` (:func:`render_markdown`), ``result.json`` (:func:`render_json`)
and the Reproduce section shared with the issue (:func:`reproduce_section`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..models import RunResult, Status
from ..sanitize import GITHUB_BODY_LIMIT, redact, sanitize, shorten_paths
from .blame import DEFAULT_BLAME_CONFIDENCE, blame_decision
from .evidence import is_command_result, measured_evidence, measured_metric
from .fingerprint import fingerprint, marker
from .history import NightlyResult
from .templating import fit, template
from .views import (
    INLINE_REQUEST_CHARS,
    _author,
    _chain_view,
    _env_rows,
    _evidence_view,
    _excerpts,
    _is_commit,
    _mentions,
    _patch_rows,
    _searched,
    _StageView,
    _status_word,
    _subject,
    candidate_link,
    culprit_marker,
    culprit_word,
    heading,
    kind_word,
    nightly_diff_rows,
    note_words,
    patch_message,
    range_links,
    summary_line,
)
from .words import ends_words, patch_mode

#: Characters of the smallest failing part's diff a report shows (a few hunks; result.json keeps it whole).
MINIMIZED_DIFF_CHARS = 6000


def _minimized_view(result: RunResult) -> dict[str, Any] | None:
    """``run --minimize``'s section (issue 42): its sentence and the diff of the part found, in a code
    fence longer than any backtick run inside it (the diff is the repository's text, shown as data)."""
    m = result.minimized
    if not m:
        return None
    from ..bisect.minimize import words

    diff = str(m.get("diff") or "")[:MINIMIZED_DIFF_CHARS]
    longest = max((len(r) for r in re.findall(r"`+", diff)), default=0)
    tests = [{"parts": sanitize(", ".join(map(str, t.get("parts") or []))[:200], 200),
              "verdict": sanitize(t.get("verdict"), 20), "attempt": t.get("attempt", 1)}
             for t in (m.get("tests") or []) if isinstance(t, dict)]
    return {"words": sanitize(words(m), 1500), "diff": diff, "fence": "`" * max(3, longest + 1), "tests": tests}


def render_markdown(
    result: RunResult,
    nightly: NightlyResult | None = None,
    *,
    limit: int = GITHUB_BODY_LIMIT,
    for_issue: bool = False,
    chart: str | None = None,
    mentions: Iterable[str] = (),
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    for_github: bool | None = None,
    chart_note: str = "",
) -> str:
    """Markdown report of ``result`` at most ``limit`` characters long (UTF-16 units, see module doc).

    ``nightly`` adds the nightly-status table (first bad / last good nightly, streak, flips).
    ``for_issue`` adds the hidden fingerprint marker and the ``cc`` line of ``mentions`` (logins
    or ``org/team`` from the recipe; anything else is dropped). ``chart`` is the chart's image
    address: a relative path in local reports, the published URL in an issue
    (:mod:`bisectbot.report.published`; GitHub issues cannot carry uploaded images through the
    API); ``chart_note`` says where the chart is when it has no address to embed.
    ``for_github`` (default: ``for_issue``) also neutralises ``#123`` cross-references; a local
    ``report.md`` keeps them readable (``hunk #1``). Mentions are neutralised either way.
    Never raises for odd content: every model/log value is sanitised.
    """
    from ..bisect import confidence_text

    blame = blame_decision(result, blame_confidence)
    fp = fingerprint(result)
    final = result.final
    final_view = None
    if final is not None:
        final_view = {
            "culprits": [{"link": f"`{c.ref}`" if _is_commit(c) else candidate_link(c), "subject": _subject(c),
                          "author": _author(c)} for c in final.culprits],
            "confidence": confidence_text(final.confidence),
            "last_good": candidate_link(final.last_good) if final.last_good else "",
            "first_bad": candidate_link(final.first_bad) if final.first_bad else "",
            "message": patch_message(result, final.message), "flags": final.flags,
            # an inconclusive search's culprits are its best guess: never under a "Culprit" heading
            "guess": final.status is Status.INCONCLUSIVE,
            # issue 18: the decode control's verdict, next to the first bad (its threshold)
            "decode_path": next((n for n in result.notes if n.startswith("decode path:")), ""),
            "links": range_links(result, blame),
        }
    ctx = {
        "for_github": for_issue if for_github is None else for_github,
        "marker": (marker(fp) + culprit_marker(result)) if for_issue else "",
        "fingerprint": fp,
        "heading": sanitize(heading(result, blame), 250),
        "kind_word": kind_word(result), "culprit_word": culprit_word(result),
        "patch": patch_mode(result.regress) is not None,
        "words": ends_words(result.kind, result.regress),
        "recipe": result.recipe, "model": result.model, "tp": result.tp, "runner": result.runner,
        "regress": result.regress, "status": _status_word(result, result.status.value),
        "summary": summary_line(result, blame),
        "final": final_view, "blame": blame, "chain": _chain_view(result),
        "streak": nightly.streak() if nightly is not None and nightly.probes else None,
        "chart": chart or None, "chart_note": chart_note if not chart else "",
        "reproduce": redact(result.reproduce),
        "env_rows": _env_rows(result), "patches": _patch_rows(result),
        "triage": sorted(result.triage.items()),
        "minimized": _minimized_view(result),
        "stages": [_StageView(s.name, s.component, _status_word(result, s.status.value), s.probes, result.kind,
                              result.regress, _searched(s), result.session_id)
                   for s in result.stages],
        "command": is_command_result(result),
        "metric": measured_metric(result),  # issue 39: a measured value's median, spread and count per probe
        "measured": _measured_view(result),
        "notes": [note_words(result, n) for n in result.notes
                  if not (final_view and n == final_view.get("decode_path"))],
        "excerpts": _excerpts(result),
        "evidence": _evidence_view(result),
        "nightly_diff": nightly_diff_rows(result),
        "reproduce_section": "",
        "mentions": _mentions(mentions) if for_issue else "",
        "session_id": result.session_id,
    }
    section = reproduce_section(result, for_github=bool(ctx["for_github"]))
    tpl = template("report.md.j2")
    if ctx["for_github"]:  # leaves the machine: no host paths, except in the Reproduce section (issue 25:
        # its commands are pasted, an elided path cannot be)
        mark = "\x00reproduce-section\x00"
        ctx["reproduce_section"] = mark if section else ""
        return fit(lambda b: shorten_paths(tpl.render(**ctx, b=b)).replace(mark, section), limit)
    ctx["reproduce_section"] = section
    return fit(lambda b: tpl.render(**ctx, b=b), limit)


def reproduce_section(result: RunResult, for_github: bool = False) -> str:
    """The Markdown of the Reproduce section built from :func:`.reproduce_kit.kit` (empty when the
    result carries no reproduction facts: the template then shows ``result.reproduce`` alone).
    ``for_github``: the issue's bisectbot line (no ``--state``, the recipe by name); a local report
    keeps ``result.reproduce``, which resumes from this machine's ledger."""
    from .reproduce_kit import kit

    k = kit(result)
    if k is None:
        return ""
    bot = k.bot if for_github or not result.reproduce else redact(result.reproduce)
    return template("reproduce.md.j2").render(
        kit=k, words=ends_words(result.kind, result.regress), request_json=k.request_json()
        if len(k.request_json()) <= INLINE_REQUEST_CHARS else "", bot=bot, for_github=for_github).rstrip("\n") + "\n"


def render_json(result: RunResult, nightly: NightlyResult | None = None, *,
                result_data: dict[str, Any] | None = None) -> str:
    """JSON (indented, sorted keys) of ``result.to_dict()`` plus ``fingerprint``, ``blame`` and,
    when given, ``nightly`` (with its streak). Secrets found in it are redacted. ``result_data``:
    ``result.to_dict()`` when the caller already made it (it is not made twice)."""
    blame = blame_decision(result)
    data: dict[str, Any] = {
        "schema": "bisectbot.report/1",
        "fingerprint": fingerprint(result),
        "result": result.to_dict() if result_data is None else result_data,
        "blame": {"ok": blame.ok, "reason": blame.reason},
    }
    if nightly is not None:
        data["nightly"] = nightly.to_dict()
    return redact(json.dumps(data, indent=2, sort_keys=True, default=str)) + "\n"


def _measured_view(result: RunResult) -> dict[str, Any] | None:
    """:func:`.evidence.measured_evidence` with each candidate as the report links it."""
    view = measured_evidence(result)
    if view is not None:
        view["rows"] = [{**r, "candidate": candidate_link(r["candidate"])} for r in view["rows"]]
    return view
