"""The run's result: blame decision, patch states on the first bad, report files, ``--dry-run`` plan.

:func:`finish_result` turns the stages of a run into its final :class:`RunResult`
(status, the may-blame verdict of :func:`bisectbot.bisect.may_blame`, patch states, the
command that reproduces the result); :func:`write_report` is the one place a result is written.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import Any

from ..bisect import Bisection, budget_text, may_blame, search_settings
from ..models import Candidate, ProbeResult, RunResult, StageResult, Status, Verdict, is_patch_mode
from ..recipe import Recipe
from ..report.reproduce_kit import reproduce_ends
from ..verdict.honesty import derived_rates_note, repeats_per_probe
from ..verdict.measured import measured_words


def finish_result(result: RunResult, recipe: Recipe, *, recipe_path: str, session_id: str,
                  all_cached: bool) -> RunResult:
    """Fill ``result``'s status, session id, patch states, blame note and reproduce command from
    its final stage (in place; returned). ``all_cached``: every verdict came from the probe cache."""
    final = result.final
    assert final is not None
    result.status = final.status
    result.session_id = session_id
    fill_patch_states(result)
    if (final.status is Status.CULPRIT and final.message == "" and final.first_bad
            and is_patch_mode(recipe.regress)):
        # which release, which patch state: the report's headline for patch questions
        final.message = patch_summary(final, recipe.regress)
    ok, why = may_blame(final.status, final.confidence, final.flags, recipe.bisect.blame_confidence)
    if ok:  # "verified" as verdict.record defines it: which of the two verdicts were measured now
        why = why.replace("culprit verified", f"culprit ({verified_ends(final)})", 1)
    result.notes.append(("may blame: " if ok else "will not blame: ") + why)
    if final.status is Status.CULPRIT and recipe.regress.mode == "slower" and recipe.reproducer.measure is not None:
        # issue 39: what a measured verdict rests on (repeats and bisect.flake do not apply to it)
        m = recipe.reproducer.measure
        result.notes.append(
            f"measured search: each verdict from {m.samples} to {m.max_samples} samples of "
            f"{m.metric or 'the command value'}, judged against both ends' samples by a two-sided Mann-Whitney test "
            f"(alpha {m.alpha:g}); {verification_words(final)}. A shift smaller than the run-to-run noise within "
            f"{m.max_samples} samples is a skip, never a culprit")
    elif final.status is Status.CULPRIT and not is_patch_mode(recipe.regress) and exact_search(recipe):
        # what "confidence 1.00" rests on (issue 12: a flaky bug probed once per candidate can
        # name a later commit, as git bisect run would; the search cannot tell it from the runs)
        result.notes.append(
            "exact search (one run per probe, no bisect.flake): the confidence assumes a deterministic "
            f"reproducer; {verification_words(final)}. For a bug that shows in only "
            "some runs, set reproducer.repeats or bisect.flake")
    good, bad = reproduce_ends(final)
    if good and bad:
        result.reproduce = (f"bisectbot run {shlex.quote(recipe_path)} "
                            f"--good {shlex.quote(end_arg(good))} --bad {shlex.quote(end_arg(bad))}")
    if all_cached:
        result.notes.append("every verdict came from the probe cache")
    return result


REPROBED = "the culprit and its predecessor were re-probed"
"""What the exact search's note says when both verification probes ran in this run."""


def _last_probes(final: StageResult, ends: dict[str, Candidate | None]) -> dict[str, ProbeResult | None]:
    """Per role, the last probe of that end's candidate in ``final`` (None when it has none)."""
    return {role: next((p for p in reversed(final.probes) if c is not None and p.candidate.ref == c.ref), None)
            for role, c in ends.items()}


def _in_start(final: StageResult, c: Candidate | None) -> str:
    """What verified ``c``'s verdict inside its one probe of this run (``bisect.flake_unit: request``:
    its agreeing requests, ``extra["agreeing"]`` set by the round loop), or ``""`` when it was not so
    verified (re-probed, measured once, or from the ledger)."""
    if c is None:
        return ""
    mine = [p for p in final.probes if p.candidate.ref == c.ref]
    if len(mine) != 1:
        return ""
    agree = mine[0].extra.get("agreeing") if isinstance(mine[0].extra, dict) else None
    return str(agree.get("what") or "") if isinstance(agree, dict) and int(agree.get("count") or 0) >= 2 else ""


