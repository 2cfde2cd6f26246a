"""Render a :class:`~bisectbot.models.RunResult` (and optionally a :class:`NightlyResult`).

Outputs: Markdown (Jinja2 templates in ``templates/``), JSON, the would-be GitHub issue, a
threshold-over-nightlies chart, and the GitHub Actions job summary.

Size discipline: every body is kept under :data:`~bisectbot.report.sanitize.GITHUB_BODY_LIMIT`
(65,536 characters) by shrinking the least important parts first, in this order: log and
model-output excerpts (shorter, then fewer), reasons, rows of the probe tables, notes, patch
rows, environment values. Only if all that is not enough is the text cut hard (with the open
code fence closed and a note).

Expected ``Candidate.meta`` keys (all optional): ``subject`` (commit subject), ``author_login``
(or ``author``), ``url`` (http/https link to the commit or image), ``date``.
Expected ``ProbeResult.table`` row keys (all optional): ``prompt_tokens`` (measured), ``requested``
or ``size`` (prompt tokens asked for), ``outcome``,
``reasons`` (str or list), and free text under ``reply``/``output``/``content``/``reasoning``/
``excerpt``, shown collapsed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..models import Candidate, ChainLink, ProbeResult, RunResult, StageResult, Status, Verdict
from ..provenance import cached_from, measured_text
from .fingerprint import fingerprint, marker
from .history import NightlyResult, Streak
from .sanitize import GITHUB_BODY_LIMIT, code_block, github_length, redact, sanitize, shorten_paths, visible
from .words import ends_words, patch_mode, verdict_word

TEMPLATES = Path(__file__).parent / "templates"
DEFAULT_BLAME_CONFIDENCE = 0.66
"""Below this confidence the issue names a range, not a culprit (issue 6; recipe ``bisect.blame_confidence``)."""

INLINE_REQUEST_CHARS = 16_000
"""``request.json`` longer than this (characters) is not inlined in the report; ``make_request.py`` is."""
TEXT_KEYS = ("reply", "output", "content", "reasoning", "excerpt")
LOG_TAIL_BYTES = 256 * 1024
"""Bytes read from the end of each log file for excerpts."""

_URL_RE = re.compile(r"^https?://[^\s<>()\[\]`\"']+$")
_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_MENTION_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]{1,100})?$")

_DEFAULT_BUDGET: dict[str, int] = {
    "excerpt_chars": 6000, "max_excerpts": 12, "reason_chars": 300, "max_rows": 400,
    "note_chars": 2000, "patch_rows": 100, "env_chars": 300,
}
# Least important first: each step lowers one budget, re-rendering after each.
_SHRINK_STEPS: list[tuple[str, int]] = [
    ("excerpt_chars", 3000), ("excerpt_chars", 1500), ("max_excerpts", 6), ("excerpt_chars", 800),
    ("max_excerpts", 3), ("excerpt_chars", 400), ("max_excerpts", 1), ("max_excerpts", 0),
    ("reason_chars", 120), ("max_rows", 100), ("reason_chars", 60), ("max_rows", 40), ("note_chars", 400),
    ("max_rows", 16), ("reason_chars", 30), ("note_chars", 100), ("patch_rows", 20), ("max_rows", 6),
    ("env_chars", 80), ("patch_rows", 5),
]


# --------------------------------------------------------------------------- small views


_SHA_RE = re.compile(r"[0-9a-f]{13,}")


def culprit_marker(result: RunResult) -> str:
    """``<!-- bisectbot:named=REF -->`` (after a newline) naming the final first-bad (a neutral word: a
    release report names no culprit), ``""`` without
    one: a job without the marker key reads which culprit a retracted issue names (issue 24, input 2)."""
    final = result.final
    ref = final.first_bad.ref if final is not None and final.first_bad is not None else ""
    return f"\n<!-- bisectbot:named={ref} -->" if ref and CULPRIT_REF.match(ref) else ""


CULPRIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._=,+@-]{0,199}$")
_CULPRIT_RE = re.compile(r"<!-- bisectbot:named=([A-Za-z0-9][A-Za-z0-9:._=,+@-]{0,199}) -->")


def culprits_in(body: str) -> list[str]:
    """The refs of :func:`culprit_marker` lines in ``body``."""
    return _CULPRIT_RE.findall(body or "")


def _is_commit(c: Candidate) -> bool:
    return c.kind.value == "commit" and bool(_SHA_RE.fullmatch(c.ref))


def _subject(c: Candidate) -> str:
    """The commit subject: ``meta['subject']``, else the label without its leading short SHA."""
    subj = str(c.meta.get("subject") or "")
    if subj or not c.label:
        return subj
    head, _, rest = c.label.partition(" ")
    return rest if _is_commit(c) and c.ref.startswith(head) else c.label


def _short(c: Candidate) -> str:
    """What a human reads: ``sha12 subject`` for commits, the label (tag, version) otherwise."""
    if _is_commit(c):
        subj = _subject(c)
        return f"{c.ref[:12]} {subj}".strip()
    if c.label:
        return c.label
    return c.ref[:12] if _SHA_RE.fullmatch(c.ref) else c.ref


def candidate_link(c: Candidate, limit: int = 120) -> str:
    """Sanitised candidate label, linked when ``meta['url']`` is an http(s) URL."""
    url = str(c.meta.get("url") or "")
    linked = bool(url and _URL_RE.match(url))
    if _is_commit(c):
        sha = f"[{c.ref[:12]}]({url})" if linked else f"`{c.ref[:12]}`"
        return f"{sha} {sanitize(_subject(c), limit)}".rstrip()
    text = sanitize(_short(c), limit)
    return f"[{text}]({url})" if linked else text


def _author(c: Candidate) -> str:
    login = str(c.meta.get("author_login") or "")
    if _LOGIN_RE.match(login):
        # A link, never an @mention: the author is not notified by the bot.
        return f"[{login}](https://github.com/{login})"
    name = str(c.meta.get("author") or login)
    return sanitize(name, 80) if name else "—"


def format_threshold(thr: Sequence[int | None] | None) -> str:
    """``[last_ok, first_garbage]`` in tokens as text: ``20480–20992``, ``≤ 4096 (bad at all sizes)``..."""
    if not thr:
        return "—"
    lo, hi = thr[0], thr[1]
    if lo is not None and hi is not None:
        return f"{lo}–{hi}"
    if hi is not None:
        return f"bad at all sizes ≤ {hi}"
    if lo is not None:
        return f"OK up to {lo}"
    return "—"


def format_duration(seconds: float) -> str:
    """Seconds as ``42 s`` / ``12.5 min`` / ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass
