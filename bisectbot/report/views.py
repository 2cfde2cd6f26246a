"""What a result says, in words and rows, for every rendering (report, issue, comment, summary).

Headings and one-line summaries (:func:`heading`, :func:`culprit_word`, :func:`note_words`,
:func:`patch_message`), candidate links and ranges (:func:`candidate_link`, :func:`range_links`),
the rows of the per-nightly table, log excerpts, the pin chain (:func:`chain_text`) and the
culprit marker a later run reads back (:func:`culprit_marker`, :func:`culprits_in`). Plain
functions over :class:`bisectbot.models.RunResult`; the templates that lay them out are in
:mod:`bisectbot.report.templating`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import Candidate, ChainLink, ProbeResult, RunResult, StageResult, Status
from ..provenance import cached_from, measured_text
from ..sanitize import redact, sanitize, visible
from .blame import Blame
from .evidence import exit_text, is_command_result, measure_text
from .words import ends_words, patch_mode, verdict_word

INLINE_REQUEST_CHARS = 16_000
"""``request.json`` longer than this (characters) is not inlined in the report; ``make_request.py`` is."""


TEXT_KEYS = ("reply", "output", "content", "reasoning", "excerpt")


LOG_TAIL_BYTES = 256 * 1024
"""Bytes read from the end of each log file for excerpts."""


_URL_RE = re.compile(r"^https?://[^\s<>()\[\]`\"']+$")


_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


_MENTION_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]{1,100})?$")


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
             "reason": p.reason, "exit": exit_text(p), "measured": measured_text(p, self.session),
             "measure": measure_text(p)}
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
            row("reply", lambda r: r.text if r.text.strip() else "(empty reply)", limit=400)]
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
                out.append({"title": f"{name}: {label} (tail) of the run, exit {exit_text(p)}", "text": val,
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
    return note.replace("may blame: culprit", "answer").replace("culprit", "answer")


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


def summary_line(result: RunResult, blame: Blame) -> str:
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
    return {"text": chain_text(result.chain), "rows": rows, "notes": [link.note for link in result.chain if link.note],
            "pins": _rewritten_pins(result)}


def _rewritten_pins(result: RunResult) -> list[str]:
    """The holding trees' pin lines as the descended stages built them (issue 38): for each link
    that is not a vehicle, its first-bad's probe's ``extra["pins_rewritten"]`` (else the stage's first
    probe that has one), one ``path:line: before → after`` text per line (plain; callers sanitise)."""
    out: list[str] = []
    for link in result.chain:
        if link.role == "vehicle":
            continue
        st = next((s for s in result.stages if s.name == link.stage and s.component == link.component), None)
        if st is None:
            continue
        probes = [pr for pr in st.probes if pr.extra.get("pins_rewritten")]
        fb = link.first_bad.ref if link.first_bad else None
        pr = next((x for x in probes if x.candidate.ref == fb), probes[0] if probes else None)
        for row in (pr.extra["pins_rewritten"] if pr is not None else []):
            after = row.get("after")
            how = f"→ {after}" if after else "was not found where it was read, not rewritten"
            out.append(f"{link.component} {_chain_name(pr.candidate)}: {row.get('path')}:{row.get('line')}: "
                       f"{row.get('before')} {how}")
    return out