def verification_words(final: StageResult) -> str:
    """What verified the culprit (issue 23: a verdict claims only what was tested): :data:`REPROBED`
    when the last probes of the first bad and the last good were measured in this run and re-probed;
    a role verified by agreeing requests of its one probe (``bisect.flake_unit: request``, issue 40)
    is named with them (``the culprit was re-probed; the predecessor was verified by OK on all 2
    prompts the bad end failed, in one start (bisect.flake_unit: request), not re-probed``); else
    which of them came from the ledger cache and when (``the culprit and its predecessor were
    verified from cached verdicts of 2026-12-02 05:05:03 UTC (session 84601e0d964f), not re-probed
    in this run``)."""
    from ..provenance import when_text
    from ..verdict.record import verification

    last = _last_probes(final, {"culprit": final.first_bad, "predecessor": final.last_good})
    v = verification(last)  # "verified", defined once (issue 35)
    cached, given = v.cached, v.given
    inside = {role: w for role, w in (("culprit", _in_start(final, final.first_bad)),
                                      ("predecessor", _in_start(final, final.last_good))) if w and role not in cached}
    if not cached and not inside and not given:
        return REPROBED

    def of(ms: list[dict[str, str]]) -> str:
        whens = sorted({when_text(m["measured_at"]) for m in ms})
        sessions = sorted({m["session"] for m in ms} - {""})
        return " and ".join(whens) + (f" (session {' and '.join(sessions)})" if sessions else "")

    if len(cached) == 2:
        return (f"the culprit and its predecessor were verified from cached verdicts of {of(list(cached.values()))}, "
                "not re-probed in this run")
    def source(src: str) -> str:
        return "the log" if src == "the replay log" else src

    if set(given) == {"culprit", "predecessor"} and len(set(given.values())) == 1:
        return f"the culprit's and its predecessor's verdicts come from {source(given['culprit'])} (not re-probed)"
    parts = []
    for role in ("culprit", "predecessor"):
        if role in given:
            parts.append(f"the {role}'s verdict comes from {source(given[role])} (not re-probed)")
        elif role in cached:
            parts.append(f"the {role} was verified from the cached verdict of {of([cached[role]])}, not re-probed")
        elif role in inside:
            parts.append(f"the {role} was verified by {inside[role]}, not re-probed")
        else:
            parts.append(f"the {role} was re-probed in this run")
    return "; ".join(parts)


def verified_ends(final: StageResult) -> str:
    """Which of the first bad and the last good were measured in this run, by
    :func:`bisectbot.verdict.record.verification` (the one definition of "verified", issue 35):
    ``verified in this run: first bad X and last good Y measured in this run`` when both were (how: the
    exact search's note, :func:`verification_words`), else
    ``first bad X measured in this run; last good Y taken from the ledger cache (measured WHEN in
    session S), not re-measured`` (and so on): the note never says "verified" for a verdict this run
    did not measure."""
    from ..provenance import when_text
    from ..verdict.record import verification

    ends = {"first bad": final.first_bad, "last good": final.last_good}
    v = verification(_last_probes(final, ends))

    def name(role: str) -> str:
        c = ends[role]
        return f"{role} {(c.label or c.ref[:12]) if c is not None else '-'}"

    if v.all_measured and len(v.measured) == 2:
        return f"verified in this run: {name('first bad')} and {name('last good')} measured in this run"
    parts = [f"{name(role)} measured in this run" for role in v.measured]
    parts += [f"{name(role)} taken from the ledger cache (measured {when_text(m['measured_at'])}"
              f"{' in session ' + m['session'] if m.get('session') else ''}), not re-measured"
              for role, m in v.cached.items()]
    parts += [f"{name(role)} taken from {src}, not measured" for role, src in v.given.items()]
    return "; ".join(parts) or "no probe of its ends in this run"


def verified_word(final: StageResult, verify: bool) -> str:
    """The culprit line's word on verification (``culprit: ... confidence 100.0%, WORD``), by the one
    definition (:func:`bisectbot.verdict.record.verification`): ``verified`` only when this run
    measured both the first bad and the last good; ``not verified`` when the recipe turned
    verification off; else where the ends' verdicts came from (the ledger cache, a replay log, a
    maintainer), ``not re-measured``."""
    from ..verdict.record import verification

    if not verify:
        return "not verified"
    v = verification(_last_probes(final, {"first bad": final.first_bad, "last good": final.last_good}))
    if v.all_measured and len(v.measured) == 2:
        return "verified"
    sources = (["the ledger cache"] if v.cached else []) + sorted(set(v.given.values()))
    return f"ends from {' and '.join(sources)}, not re-measured" if sources else "not verified"


def end_arg(c: Candidate) -> str:
    """A candidate as ``run --good/--bad`` takes it: its ref, or for a component tuple run on this host
    (``meta["commits"]`` without an image to overlay; the pin descent's stages, issue 26) the
    ``component=sha,...`` pins, so the printed command repeats that stage."""
    commits = c.meta.get("commits")
    if isinstance(commits, dict) and len(commits) > 1 and not c.meta.get("base"):
        return ",".join(f"{k}={v}" for k, v in sorted(commits.items()))
    return c.ref