class _StageView:
    name: str
    component: str
    status: str
    probes: list[ProbeResult]
    kind: str = "regression"
    regress: Any = ""
    searched: str = ""
    session: str = ""

    @property
    def cached(self) -> bool:
        """True when a probe's verdict came from the ledger cache: the table then says, per probe,
        whether it was measured in this run or when and by which session (issue 23)."""
        return any(cached_from(p) is not None for p in self.probes)

    def rows(self, max_rows: int) -> list[dict[str, Any]]:
        rows = [
            {"n": i + 1, "candidate": candidate_link(p.candidate), "verdict": verdict_word(p.verdict.value, self.kind, self.regress),
             "threshold": format_threshold(p.threshold), "time": format_duration(p.duration_s),
             "reason": p.reason, "exit": _exit_text(p), "measured": measured_text(p, self.session)}
            for i, p in enumerate(self.probes)
        ]
        if len(rows) <= max_rows:
            return rows
        head = max(1, max_rows // 2)
        tail = max(1, max_rows - head)
        return rows[:head] + [{"omitted": len(rows) - head - tail}] + rows[-tail:]


def _searched(st: StageResult) -> str:
    """``Searched 10,000 candidates, from X (good end) to Y (bad end); 18 probes.``: the range a stage
    searched as its count and ends (``result.json`` lists no more of a long range, issue 25)."""
    if not st.candidates:
        return ""
    n = st.range_size
    ends = (f", from {candidate_link(st.candidates[0], 80)} to {candidate_link(st.candidates[-1], 80)}"
            if n > 1 else f": {candidate_link(st.candidates[0], 80)}")
    return f"Searched {n:,} candidate{'s' if n != 1 else ''}{ends}; {len(st.probes)} probe{'s' if len(st.probes) != 1 else ''}."


@dataclass
class Blame:
    """Whether the report may name a culprit, and why not."""

    ok: bool
    reason: str = ""


def blame_decision(result: RunResult, blame_confidence: float = DEFAULT_BLAME_CONFIDENCE) -> Blame:
    """Refuse to blame on a range, a flagged culprit or a confidence below ``blame_confidence``."""
    from ..bisect import confidence_text, may_blame  # the one blame rule (the exit code follows it too)

    final = result.final
    if final is None or not final.culprits:
        return Blame(False, f"no culprit (status {result.status.value})")
    if final.status is Status.INCONCLUSIVE:  # the culprits are the search's best guess, not an answer
        return Blame(False, f"status inconclusive: the search ended on a best guess of {len(final.culprits)} "
                            f"candidate(s) with probability {confidence_text(final.confidence)}, "
                            "below what it needs to name a culprit")
    if result.status != Status.CULPRIT or final.status != Status.CULPRIT or len(final.culprits) != 1:
        return Blame(False, f"status {final.status.value}: {len(final.culprits)} candidates remain")
    ok, why = may_blame(final.status, final.confidence, final.flags, blame_confidence)
    return Blame(True) if ok else Blame(False, why)


def _exit_text(p: ProbeResult) -> str:
    """A command run's exit: ``0``, ``1``, ``timeout``, ``signal 9``; ``—`` when it did not run."""
    rc = p.extra.get("returncode", "missing")
    if rc == "missing":
        return "—"
    if rc is None:
        return "timeout"
    if isinstance(rc, int) and rc < 0:
        return f"signal {-rc}"
    return str(rc)


def is_command_result(result: RunResult) -> bool:
    """A run whose verdicts are a command's exit codes (``regress: command``): its report speaks of
    runs and exit codes with stdout/stderr tails, not of chat requests, tokens and GARBAGE.
    A fix bisection (``regress: success``) with a command reproducer that takes no ``{size}`` is
    one too: its probes carry ``returncode`` (newuser defect 6)."""
    if str(result.regress).strip() == "command":
        return True
    judged = [p for st in result.stages for p in st.probes if p.verdict is not Verdict.SKIP]
    return bool(judged) and all("returncode" in p.extra for p in judged)


def _evidence_view(result: RunResult, reason_chars: int = 300) -> dict[str, Any] | None:
    """The template's view of :func:`.evidence.culprit_evidence`: a table whose columns are the two
    ends in history order (the last end left, the first end right), rows of cells. Cells of rows
    marked ``safe`` are the bot's own text (numbers, outcome words); every other cell is raw and
    sanitised by the template."""
    from .evidence import culprit_evidence

    command = is_command_result(result)
    ev = culprit_evidence(result, command=command)
    if ev is None:
        return None
    w = ends_words(result.kind, result.regress)
    by_end = {ev.bad_end: ev.bad, ev.good_end: ev.good}
    ends = [by_end.get("last"), by_end.get("first")]
    heads = [f"{w[e]}: {candidate_link(r.candidate) if r else '—'}" for e, r in zip(("Last", "First"), ends)]

    def row(label: str, get: Any, safe: bool = False, limit: int = reason_chars) -> dict[str, Any]:
        return {"label": label, "cells": [get(r) if r is not None else ("—" if safe else "") for r in ends],
                "safe": safe, "limit": limit}

    def outcome(r: Any) -> str:
        word = sanitize(r.outcome, 40)
        return f"**{word}**" if r is ev.bad else word

    tails = []
    if command:
        intro = "The reproducer command on both ends of the final range:"
        rows = [row("exit code", lambda r: sanitize(r.exit, 40), safe=True),
                row("verdict", lambda r: sanitize(verdict_word(r.outcome, result.kind, result.regress), 40), safe=True),
                row("reason", lambda r: "; ".join(r.reasons))]
        if any(r is not None and r.measured != "this run" for r in ends):  # issue 23: cached, not run now
            rows.append(row("probe", lambda r: r.measured, limit=120))
        for e, r in zip(("Last", "First"), ends):
            for key in ("stdout", "stderr"):
                if r is not None and getattr(r, key).strip():
                    tails.append({"title": f"{w[e]} {_short(r.candidate)[:12]}, {key} (tail)",
                                  "text": getattr(r, key)})
        return {"command": True, "bad_end": w[ev.bad_end], "good_end": w[ev.good_end], "intro": intro,
                "heads": heads, "rows": rows, "tails": tails, "diverges": None}
    if ev.same_prompt:
        intro = (f"Both replies answer the same prompt: the reproducer's prompt of {ev.bad.requested} tokens "
                 "(requested; a prompt is a function of the size and the recipe's seed). Each reply's start as "
                 "the reproducer kept it, control characters shown as `\\xNN`:")
    else:
        intro = f"The {w[ev.bad_end]}'s failing reply at {ev.bad.requested} tokens; {sanitize(ev.note, 300)}:"
    rows = [row("prompt tokens (requested / measured)", lambda r: f"{r.requested} / {r.prompt_tokens or '?'}", safe=True),
            row("outcome", outcome, safe=True),
            row("reasons", lambda r: "; ".join(r.reasons)),
            row("reply", lambda r: r.text or "(empty reply)", limit=400)]
    if any(r is not None and r.measured != "this run" for r in ends):  # issue 23: a cached reply, not run now
        rows.append(row("probe", lambda r: r.measured, limit=120))
    diverges = None
    if any(r is not None and r.reference for r in ends):
        ref = ev.bad.reference
        tol = ref.get("tolerance") or {}

        def num(key: str, fmt: str) -> Any:
            def get(r: Any) -> str:
                v = r.reference.get(key)
                return fmt.format(v) if isinstance(v, (int, float)) else "not compared"
            return get

        def first_div(r: Any) -> str:
            if not r.reference:
                return "not compared"
            fd = r.reference.get("first_divergence")
            return "none (identical)" if fd is None else f"{fd} of {r.reference.get('tokens', '?')}"

        cont = [ends[0].reference.get("reference_continuation", "") if ends[0] else "",
                *(r.reference.get("continuation", "") if r is not None else "" for r in ends)]
        label = f" ({ev.reference_label})" if ev.reference_label else ""
        d_intro = (f"Greedy continuations of that prompt, each compared with the reference{label}; "
                   f"tolerance: edit distance {tol.get('edit_distance', '?')}, prompt logprobs |Δ| mean "
                   f"{tol.get('logprob', '?')} nats"
                   + (f" (calibrated at {tol['calibrated_at']} tokens between two good builds)"
                      if tol.get("calibrated_at") else " (the recipe's floors: not calibrated)") + ":")
        diverges = {
            "intro": sanitize(d_intro, 600),
            "heads": ["reference", w["last"], w["first"]],
            "rows": [{"label": "continuation", "cells": [ref.get("reference_continuation", "") or cont[0],
                                                         cont[1], cont[2]], "safe": False, "limit": 400},
                     {"label": "first diverging word", "cells": ["—", *(first_div(r) if r else "—" for r in ends)],
                      "safe": True},
                     {"label": "normalised edit distance", "cells": ["—", *(num("edit_distance", "{:.3f}")(r)
                                                                           if r and r.reference else "—" for r in ends)],
                      "safe": True},
                     {"label": "prompt logprobs \\|Δ\\| mean (nats)",
                      "cells": ["—", *(num("logprob_mean", "{:.4f}")(r) if r and r.reference else "—" for r in ends)],
                      "safe": True}],
        }
    return {"command": False, "bad_end": w[ev.bad_end], "good_end": w[ev.good_end], "intro": intro,
            "heads": heads, "rows": rows, "tails": tails, "diverges": diverges}


def range_links(result: RunResult, blame: Blame) -> list[str]:
    """Markdown lines linking the final range on GitHub (issue 25, input 4): the compare view of the
    last good and first bad commits, the culprit commit and, when it is blamed and its subject names
    ``(#N)``, its pull request. Empty off GitHub (the repository comes from the recipe's source or
    ``bisect.components``, recorded in ``RunResult.reproduction``)."""
    from .links import commit_url, compare_url, pull_url

    final = result.final
    if final is None or final.first_bad is None:
        return []
    repos = result.reproduction.get("repos") or {}
    repo = repos.get(final.component) or repos.get(final.first_bad.component) or (
        next(iter(repos.values())) if len(repos) == 1 else None)
    if not repo:
        return []
    fb, lg = final.first_bad, final.last_good
    lines = []
    url = compare_url(repo, lg.ref, fb.ref) if lg is not None else None
    if url:
        lines.append(f"range on GitHub: [{lg.ref[:12]}...{fb.ref[:12]}]({url}) (the commits the {ends_words(result.kind)['first']} "
                     "adds to the last good)")
    cu = commit_url(repo, fb.ref)
    if cu and _is_commit(fb):
        lines.append(f"{ends_words(result.kind, result.regress)['first']} commit: [{fb.ref[:12]}]({cu})")
    pu = pull_url(repo, _subject(fb)) if blame.ok else None
    if pu:
        lines.append(f"pull request: [#{pu.rsplit('/', 1)[1]}]({pu})")
    return lines


def nightly_diff_rows(result: RunResult) -> list[dict[str, Any]]:
    """Rows of what changed between the last good and first bad nightly (``nightlies diff`` as
    ``run`` recorded it in ``RunResult.reproduction['nightly_diff']``), with compare links."""
    from .links import component_rows

    diff = result.reproduction.get("nightly_diff")
    if not isinstance(diff, dict):
        return []
    return component_rows(diff, result.reproduction.get("repos") or {})


def _boundary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows worth reading of one candidate: its failing reply at the smallest size and its OK
    reply at the largest size below that (all OK: the largest), the failing one first; rows without
    a size come after, in order."""
    def size(r: dict[str, Any]) -> float:
        v = r.get("requested", r.get("size"))
        return float(v) if isinstance(v, (int, float)) else float("inf")

    failing = sorted((r for r in rows if r.get("outcome") == "GARBAGE"), key=size)
    top = size(failing[0]) if failing else float("inf")
    ok = sorted((r for r in rows if r.get("outcome") == "OK" and size(r) < top), key=size)
    # an empty reply is garbage too, but shows nothing: the smallest failing reply with text
    worded = [r for r in failing if any(isinstance(r.get(k), str) and r[k].strip() for k in TEXT_KEYS)]
    picked = (worded or failing)[:1] + ok[-1:]
    return picked + [r for r in rows if r not in picked and size(r) == float("inf")]


def _excerpts(result: RunResult) -> list[Any]:
    """Log tails and model replies, most relevant first: the culprit's and the boundary's probes
    first, then the others; of each candidate its failing reply at the smallest size and its OK
    reply just below (not its smallest size over and over: issue 25), then its logs."""
    final = result.final
    rank: dict[str, int] = {}
    if final is not None:  # the culprit (first bad) first, then the last good, then the rest
        if final.last_good is not None:
            rank[final.last_good.ref] = 1
        rank.update({c.ref: 0 for c in final.culprits})
        if final.first_bad is not None:
            rank[final.first_bad.ref] = 0
    probes = [p for st in reversed(result.stages) for p in st.probes]
    probes.sort(key=lambda p: rank.get(p.candidate.ref, 2))
    rows: dict[str, list[dict[str, Any]]] = {}
    for p in probes:
        rows.setdefault(p.candidate.ref, []).extend(p.table)
    out: list[Any] = []
    seen: set[tuple[Any, ...]] = set()
    for p in probes:
        name = _short(p.candidate)
        if (p.candidate.ref, "rows") not in seen:
            seen.add((p.candidate.ref, "rows"))
            for row in _boundary_rows(rows[p.candidate.ref]):
                for key in TEXT_KEYS:
                    val = row.get(key)
                    if isinstance(val, str) and val.strip():
                        size = row.get("prompt_tokens") or row.get("requested") or row.get("size") or "?"
                        out.append({"title": f"{name}: {key} at {size} tokens ({row.get('outcome', '')})",
                                    "text": val, "keep": "head"})
        for key in TEXT_KEYS:
            val = p.extra.get(key)
            if isinstance(val, str) and val.strip() and (p.candidate.ref, key, val) not in seen:
                seen.add((p.candidate.ref, key, val))
                out.append({"title": f"{name}: {key}", "text": val, "keep": "head"})
        for key, label in (("stdout_tail", "stdout"), ("stderr_tail", "stderr")):  # command runs
            val = p.extra.get(key)
            if isinstance(val, str) and val.strip() and (p.candidate.ref, key) not in seen:
                seen.add((p.candidate.ref, key))
                out.append({"title": f"{name}: {label} (tail) of the run, exit {_exit_text(p)}", "text": val,
                            "keep": "tail"})
        for lp in p.log_paths:
            path = Path(lp)
            if (p.candidate.ref, lp) in seen:
                continue
            seen.add((p.candidate.ref, lp))
            out.append(_LogExcerpt(f"{name}: log {path.name}", path))
    return out


class _LogExcerpt:
    """A log tail read only when the template shows it (most are left out of big reports)."""

    keep = "tail"

    def __init__(self, title: str, path: Path):
        self.title = title
        self.path = path
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            try:
                with self.path.open("rb") as fh:
                    size = self.path.stat().st_size
                    fh.seek(max(0, size - LOG_TAIL_BYTES))
                    self._text = fh.read().decode("utf-8", errors="replace")
            except OSError as e:
                self._text = f"(log not readable: {e.strerror or e})"
        return self._text


def _env_rows(result: RunResult) -> list[tuple[str, str]]:
    order = ["image", "digest", "vllm", "vllm_commit", "aiter", "aiter_commit", "torch", "rocm", "hip", "gpu_arch"]
    env = dict(result.environment)
    rows = [(k, str(env.pop(k))) for k in order if k in env]
    rows += sorted((k, str(v)) for k, v in env.items())
    return rows


def _patch_rows(result: RunResult) -> list[dict[str, str]]:
    rows = []
    for p in result.patch_stack:
        status = str(p.get("status") or p.get("state") or "")
        detail = str(p.get("detail") or p.get("reason") or p.get("target") or "")
        if detail.startswith("already patched here") and "upstream" in status.replace("not upstream", ""):
            # an older result: the tree carried the bot's own marker, which is no news from upstream
            status = "already applied here (patched by bisectbot, not upstream)"
        rows.append({"id": str(p.get("id") or p.get("name") or "?"), "status": status, "detail": detail})
    return rows


def _mentions(mentions: Iterable[str]) -> str:
    """``@a @b`` from the recipe's list; anything that is not a login or org/team is dropped."""
    ok = [m.lstrip("@") for m in mentions if _MENTION_RE.match(m.lstrip("@"))]
    return " ".join("@" + m for m in ok)


def _in(component: str, c: Candidate) -> str:
    """``vllm 0.23.0`` for a release labelled ``vllm 0.23.0`` of component ``vllm`` (never
    ``vllm vllm 0.23.0``), ``vllm f9a0845c9397 subject`` for a commit."""
    short = _short(c)
    if not component or short == component or short.startswith(component + " "):
        return short
    return f"{component} {short}"


def kind_word(result: RunResult) -> str:
    """``Regression``, ``Fix bisection``, ``Patch retirement`` (patch-upstream) or ``Patch conflict``."""
    pm = patch_mode(result.regress)
    if pm is not None:
        return "Patch retirement" if pm[0] == "patch-upstream" else "Patch conflict"
    return "Fix bisection" if result.kind == "fix" else "Regression"


def culprit_word(result: RunResult) -> str:
    """Title of the answer's table: ``Culprit``, ``Fix`` or (patch modes) ``Upstream since`` /
    ``First conflicting``."""
    if patch_mode(result.regress) is not None:
        return ends_words(result.kind, result.regress)["First"]
    return "Fix" if result.kind == "fix" else "Culprit"


def heading(result: RunResult, blame: Blame) -> str:
    """One-line title (plain text, control characters escaped, at most 200 characters)."""
    final = result.final
    pm = patch_mode(result.regress)
    comp = final.component if final is not None else ""
    if pm is not None:  # a question about the patch stack: nobody is blamed (newuser defect 5)
        mode, pid = pm
        verb = "upstream" if mode == "patch-upstream" else "conflicts"
        w = ends_words(result.kind, result.regress)
        if final is not None and final.first_bad is not None and final.status == Status.CULPRIT:
            lg = f" ({w['last']}: {_in(comp, final.last_good)})" if final.last_good else ""
            text = f"Patch {pid} {verb} since {_in(comp, final.first_bad)}{lg}"
        elif final is not None and (final.last_good or final.first_bad):
            lg = _in(comp, final.last_good) if final.last_good else "?"
            fb = _in(comp, final.first_bad) if final.first_bad else "?"
            text = f"Patch {pid} {verb} between {lg} and {fb}"
        else:
            text = f"Patch {pid} {verb}: {result.status.value}"
        text = visible(redact(f"{result.recipe}: {text}"), keep_newlines=False, keep_tabs=False)
        return text if len(text) <= 200 else text[:199] + "…"
    kind = "Fix" if result.kind == "fix" else "Regression"
    if final is not None and blame.ok:
        text = f"{kind} in {_in(comp, final.culprits[0])}"
    elif final is not None and (final.last_good or final.first_bad):
        lg = _short(final.last_good) if final.last_good else "?"
        fb = _short(final.first_bad) if final.first_bad else "?"
        comp_txt = f" ({final.component})" if final.component else ""
        if final.status is Status.INCONCLUSIVE:  # a best guess is not a located range
            text = f"{kind}: inconclusive, best guess between {lg} and {fb}{comp_txt}"
        else:
            text = f"{kind} between {lg} and {fb}{comp_txt}"
    else:
        text = f"{kind}: {result.status.value}"
    text = visible(redact(f"{result.recipe}: {text}"), keep_newlines=False, keep_tabs=False)
    return text if len(text) <= 200 else text[:199] + "…"


def _status_word(result: RunResult, status: str) -> str:
    """A status as the report prints it: a patch mode's ``culprit`` is an answer ``found``."""
    return "found" if status == Status.CULPRIT.value and patch_mode(result.regress) is not None else status


def note_words(result: RunResult, note: str) -> str:
    """A run note in the patch modes' words (no "culprit" for a release that ships a patch)."""
    if patch_mode(result.regress) is None:
        return note
    return note.replace("may blame: culprit verified", "answer verified").replace("culprit", "answer")


def patch_message(result: RunResult, message: str) -> str:
    """The patch judge's ``first-bad: X (...); last-good: Y`` in the patch mode's words
    (``upstream since: X (...); last needed: Y``); any other message unchanged."""
    if patch_mode(result.regress) is None:
        return message
    w = ends_words(result.kind, result.regress)
    if message.startswith("first-bad:"):
        message = w["first"] + ":" + message[len("first-bad:"):]
    return message.replace("; last-good:", f"; {w['last']}:")


def _effort(result: RunResult) -> str:
    """``N probes``, or for a command result ``N runs of the command`` counting every run of
    every probe (``reproducer.repeats`` runs a probe's command up to that many times) and,
    when that differs, the probes: ``12 runs of the command in 4 probes``."""
    probes = [p for s in result.stages for p in s.probes]
    if not is_command_result(result):
        return f"{len(probes)} probes"
    runs = sum(max(1, int(p.extra.get("runs") or 1)) for p in probes)
    return f"{runs} runs of the command" + (f" in {len(probes)} probes" if runs != len(probes) else "")


def _summary(result: RunResult, blame: Blame) -> str:
    from ..bisect import confidence_text

    final = result.final
    if final is None:
        return ""
    w = ends_words(result.kind, result.regress)
    pm = patch_mode(result.regress)
    if pm is not None:
        if final.first_bad is None or final.status != Status.CULPRIT:
            return f"No single release named: {blame.reason}."
        lg = f" ({w['last']}: {candidate_link(final.last_good)})" if final.last_good else ""
        return (f"Patch `{sanitize(pm[1], 100)}` {w['first']}: {candidate_link(final.first_bad)}{lg}, confidence "
                f"{confidence_text(final.confidence)}, after {sum(len(s.probes) for s in result.stages)} checks of the patch stack.")
    if blame.ok:
        c = final.culprits[0]
        author = _author(c)
        by = f" by {author}" if author != "—" else ""
        return (f"{w['First']}: {candidate_link(c)}{by}, "
                f"confidence {confidence_text(final.confidence)}, after {_effort(result)}.")
    if len(final.culprits) == 1 and final.status is Status.CULPRIT:
        # a Culprit table follows: say what it is, and why nobody is blamed (issue 12)
        return (f"{culprit_word(result)} {candidate_link(final.culprits[0])} found, not blamed: {blame.reason}.")
    return f"No single culprit named: {blame.reason}."


def _ref_text(ref: str) -> str:
    """A ref as the chain table shows it: 12 hex of a SHA, ``sha256:`` + 12 of a digest, a tag whole."""
    if ref.startswith("sha256:"):
        return ref[:19]
    return ref[:12] if _SHA_RE.fullmatch(ref) else ref


def _chain_name(c: Candidate | None) -> str:
    if c is None:
        return "?"
    return f"{c.ref[:12]}" if _is_commit(c) else (c.label or c.ref[:12])


def chain_text(chain: Sequence[ChainLink]) -> str:
    """The descent through pins in one line (issue 26): each vehicle's bump, then the culprit, e.g.
    ``0a1b2c3d4e5f bumps aiter v0.1.21.post2 → v0.1.22; the regression is aiter 9f8e7d6c5b4a
    ([Kernel] fix tiling (#4006)), last good 1a2b3c4d5e6f``. Empty without a chain; plain text
    (callers sanitise)."""
    from ..pins import PinMove

    parts: list[str] = []
    for link in chain:
        if link.role == "vehicle":
            moves = "; ".join(PinMove(**m).text() for m in link.moves) or "a pin"
            parts.append(f"{_chain_name(link.first_bad)} bumps {moves}")
        elif link.role != "culprit":  # the descended stage named no single culprit
            rng = f" {_ref_text(link.range[0])}..{_ref_text(link.range[1])}" if link.range else ""
            parts.append(f"the {link.component} stage{rng} named no culprit")
        else:
            fb = link.first_bad
            subj = f" ({_subject(fb)})" if fb is not None and _subject(fb) else ""
            lg = f", last good {_chain_name(link.last_good)}" if link.last_good else ""
            parts.append(f"the regression is {link.component} {_chain_name(fb)}{subj}{lg}")
    return "; ".join(parts)


def _chain_view(result: RunResult) -> dict[str, Any] | None:
    """The report's "Through dependency pins" section: the line, one row per link, range notes."""
    from ..bisect import confidence_text

    if not result.chain:
        return None
    rows = [{"role": link.role, "component": link.component, "stage": link.stage,
             "first_bad": candidate_link(link.first_bad) if link.first_bad else "—",
             "last_good": candidate_link(link.last_good) if link.last_good else "—",
             "range": (f"{_ref_text(link.range[0])}..{_ref_text(link.range[1])}" if link.range else "—"),
             "probes": link.probes, "confidence": confidence_text(link.confidence),
             "held": ", ".join(f"{k} at {_ref_text(v)}" for k, v in link.held.items()) or "—"}
            for link in result.chain]
    return {"text": chain_text(result.chain), "rows": rows, "notes": [link.note for link in result.chain if link.note]}


# --------------------------------------------------------------------------- jinja


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,  # Markdown, not HTML: values are escaped by the `s`/`code` filters
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    @jinja2.pass_context
    def s_filter(ctx: Any, v: Any, limit: int = 200) -> str:
        return sanitize(v, int(limit), refs=bool(ctx.get("for_github", True)))

    env.filters["s"] = s_filter
    env.filters["code"] = lambda v, limit=4000, keep="tail", lang="": code_block(str(v), int(limit), keep, lang)
    return env


_ENV: jinja2.Environment | None = None


def _template(name: str) -> jinja2.Template:
    global _ENV
    if _ENV is None:
        _ENV = _env()
    return _ENV.get_template(name)


def _fit(render: Any, limit: int) -> str:
    """Render with shrinking budgets until ``github_length`` is within ``limit``."""
    budget = dict(_DEFAULT_BUDGET)
    text = render(budget)
    steps = iter(_SHRINK_STEPS)
    while github_length(text) > limit:
        step = next(steps, None)
        if step is None:
            return _hard_cut(text, limit)
        key, value = step
        if budget[key] > value:
            budget[key] = value
            text = render(budget)
    return text


def _hard_cut(text: str, limit: int) -> str:
    note = "\n\n… report cut to fit GitHub's 65,536-character limit; see the run's artifacts.\n"
    room = limit - len(note) - 16
    out = text
    while github_length(out) > room:
        out = out[: max(0, len(out) - (github_length(out) - room) - 1)]
        out = out[: out.rfind("\n")] if "\n" in out else out
    fences = [ln for ln in out.splitlines() if re.match(r"^`{3,}", ln)]
    if len(fences) % 2 == 1:
        out += "\n" + re.match(r"^`{3,}", fences[-1]).group(0)  # type: ignore[union-attr]
    return out + note


# --------------------------------------------------------------------------- public API


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
        "summary": _summary(result, blame),
        "final": final_view, "blame": blame, "chain": _chain_view(result),
        "streak": nightly.streak() if nightly is not None and nightly.probes else None,
        "chart": chart or None, "chart_note": chart_note if not chart else "",
        "reproduce": redact(result.reproduce),
        "env_rows": _env_rows(result), "patches": _patch_rows(result),
        "triage": sorted(result.triage.items()),
        "stages": [_StageView(s.name, s.component, _status_word(result, s.status.value), s.probes, result.kind,
                              result.regress, _searched(s), result.session_id)
                   for s in result.stages],
        "command": is_command_result(result),
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
    tpl = _template("report.md.j2")
    if ctx["for_github"]:  # leaves the machine: no host paths, except in the Reproduce section (issue 25:
        # its commands are pasted, an elided path cannot be)
        mark = "\x00reproduce-section\x00"
        ctx["reproduce_section"] = mark if section else ""
        return _fit(lambda b: shorten_paths(tpl.render(**ctx, b=b)).replace(mark, section), limit)
    ctx["reproduce_section"] = section
    return _fit(lambda b: tpl.render(**ctx, b=b), limit)


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
    return _template("reproduce.md.j2").render(
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


def render_issue(
    result: RunResult,
    nightly: NightlyResult | None = None,
    *,
    mentions: Iterable[str] = (),
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    limit: int = GITHUB_BODY_LIMIT,
    chart_png: Path | None = None,
) -> tuple[str, str]:
    """``(title, body)`` of the would-be issue; the body carries the fingerprint marker.
    ``chart_png``: the run's ``threshold.png``: embedded from the dashboard's published address
    when ``result.pages_url`` names it (:func:`issue_chart`), else the body says where it is."""
    title = "[bisectbot] " + heading(result, blame_decision(result, blame_confidence))
    url, note = issue_chart(result, chart_png)
    body = render_markdown(result, nightly, limit=limit, for_issue=True, mentions=mentions,
                           blame_confidence=blame_confidence, chart=url, chart_note=note)
    return title[:256], body


def issue_chart(result: RunResult, chart_png: Path | None) -> tuple[str | None, str]:
    """``(url, note)`` of the issue's threshold chart: the address the dashboard publishes
    ``chart_png`` at under ``result.pages_url`` (:func:`bisectbot.report.published.chart_url`), or
    no address and a note naming the file in the run's artifacts (with the run's address inside
    GitHub Actions). ``(None, "")`` without a chart."""
    from .published import chart_url, publishable

    data = publishable(chart_png) if chart_png is not None else None
    if data is None:
        return None, ""
    if result.pages_url:
        return chart_url(result.pages_url, result.recipe, data), ""
    run = _actions_run_url()
    where = f"the [run's artifacts]({run})" if run else "the run's artifacts"
    return None, (f"The threshold chart is `{chart_png.name}` in {where}, beside `report.md` (set the recipe's "
                  "`report.pages_url` to the dashboard's address and the issue embeds it from there).")


def _actions_run_url() -> str:
    """``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID`` inside GitHub Actions, else ``""``."""
    server, repo, run = (os.environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (re.fullmatch(r"https?://[A-Za-z0-9.:-]+", server) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo)
            and run.isdigit()):
        return ""
    return f"{server}/{repo}/actions/runs/{run}"


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
    measure = (f"exit code {_exit_text(p)}" if "returncode" in p.extra
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
    tpl = _template("comment.md.j2")
    ctx = {
        "seen_marker": seen_marker(what, key), "what": what,
        "kind_word": "Fix" if result is not None and result.kind == "fix" else "Regression",
        "words": ends_words(result.kind, result.regress) if result is not None else ends_words("regression"),
        "when": sanitize(when, 60) if when else "tonight",
        "newest": _probe_view(newest) if newest is not None else None,
        "streak": nightly.streak() if nightly is not None and nightly.probes else None,
        "closing": closing,
    }
    base = _fit(lambda b: tpl.render(**ctx, b=b, details=""), limit)
    if not include_report or result is None:
        return base
    plain = tpl.render(**ctx, b=_DEFAULT_BUDGET, details="")
    room = limit - github_length(plain) - 100
    if github_length(plain) > limit or room < 2000:
        return base
    url, note = issue_chart(result, chart_png)
    return tpl.render(**ctx, b=_DEFAULT_BUDGET, details=render_markdown(result, nightly, limit=room,
                                                                        for_github=True, chart=url, chart_note=note))


# --------------------------------------------------------------------------- files


@dataclass
class ReportPaths:
    """Files written by :func:`write_report` (absolute paths)."""

    markdown: Path
    json: Path
    issue: Path
    charts: list[Path] = field(default_factory=list)
    step_summary: Path | None = None
    reproduce: list[Path] = field(default_factory=list)
    """``request.json`` and ``make_request.py`` of the Reproduce section (issue 25), when there is a request."""

    def all(self) -> list[Path]:
        return [self.markdown, self.json, self.issue, *self.charts, *self.reproduce]


def run_thresholds(result: RunResult) -> NightlyResult | None:
    """The final stage's probed candidates in history order (oldest first; the last non-skip probe
    of each) as a :class:`NightlyResult`, for the threshold chart of a single run. None when the run
    has no final stage or no probe measured a threshold."""
    final = result.final
    if final is None or not final.probes:
        return None
    last: dict[str, ProbeResult] = {}
    for p in final.probes:
        if p.verdict is not Verdict.SKIP or p.candidate.ref not in last:
            last[p.candidate.ref] = p
    order = final.position_map()
    probes = sorted(last.values(), key=lambda p: order.get(p.candidate.ref, len(order)))
    run = NightlyResult(recipe=result.recipe, probes=probes, kind=result.kind, regress=result.regress)
    return run if run.has_thresholds() else None


def chart_positions(result: RunResult) -> dict[str, int] | None:
    """Each candidate's index in the final stage's range (0 = the good end): the chart's x for commits
    and releases (commit distance, issue 25). None for nightlies, which the chart places by date."""
    final = result.final
    if final is None or not final.candidates or all(c.kind.value == "nightly" for c in final.candidates):
        return None
    return final.position_map()


def render_summary(result: RunResult, nightly: NightlyResult | None, files: Sequence[Path]) -> str:
    """Short Markdown for ``$GITHUB_STEP_SUMMARY`` (the full report is an artifact)."""
    blame = blame_decision(result)
    return _template("summary.md.j2").render(
        recipe=result.recipe, status=result.status.value, summary=sanitize(heading(result, blame), 250) + ". "
        + _summary(result, blame), streak=nightly.streak() if nightly and nightly.probes else None,
        files=[str(p) for p in files], words=ends_words(result.kind, result.regress),
    )


def write_report(
    result: RunResult,
    out_dir: Path,
    nightly: NightlyResult | None = None,
    *,
    mentions: Iterable[str] = (),
    blame_confidence: float = DEFAULT_BLAME_CONFIDENCE,
    step_summary: bool = True,
    result_data: dict[str, Any] | None = None,
) -> ReportPaths:
    """Write ``report.md``, ``report.json``, ``issue.md`` (title on the first line as ``# ...``),
    ``request.json`` and ``make_request.py`` (the Reproduce section's request, when the probes
    recorded it) and, when ``nightly`` has threshold data, ``threshold.png``/``threshold.svg`` into ``out_dir``
    (created). When ``step_summary`` and ``$GITHUB_STEP_SUMMARY`` is set (GitHub Actions), a
    short summary is appended to that file. ``result_data``: ``result.to_dict()`` when the caller
    already made it (for ``result.json``). Raises ``OSError`` when a file cannot be written.
    """
    from .chart import threshold_chart

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    final = result.final
    ends = {"first_bad": final.first_bad.ref if final is not None and final.first_bad else None,
            "last_good": final.last_good.ref if final is not None and final.last_good else None}
    charts = threshold_chart(nightly, out_dir, **ends) if nightly is not None else []
    if not charts:  # a single run (commits, releases): the thresholds of its probed candidates, in order
        run = run_thresholds(result)
        if run is not None:
            pos = chart_positions(result)
            charts = threshold_chart(run, out_dir, over="probed candidates" if pos else "nightlies", positions=pos,
                                     **ends)
    if not charts:  # an earlier run's chart must not stand beside (or be filed with) this report
        for stale in ("threshold.png", "threshold.svg"):
            (out_dir / stale).unlink(missing_ok=True)
    md = render_markdown(result, nightly, chart=charts[0].name if charts else None,
                         blame_confidence=blame_confidence)
    paths = ReportPaths(markdown=out_dir / "report.md", json=out_dir / "report.json",
                        issue=out_dir / "issue.md", charts=charts)
    paths.markdown.write_text(md, encoding="utf-8")
    paths.json.write_text(render_json(result, nightly, result_data=result_data), encoding="utf-8")
    png = next((c for c in charts if c.suffix == ".png"), None)
    title, body = render_issue(result, nightly, mentions=mentions, blame_confidence=blame_confidence, chart_png=png)
    paths.issue.write_text(f"# {title}\n\n{body}", encoding="utf-8")
    from .reproduce_kit import kit

    k = kit(result)
    if k is not None and k.request is not None:  # the Reproduce section's files, beside the report
        for name, text in (("request.json", k.request_json()), ("make_request.py", k.make_request)):
            (out_dir / name).write_text(text, encoding="utf-8")
            paths.reproduce.append(out_dir / name)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and summary_file:
        with open(summary_file, "a", encoding="utf-8") as fh:
            fh.write(render_summary(result, nightly, paths.all()))
        paths.step_summary = Path(summary_file)
    return paths


MAX_RESULT_BYTES = 256 * 1024 * 1024
"""A result file larger than this (bytes) is refused before it is read (a real one is a few MB)."""


def load_result(path: Path) -> tuple[RunResult, NightlyResult | None]:
    """Read a ``RunResult`` JSON (``RunResult.to_dict()`` or :func:`render_json` output).

    Raises :class:`bisectbot.errors.BadInput` with the file and the field on bad input.
    """
    from ..errors import BadInput
    from ..located import read_regular
    from .result_file import check_result_shape

    p = Path(path)
    try:
        raw = read_regular(p, MAX_RESULT_BYTES)
        if len(raw) > MAX_RESULT_BYTES:
            raise BadInput(f"{path}: larger than {MAX_RESULT_BYTES} bytes, not a result file")
        data = json.loads(raw.decode("utf-8"))
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 (byte {e.start}): not a result file") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    except RecursionError:
        raise BadInput(f"{path}: JSON nested too deeply: not a result file") from None
    except ValueError as e:  # e.g. an integer beyond Python's digit limit
        raise BadInput(f"{path}: not a result file: {str(e)[:120]}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object (a RunResult)")
    nightly = None
    if "result" in data and isinstance(data["result"], dict):
        if isinstance(data.get("nightly"), dict):
            try:
                nightly = NightlyResult.from_dict(data["nightly"])
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BadInput(f"{path}: nightly: not a nightly history: {type(e).__name__}: {e}") from None
        data = data["result"]
    check_result_shape(data, str(path))
    try:
        return run_result_from_dict(data), nightly
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{path}: not a RunResult: {type(e).__name__}: {e}") from None


def run_result_from_dict(d: dict[str, Any]) -> RunResult:
    """Inverse of ``RunResult.to_dict()`` (models.py has no ``from_dict`` for RunResult)."""
    def cand(x: Any) -> Candidate | None:
        return Candidate.from_dict(x) if x else None

    def stage(s: dict[str, Any]) -> StageResult:
        return StageResult(
            name=s["name"], component=s.get("component", ""), status=Status(s["status"]),
            candidates=[Candidate.from_dict(c) for c in s.get("candidates") or []],
            probes=[ProbeResult.from_dict(p) for p in s.get("probes") or []],
            last_good=cand(s.get("last_good")), first_bad=cand(s.get("first_bad")),
            culprits=[Candidate.from_dict(c) for c in s.get("culprits") or []],
            confidence=float(s.get("confidence") or 0.0), flags=list(s.get("flags") or []),
            message=s.get("message", ""), count=int(s.get("count") or 0),
            positions=[int(i) for i in s.get("positions") or []],
        )

    stages = [stage(s) for s in d.get("stages") or []]
    return RunResult(
        recipe=d["recipe"], kind=d.get("kind", "regression"), status=Status(d["status"]), stages=stages,
        model=d.get("model", ""), tp=int(d.get("tp") or 1), runner=d.get("runner", ""),
        regress=d.get("regress", ""), environment={k: str(v) for k, v in (d.get("environment") or {}).items()},
        patch_stack=list(d.get("patch_stack") or []), triage=dict(d.get("triage") or {}),
        reproduce=d.get("reproduce", ""), notes=list(d.get("notes") or []), session_id=d.get("session_id", ""),
        findings=[stage(s) for s in d.get("findings") or []],
        reproduction=dict(d.get("reproduction") or {}),
        chain=[ChainLink.from_dict(c) for c in d.get("chain") or []],
        pages_url=str(d.get("pages_url") or ""),
    )


__all__ = [
    "Blame", "NightlyResult", "ReportPaths", "chain_text", "culprit_word", "ends_words", "heading", "kind_word", "note_words", "patch_message",
    "Streak", "blame_decision", "load_result", "render_comment",
    "render_issue", "render_json", "render_markdown", "render_summary", "run_result_from_dict", "seen_marker",
    "write_report",
]
