"""The evidence beside the culprit: the first bad's failing reply next to the last good's reply to
the same prompt (issue 25, input 1).

A maintainer acts on the garbage itself, not on a verdict word. From the probes of the two ends of
the final range this picks one prompt size (the ``requested`` size: the reproducer's prompt is a
function of the size and the recipe's seed, so the same requested size is the same prompt) at which
one end's reply is GARBAGE and the other's OK -- a failing reply with text before an empty one, then
the smallest such size -- and returns both replies
(``SizeResult.excerpt``: the first 120 characters, control characters escaped) with their reasons.
A reference comparison (``regress: diverges``) adds both greedy continuations (candidate and
reference, at most :data:`bisectbot.reproduce.reference.CONTINUATION_CHARS` characters each) and
the figures: first diverging token, edit distance, prompt-logprob difference and the tolerance.
A command reproducer gives each end's exit code and output tails instead.

Pure functions on a :class:`~bisectbot.models.RunResult`; no I/O. Rendering is the template's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import Candidate, ProbeResult, RunResult, Verdict
from ..provenance import measured_text

FAILING = ("GARBAGE",)
"""Row outcomes that count as the failing reply."""


@dataclass
class Reply:
    """One end's reply at one prompt size.

    ``requested``/``prompt_tokens`` in tokens (asked for / the server's count); ``text`` the
    reply's start as the reproducer kept it; ``reference`` the comparison figures of
    ``regress: diverges`` (``first_divergence``, ``edit_distance``, ``tokens``, ``logprob_mean``,
    ``tolerance``, ``continuation``, ``reference_continuation``), empty without a reference;
    ``measured`` where the probe's verdict came from: ``this run`` or ``ledger cache: measured WHEN in
    session ID`` (:func:`bisectbot.provenance.measured_text`, issue 23)."""

    candidate: Candidate
    requested: int | None
    prompt_tokens: int | None
    outcome: str
    text: str = ""
    reasons: list[str] = field(default_factory=list)
    reference: dict[str, Any] = field(default_factory=dict)
    exit: str = ""
    stdout: str = ""
    stderr: str = ""
    measured: str = "this run"


@dataclass
class Evidence:
    """The failing reply (``bad``) and the healthy one (``good``) of the two ends of the range.

    ``bad_end``/``good_end`` say which end each is (``first`` or ``last``: in a fix bisection the
    failing reply is the last broken's). ``same_prompt`` is False when the healthy end was never
    probed at the failing size; ``note`` then says which size is shown instead. ``reference_label``
    names the known-good server of a reference comparison."""

    bad: Reply
    good: Reply | None
    bad_end: str
    good_end: str
    same_prompt: bool
    note: str = ""
    reference_label: str = ""
    command: bool = False


def _rows(probes: list[ProbeResult], c: Candidate, session: str = "") -> list[dict[str, Any]]:
    """Every table row of the probes of ``c`` (verification re-probes included), probe order; each
    with ``_measured``, where its probe's verdict came from (:func:`bisectbot.provenance.measured_text`)."""
    return [{**r, "_measured": measured_text(p, session)}
            for p in probes if p.candidate.ref == c.ref and p.verdict is not Verdict.SKIP for r in p.table]


def _requested(row: dict[str, Any]) -> int | None:
    v = row.get("requested", row.get("size"))
    return v if isinstance(v, int) else None


def _text(row: dict[str, Any]) -> str:
    return str(row.get("excerpt") or row.get("reply") or row.get("content") or "")


def _worded(row: dict[str, Any]) -> bool:
    """True when the row kept some reply text (not only whitespace)."""
    return bool(_text(row).strip())


def _reply(c: Candidate, row: dict[str, Any]) -> Reply:
    reasons = row.get("reasons") or []
    ev = row.get("evidence") if isinstance(row.get("evidence"), dict) else {}
    ref = ev.get("reference") if isinstance(ev.get("reference"), dict) else {}
    return Reply(candidate=c, requested=_requested(row), prompt_tokens=row.get("prompt_tokens"),
                 outcome=str(row.get("outcome", "")),
                 text=_text(row),
                 reasons=[str(x) for x in (reasons if isinstance(reasons, list) else [reasons])], reference=dict(ref),
                 measured=str(row.get("_measured") or "this run"))


def _command_reply(p: ProbeResult, session: str = "") -> Reply:

    return Reply(candidate=p.candidate, requested=None, prompt_tokens=None, outcome=p.verdict.value,
                 reasons=[p.reason] if p.reason else [], exit=exit_text(p),
                 stdout=str(p.extra.get("stdout_tail") or ""), stderr=str(p.extra.get("stderr_tail") or ""),
                 measured=measured_text(p, session))


def _ends(result: RunResult) -> tuple[Candidate, Candidate] | None:
    final = result.final
    if final is None:
        return None
    first = final.first_bad or (final.culprits[0] if len(final.culprits) == 1 else None)
    if first is None or final.last_good is None:
        return None
    return first, final.last_good


def culprit_evidence(result: RunResult, command: bool = False) -> Evidence | None:
    """The failing and the healthy reply of the final range's two ends; None when the run has no
    range (no last good or no first bad) or no probe of either end kept a failing reply.

    ``command``: the reproducer is a command (its probes carry exit codes and output tails, no
    replies): the two ends' last probes are compared as runs."""
    ends = _ends(result)
    if ends is None:
        return None
    first, last = ends
    probes = [p for st in result.stages for p in st.probes]
    if command:
        runs = {c.ref: [p for p in probes if p.candidate.ref == c.ref and p.verdict is not Verdict.SKIP]
                for c in (first, last)}
        if not runs[first.ref] or not runs[last.ref]:
            return None
        return Evidence(bad=_command_reply(runs[first.ref][-1], result.session_id),
                        good=_command_reply(runs[last.ref][-1], result.session_id),
                        bad_end="first", good_end="last", same_prompt=True, command=True)
    rows = {"first": _rows(probes, first, result.session_id), "last": _rows(probes, last, result.session_id)}
    cand = {"first": first, "last": last}
    # the failing end: the first bad in a regression; the one with failing rows otherwise (a fix
    # bisection's last broken), the first bad when both have some
    bad_end = next((e for e in ("first", "last") if any(r.get("outcome") in FAILING for r in rows[e])), None)
    if bad_end is None:
        return None
    good_end = "last" if bad_end == "first" else "first"
    # the most telling failing reply first (issue 41 item 8): one with text before an empty one (an
    # empty reply is garbage too, but shows a maintainer nothing), then the smallest size
    failing = sorted((r for r in rows[bad_end] if r.get("outcome") in FAILING and _requested(r) is not None),
                     key=lambda r: (not _worded(r), _requested(r) or 0))
    healthy = [r for r in rows[good_end] if r.get("outcome") == "OK"]
    by_size = {}
    for r in healthy:
        by_size.setdefault(_requested(r), r)
    label = _reference_label(probes, cand[bad_end])
    for r in failing:
        twin = by_size.get(_requested(r))
        if twin is not None:
            return Evidence(_reply(cand[bad_end], r), _reply(cand[good_end], twin), bad_end, good_end, True,
                            reference_label=label)
    if not failing:
        return None
    r = failing[0]
    if not healthy:
        return Evidence(_reply(cand[bad_end], r), None, bad_end, good_end, False,
                        note=f"the {good_end} end has no OK reply in its probes", reference_label=label)
    size = _requested(r) or 0
    twin = min(healthy, key=lambda x: abs((_requested(x) or 0) - size))
    return Evidence(_reply(cand[bad_end], r), _reply(cand[good_end], twin), bad_end, good_end, False,
                    note=f"the {good_end} end was not probed at {size} tokens; its nearest OK reply is shown "
                         f"({_requested(twin)} tokens, another prompt)", reference_label=label)


def _reference_label(probes: list[ProbeResult], c: Candidate) -> str:
    for p in probes:
        ref = p.extra.get("reference") if p.candidate.ref == c.ref else None
        if isinstance(ref, dict) and ref.get("label"):
            return str(ref["label"])
    return ""


def exit_text(p: ProbeResult) -> str:
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


__all__ = ["Evidence", "FAILING", "Reply", "culprit_evidence", "is_command_result"]


def measured_metric(result: RunResult) -> str | None:
    """The metric a measured-value run (``regress: slower``, issue 39) sampled, from its probes'
    ``extra["measure"]``; None for any other run."""
    for st in result.stages:
        for p in st.probes:
            m = p.extra.get("measure")
            if isinstance(m, dict) and isinstance(m.get("metric"), str):
                return m["metric"]
    return None


def measure_text(p: ProbeResult) -> str:
    """A probe's samples as the report shows them: ``96.66 (94.1-99.2), n=10`` -- the median, the
    interquartile range (the spread) and the sample count; ``-`` without samples."""
    m = p.extra.get("measure")
    xs = m.get("samples") if isinstance(m, dict) else None
    if not isinstance(xs, list) or not xs or not all(isinstance(v, (int, float)) for v in xs):
        return "-"
    import statistics

    med = statistics.median(xs)
    if len(xs) < 2:
        return f"{med:.4g}, n=1"
    q = statistics.quantiles(xs, n=4)
    return f"{med:.4g} ({q[0]:.4g}-{q[2]:.4g}), n={len(xs)}"


def measured_evidence(result: RunResult) -> dict[str, Any] | None:
    """A measured-value run's evidence (issue 39): the metric, which way is better, and one row per
    role -- good end, last good, first bad, bad end (each once, in that order) -- with the candidate's
    samples (:func:`measure_text`) and its comparison with the good end's samples (shift in %, p);
    None for any other run or without a final stage."""
    final = result.final
    metric = measured_metric(result)
    if final is None or metric is None or not final.candidates:
        return None
    roles = [("good end", final.candidates[0]), ("last good", final.last_good), ("first bad", final.first_bad),
             ("bad end", final.candidates[-1])]
    rows, seen, better = [], set(), ""
    good_probe = next((x for x in final.probes if x.candidate.ref == final.candidates[0].ref
                       and isinstance(x.extra.get("measure"), dict)), None)
    good_xs = good_probe.extra["measure"].get("samples") if good_probe is not None else None
    for role, c in roles:
        if c is None or c.ref in seen:
            continue
        seen.add(c.ref)
        p = next((x for x in final.probes if x.candidate.ref == c.ref and isinstance(x.extra.get("measure"), dict)), None)
        if p is None:
            continue
        m = p.extra["measure"]
        better = better or str(m.get("better") or "")
        vs = m.get("vs_good") if isinstance(m.get("vs_good"), dict) else {}
        xs = m.get("samples")
        if not vs and role != "good end" and isinstance(good_xs, list) and good_xs and isinstance(xs, list) and xs:
            from ..verdict.measured import compare  # the end measured first was judged against nothing

            vs = compare([float(v) for v in xs], [float(v) for v in good_xs], str(m.get("better") or "higher")).to_dict()
        shift = vs.get("shift_pct")
        rows.append({"role": role, "candidate": c, "samples": measure_text(p),
                     "shift": f"{shift:+.1f} %" if isinstance(shift, (int, float)) else "-",
                     "p": f"{vs['p']:.2g}" if isinstance(vs.get("p"), (int, float)) else "-"})
    return {"metric": metric, "better": better, "rows": rows} if rows else None