def exact_search(recipe: Recipe) -> bool:
    """Whether ``recipe``'s search stays exact: no ``bisect.flake`` rates (or both 0) and one run
    per probe (:func:`bisectbot.verdict.honesty.repeats_per_probe`; with more, the rates are
    derived from the bad end and the search turns noisy)."""
    fl = recipe.bisect.flake
    if fl is not None and (fl.false_positive or fl.false_negative):
        return False
    return repeats_per_probe(recipe) <= 1


def fill_patch_states(result: RunResult) -> None:
    """Give each ``result.patch_stack`` entry (``{"id"}``) the patch's state on the final stage's
    first-bad candidate (``state``: e.g. ``applies [variant v1]``, ``detail``), taken from that
    candidate's probe (``ProbeResult.patches``). Entries stay as they are when no probe has them."""
    final = result.final
    if final is None or final.first_bad is None or not result.patch_stack:
        return
    recs: dict[str, dict[str, Any]] = {}
    for p in reversed(final.probes):
        if p.candidate.ref == final.first_bad.ref and p.patches:
            recs = {str(x.get("id")): x for x in p.patches}
            break
    where = final.first_bad.label or final.first_bad.ref
    for entry in result.patch_stack:
        rec = recs.get(str(entry.get("id")))
        if rec and not entry.get("state"):
            entry["state"] = str(rec.get("label") or rec.get("state") or "")
            entry["detail"] = str(rec.get("detail") or f"on first bad {where}")




def exit_code(result: RunResult, blame_confidence: float = 0.66) -> int:
    """0 when the run names a culprit it may blame (:func:`bisectbot.bisect.may_blame`), 3 for
    anything else: range, inconclusive, boundary failed, no regression, and a culprit that it
    will not blame (flagged, or below ``blame_confidence``; issue 12)."""
    from ..errors import EXIT_INCONCLUSIVE, EXIT_OK

    final = result.final
    if result.status is not Status.CULPRIT or final is None:
        return EXIT_INCONCLUSIVE
    ok, _ = may_blame(final.status, final.confidence, final.flags, blame_confidence)
    return EXIT_OK if ok else EXIT_INCONCLUSIVE


def patch_summary(stage: StageResult, regress: Any) -> str:
    """``first-bad: vllm 0.23.0 (vllm-sparse-mla-workspace already upstream); last-good: vllm 0.22.1``.

    For a patch regress mode: the patch's state on the first-bad candidate comes from its
    probe (``ProbeResult.patches``).
    """
    pid = str(getattr(regress, "arg", "") or str(regress).partition(":")[2].strip())
    fb, lg = stage.first_bad, stage.last_good
    state = ""
    for p in reversed(stage.probes):
        if fb is not None and p.candidate.ref == fb.ref and p.verdict is Verdict.BAD:
            st = next((x for x in p.patches if x.get("id") == pid), None)
            if st:
                state = f" ({pid} {st.get('label') or st.get('state')})"
            break
    out = f"first-bad: {fb.label or fb.ref if fb else '-'}{state}"
    if lg is not None:
        out += f"; last-good: {lg.label or lg.ref}"
    return out


def write_report(result: RunResult, out_dir: str | Path, blame_confidence: float = 0.66,
                 mentions: list[str] | None = None) -> list[Path]:
    """Write a run's result into ``out_dir``: ``result.json`` (:meth:`RunResult.to_dict`) and,
    through :func:`bisectbot.report.write_report` (Jinja2 templates), ``report.md``,
    ``report.json``, the would-be GitHub issue ``issue.md`` and, in GitHub Actions, the job
    summary. Returns the paths written. Raises ``OSError`` when a file cannot be written.

    The one place where a run's result is written. ``blame_confidence`` (0..1, recipe
    ``bisect.blame_confidence``): below it the issue names a range, not a culprit.
    """
    from ..report import write_report as render_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jp = out / "result.json"
    data = result.to_dict()
    jp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths = render_report(result, out, nightly_history(result), mentions=mentions or (),
                          blame_confidence=blame_confidence, result_data=data)
    return [jp, *paths.all()]


def nightly_history(result: RunResult):  # -> bisectbot.report.NightlyResult | None
    """The nightlies stage 1 probed, oldest first, one probe each (the last): the input of the
    report's nightly status (first bad / last good nightly, flips) and threshold-over-nightlies
    chart. None when stage 1 was not over nightlies."""
    from ..models import CandidateKind
    from ..report import NightlyResult

    if not result.stages or not result.stages[0].candidates:
        return None
    st = result.stages[0]
    if st.candidates[0].kind is not CandidateKind.NIGHTLY:
        return None
    last: dict[str, ProbeResult] = {}
    for p in st.probes:
        if p.verdict is not Verdict.SKIP or p.candidate.ref not in last:
            last[p.candidate.ref] = p
    probes = [last[c.ref] for c in st.candidates if c.ref in last]
    below = None
    if result.regress.startswith("threshold-below"):
        with contextlib.suppress(ValueError):
            below = int(result.regress.split(":", 1)[1])
    return NightlyResult(recipe=result.recipe, probes=probes, kind=result.kind, regress=result.regress,
                         threshold_below=below)


def plan_text(recipe: Recipe, candidates: list[Candidate], k: int = 1, estimate: Any = None) -> str:
    """The ``--dry-run`` plan: range size, search mode, the first probes and what comes next; with
    ``estimate`` (:func:`plan_estimate`, made once by the caller, which also reports it as data), how long
    those probes should take."""
    bs = recipe.bisect
    from ..verdict.agreement import expected_reprobes
    from ..verdict.scope import scoped

    b = Bisection(len(candidates), **search_settings(bs, len(candidates)))
    b.expected_reprobes = expected_reprobes(recipe)
    steps = b.steps_left()  # before the plan feeds it the ends' expected verdicts
    noisy = not b.exact
    derived = None if noisy else derived_rates_note(recipe)
    how = (f"{derived}; exact until then (~{b.steps_left()} probes if it stays exact)" if derived else
           f"{'noisy (Bayesian, confidence ' + format(bs.confidence, '.0%') + ')' if noisy else 'exact'}"
           f", ~{b.steps_left()} probes, {budget_text(b)}")
    lines = [f"plan: {len(candidates)} candidates from {candidates[0].label} (good) to {candidates[-1].label} (bad)",
             f"search: {how}, {k} at a time" + measured_words(recipe),
             f"regress: {recipe.regress}; reproducer key {recipe.verdict_hash()}"]
    if bs.verify and b.exact:  # issue 40: what a verification costs
        start = "server start" if recipe.server.command or recipe.reproducer.kind == "prefill" else "run"
        lines.append(f"verify: ~{b.expected_reprobes} of the ~{steps} probes re-probe a role, up to 2 "
                     f"(bisect.flake_unit: {bs.flake_unit}): "
                     + ("a role (culprit, predecessor) whose probe held two agreeing requests needs none"
                        if bs.flake_unit == "request" else
                        f"the culprit and its predecessor, each in a {start} of its own"
                        + ("" if bs.flake_unit != "start" or not scoped(recipe) else
                           " (the culprit's not once the run has seen a build fail in two starts: then its "
                           "probe showing the bad end's failure stands for two)")))
    wheels = getattr(recipe.source, "wheels", None)
    if wheels is not None:
        lines.append(f"candidates: the prebuilt {wheels.package} wheel of each commit from {wheels.index} where it "
                     "has one, else a source build (said per probe)")
    # the boundary probes, assumed to come out as expected, then the first search probes
    step = 0
    while not b.done and step < 3:
        batch = b.next_probes(k)
        if not batch:
            break
        for i in batch:
            expect = Verdict.BAD if i == len(candidates) - 1 else Verdict.GOOD if i == 0 else None
            if expect is None:
                la = b.lookahead(i)
                nxt = ", ".join(f"if {v.value}: {candidates[j].label}" for v, j in la.items() if j is not None)
                lines.append(f"probe {candidates[i].label}   (next {nxt})")
            else:
                lines.append(f"probe {candidates[i].label}   (boundary: expect {expect.value})")
                b.feed(i, expect)
        if any(i not in (0, len(candidates) - 1) for i in batch):
            break
        step += 1
    if estimate is not None:  # issue 40: the plan says how long
        lines.append(estimate.line())
    return "\n".join(lines)


def plan_estimate(recipe: Recipe, n: int, ledger: Any) -> Any:
    """How long the plan of ``n`` candidates should take (:class:`bisectbot.session.estimate.Estimate`): the
    probes the search expects (verification included) at the median this ledger measured for the recipe."""
    from ..verdict.agreement import expected_reprobes
    from .estimate import estimate

    b = Bisection(n, **search_settings(recipe.bisect, n))
    b.expected_reprobes = expected_reprobes(recipe)
    return estimate(ledger, recipe.name, recipe.runner, b.steps_left(),
                    reference=recipe.reproducer.reference is not None)




def new_result(recipe: Recipe) -> RunResult:
    """An empty (inconclusive) :class:`RunResult` of ``recipe``: its stages are filled by the run."""
    r = recipe
    return RunResult(recipe=r.name, kind="fix" if r.regress.is_fix else "regression", status=Status.INCONCLUSIVE,
                     model=r.model, tp=r.tp, runner=r.runner, regress=str(r.regress),
                     patch_stack=[{"id": p} for p in r.patches])
