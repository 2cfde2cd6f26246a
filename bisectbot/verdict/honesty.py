"""Running concerns of an honest search (issue 12), beside the round loop rather than in it.

* :func:`check_runnable`: a reproducer command that cannot run (exit 126/127) on the bad
  end is re-checked on the good end, as ``git bisect run`` does since git 2.36; when it
  cannot run there either the run stops with :class:`bisectbot.errors.BadInput` (exit 2,
  no issue) naming the command. A candidate that merely lacks the script stays a skip.
* :func:`adapt_rates`: with repeats (``reproducer.repeats > 1``; for a threshold search
  the requests per size, :func:`bisectbot.reproduce.search.effective_repeats`) and no
  ``bisect.flake`` rates, the per-run hit rate is estimated from the bad end's repeats
  (:func:`bisectbot.bisect.estimate_hit_rate`; a command's runs, or a threshold search's
  replies at and above the first-garbage size,
  :func:`bisectbot.reproduce.search.hit_counts`) and the per-probe rates derived from
  it (:func:`bisectbot.bisect.per_probe_rates`), weighed over the rate's Beta posterior
  (:func:`bisectbot.bisect.hit_rate_prior`, :meth:`bisectbot.bisect.Bisection.set_rate_mixture`:
  few runs say little, issue 23); :func:`derived_rates_note` says so in the
  plan and a stage's first line, before the bad end is probed. The leading first-bad
  candidate's pooled runs may lower it later.
* :func:`run_repeats`: the repeats of one command probe, combined one-sidedly
  (:func:`bisectbot.bisect.combine_repeats`: bad if any run is bad; in a fix bisection
  still broken if any run fails).

The search rules themselves live in :mod:`bisectbot.bisect`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bisect import (
    CONFIRMATION_MASS,
    MIN_HIT_RATE,
    RUN_FALSE_POSITIVE,
    Bisection,
    Signature,
    budget_text,
    estimate_hit_rate,
    hit_rate_prior,
    minority,
    per_probe_rates,
    two_sided_prior,
)
from ..errors import BadInput
from ..models import Candidate, ProbeResult, Verdict
from ..recipe import Recipe
from ..verdict import UNRUNNABLE, Judgement

#: Signature kind of a measured-value probe whose command ran but printed no measurement (issue 39).
UNMEASURABLE = "unmeasurable"


def is_unrunnable(res: ProbeResult) -> bool:
    """True when the probe's command could not be started (signature ``unrunnable``), or ran and
    printed no measurement (``unmeasurable``, ``regress: slower``): on both ends that is the recipe's
    fault, never the candidates'."""
    sig = Signature.parse(res.signature) if res.signature else None
    return res.verdict is Verdict.SKIP and sig is not None and sig.kind in (UNRUNNABLE, UNMEASURABLE)


def _command_field(recipe_path: str, path: tuple[str, ...] = ("reproducer", "command")) -> str:
    """``FILE:LINE:COL: reproducer.command: `` (or the field ``path`` names, else the command) of the
    recipe file at ``recipe_path``; ``""`` when it cannot be read (e.g. a recipe built in memory)."""
    from ..located import LocatedErrors, compose, read_text, where

    if not recipe_path:
        return ""
    try:
        data, marks = compose(read_text(recipe_path), recipe_path)
    except LocatedErrors:
        return ""
    node: object = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _command_field(recipe_path) if path != ("reproducer", "command") else ""
        node = node[key]
    return where(marks, data, path, recipe_path) + ": "


def check_runnable(recipe: Recipe, res: ProbeResult, good: Candidate,
                   probe_good: Callable[[Candidate], ProbeResult], recipe_path: str = "") -> None:
    """After the bad end's probe ``res`` could not run its command: probe the good end
    (``probe_good``, cached like any probe); when the command cannot run there either,
    raise :class:`BadInput` naming the command and both exit codes, prefixed with the
    ``FILE:LINE:COL: reproducer.command`` of the recipe file ``recipe_path`` when given.
    Returns when it runs on the good end (the bad end is then an untestable end: the
    search says so)."""
    if not is_unrunnable(res):
        return
    other = probe_good(good)
    if not is_unrunnable(other):
        return
    argv = " ".join(recipe.reproducer.command or [])
    kinds = {Signature.parse(x.signature).kind for x in (res, other)}
    if kinds == {UNMEASURABLE}:  # the command ran on both ends: its output is not what regress: slower reads
        metric = recipe.reproducer.measure.metric if recipe.reproducer.measure else None
        field = _command_field(recipe_path, ("reproducer", "measure", "metric") if metric else ("reproducer", "command"))
        raise BadInput(
            f"{field}the reproducer printed no measurement on either end: {res.reason} (the bad end); "
            f"{other.reason} (the good end {good.label or good.ref}). regress: slower reads the command's last "
            "stdout line: a number, or a JSON object whose key reproducer.measure.metric names")
    raise BadInput(
        f"{_command_field(recipe_path)}"
        f"the reproducer command cannot run: {argv!r} gave {res.reason} on the bad end and {other.reason} "
        f"on the good end {good.label or good.ref} (checked there as git bisect run does); make it executable "
        "(chmod +x), fix its path, or run it through an interpreter, e.g. ['sh', './repro.sh']"
        + veiled_hint(recipe.reproducer.command or []))


def veiled_hint(argv: list[str], path: str | None = None) -> str:
    """Why the program ``argv`` names may not run in the sandbox although it runs in a shell: it lies under
    a home the sandbox veils (a pyenv or asdf shim runs its own tool from there), said with what to name
    instead; ``""`` when it does not, or the sandbox is off. ``path``: the candidate's ``PATH`` (default
    the bot's)."""
    import shutil

    from .. import sandbox

    if not argv or not sandbox.enabled():
        return ""
    found = shutil.which(argv[0], path=path) if "/" not in argv[0] else argv[0]
    if not found:
        return ""
    veiled = [v for v in sandbox.veiled() if any(q.is_relative_to(v) for q in (Path(found), Path(found).resolve()))]
    if not veiled:
        return ""
    return (f"; {found} lies under {veiled[0]}, which the candidate's sandbox veils (a shim such as pyenv's runs "
            "its own tool from there): name an interpreter outside it by its absolute path, e.g. /usr/bin/python3 "
            "or a virtualenv's bin/python")


def repeats_per_probe(recipe: Recipe) -> int:
    """Runs that one probe combines: ``reproducer.repeats`` for ``regress: command`` (and a
    size-less fix bisection), else the requests per size of the threshold search
    (:func:`bisectbot.reproduce.search.effective_repeats`; a command reproducer runs
    sequentially, so its ``concurrency`` does not count)."""
    spec = recipe.reproducer
    sizeless = spec.kind == "command" and not any("{size}" in a for a in (spec.command or []))
    if recipe.regress.mode == "command" or (recipe.regress.mode == "success" and sizeless):
        return spec.repeats
    from ..reproduce.search import effective_repeats

    if spec.kind == "command":
        spec = spec.model_copy(update={"concurrency": 1})
    return effective_repeats(spec)


def derived_rates_note(recipe: Recipe) -> str | None:
    """How the search is capped when :func:`adapt_rates` will set its rates: with repeats
    (:func:`repeats_per_probe` > 1) and no ``bisect.flake``, for the plan (``--dry-run``) and
    a stage's first line, which would otherwise call the search exact; None otherwise."""
    reps = repeats_per_probe(recipe)
    if recipe.bisect.flake is not None or reps <= 1:
        return None
    cap = (f"budget {recipe.bisect.max_probes} probes (max_probes)" if recipe.bisect.max_probes is not None
           else "budget 3 x information bound + 4 good/bad verdicts at those rates")
    if not recipe.regress.is_fix:
        return (f"no bisect.flake: each candidate's {reps} runs a probe are weighed once the first is counted "
                f"(the good side's false-positive rate learnt; the hit rate the bug's one rate, at least "
                f"{MIN_HIT_RATE:.0%} a run, each bad candidate's own, or either): a noisy search (Bayesian, confidence "
                f"{recipe.bisect.confidence:.0%}), {cap}")
    end = "good (still broken) end"
    return (f"flake rates derived from the {end}'s {reps} runs (no bisect.flake): a noisy search "
            f"(Bayesian, confidence {recipe.bisect.confidence:.0%}) once the {end} is probed, {cap}")


def adapt_rates(recipe: Recipe, b: Bisection, index: int, res: ProbeResult,
                echo: Callable[[str], None]) -> None:
    """With repeats and no recipe flake rates: in a regression search, weigh every candidate's counted
    runs under an unknown good-side false-positive rate and open hit rates (the bug's one rate, each
    bad candidate's own, or either: :func:`_open_rates`, issue 35); in a fix bisection, set the
    search's per-probe rates from the per-run hit rate of the bug as below. A line says what was
    derived.

    The first estimate comes from the known-failing end once it was probed: the bad end of a
    regression, the good end ("still broken") of a fix bisection (there a miss reads
    "fixed": the rates are swapped). After that, whenever the probed candidate is the
    leading first-bad (first-fixed) candidate, its runs so far, pooled over its probes, may
    **lower** the rate (never raise it): a bug that shows rarely at the culprit and often at
    the bad end (its hit rate growing over the range) made the bad end's rate trust the
    culprit's predecessor's "good" far too much and named a later commit, verified at 0.99+
    (issue 12). Only the leader counts: lowering on every rare hit anywhere made stray false
    alarms on healthy commits (one run in five) look like the bug."""
    reps = repeats_per_probe(recipe)
    if recipe.bisect.flake is not None or reps <= 1 or b.done or not b.history:
        return
    fix = recipe.regress.is_fix
    last = b.history[-1]
    if last.index != index or last.effective is Verdict.SKIP:
        return
    runs, hits = int(res.extra.get("runs") or 0), int(res.extra.get("hits") or 0)
    pooled = b.runs_seen.get(index, (0, 0))
    b.runs_seen[index] = (pooled[0] + hits, pooled[1] + runs)
    b.attach_runs(hits, runs)
    if b.open_rates or b.two_sided:
        return
    if not recipe.regress.is_fix and runs > 0:
        _open_rates(recipe, b, reps, echo)
        return
    if _two_sided(recipe, b, index, reps, echo):
        return
    current = b.hit_rate
    if current is None:
        if index != (0 if fix else b.n - 1) or runs <= 1 or hits <= 0:
            return
        h = estimate_hit_rate(hits, runs)
    else:
        a, first, mass = b._best_class()
        hits, runs = b.runs_seen[index]
        if index != first or mass < CONFIRMATION_MASS or hits <= 0 or runs <= 1:
            return
        h = estimate_hit_rate(hits, runs)
        if h >= current - 1e-12:
            return
    fp, fn = per_probe_rates(h, reps)
    rates, weights = hit_rate_prior(hits, runs)
    pairs = [per_probe_rates(t, reps) for t in rates]
    if fix:  # a broken build read "fixed" is the false positive of a fix search
        fp, fn = fn, fp
        pairs = [(b_, a_) for a_, b_ in pairs]
    b.hit_rate = h
    # issue 23: the search weighs every plausible hit rate (few runs say little: 2 of 3 runs
    # taken as 0.40 made 4 clean probes of a bad candidate (true rate 0.3) read "good" at 0.99)
    b.set_rate_mixture(pairs, weights, recipe.bisect.parallel)
    end, combined = ("good end (still broken)", "still broken if any") if fix else ("bad end", "bad if any")
    where = f"at the {end}" if current is None else (
        f"lowered at the leading candidate {res.candidate.label or res.candidate.ref[:10]} (was {current:.2f})")
    lo, hi = _weight_span(rates, weights)
    echo(f"hit rate {where}: {hits} of {runs} runs; per-run hit rate taken as {h:.2f} (the search weighs "
         f"{lo:.2f}..{hi:.2f}, 90 % of the weight): per probe ({reps} runs, {combined}) false_positive "
         f"{fp:.3f}, false_negative {fn:.3f}; noisy search, ~{b.steps_left()} probes, {budget_text(b)}")


#: Per-run false-positive rates a regression search weighs when the recipe gives none
#: (:func:`_open_rates`): the one-sided point :data:`bisectbot.bisect.RUN_FALSE_POSITIVE` (a healthy
#: build essentially never fails) with half the prior weight, and the midpoints of 40 equal bins of
#: (0, 1) sharing the other half (a noisy measurement: a throughput check below its limit now and then).
OPEN_FALSE_POSITIVES = [RUN_FALSE_POSITIVE] + [(i + 0.5) / 40 for i in range(40)]
OPEN_WEIGHTS = [0.5] + [0.5 / 40] * 40


def _open_rates(recipe: Recipe, b: Bisection, reps: int, echo: Callable[[str], None]) -> None:
    """Issue 35: a regression search with repeats and no ``bisect.flake`` rates weighs every
    candidate's counted runs from its first counted probe on under one unknown false-positive rate
    of the good side and a hit rate that is the bug's one rate (at least
    :data:`bisectbot.bisect.MIN_HIT_RATE`), each bad candidate's own, either, or one rate up to a
    step and another from it (:meth:`bisectbot.bisect.Bisection.set_open_hit_rates`). It replaces three rules that each held
    for one shape and failed the next: the hit rate taken from the bad end for every candidate (a
    bug whose rate grows over the range named a later commit at 0.99+ in 22 of 50 generated worlds),
    the switch to two-sided noise only once the bad end had failed every run (a bad end that missed
    once: world 178, c1 named at 0.992, the truth c3), and lowering the hit rate at the leading
    candidate. The step description came with the next member of the growing kind: a bug in 8-15 %
    of runs until a second trigger raises it to 70-100 % (a later commit named at 0.99+ in 7 of 30
    simulated searches without it)."""
    b.set_open_hit_rates(OPEN_FALSE_POSITIVES, OPEN_WEIGHTS, reps, MIN_HIT_RATE, recipe.bisect.parallel)
    echo(f"no bisect.flake rates: the search weighs every candidate's runs ({reps} a probe), learning the good "
         f"side's false-positive rate from the runs of the candidates it holds good (the good end first) and "
         f"the hit rate as the bug's one rate (at least {MIN_HIT_RATE:.0%} a run), each bad candidate's own, "
         f"either, or one rate up to a step and another from it, as the runs say: per probe false_positive ~{b.fp:.3f}, false_negative ~{b.fn:.3f}; "
         f"~{b.steps_left()} probes, {budget_text(b)}")


def _two_sided(recipe: Recipe, b: Bisection, index: int, reps: int, echo: Callable[[str], None]) -> bool:
    """Issue 35, input 4: turn the search two-sided once a probe's runs fail a minority
    (:func:`bisectbot.bisect.minority`, pooled over the candidate's probes) while the bad end failed
    every one of its runs: a bug that fails every run at the bad end does not fail one run in three
    of a bad build, so those failures are the measurement's noise on a good build (a throughput check
    below its limit now and then), not the bug. The search then weighs every probe's counted runs
    under both unknown per-run rates (:func:`bisectbot.bisect.two_sided_prior`,
    :meth:`bisectbot.bisect.Bisection.set_run_mixture`): the false-positive rate is learnt from the
    good end's runs (and every later probe's) as the hit rate is from the bad end's. Regression
    searches only (a fix bisection's runs combine the other way). True when it did (or had)."""
    if recipe.regress.is_fix:
        return False
    bad_hits, bad_runs = b.runs_seen.get(b.n - 1, (0, 0))
    hits, runs = b.runs_seen.get(index, (0, 0))
    if bad_runs == 0 or bad_hits != bad_runs or not minority(hits, runs):
        return False
    pairs, weights = two_sided_prior()
    b.set_run_mixture(pairs, weights, reps, recipe.bisect.parallel)
    good_hits, good_runs = b.runs_seen.get(0, (0, 0))
    echo(f"two-sided noise: {hits} of {runs} runs failed at {'the good end' if index == 0 else f'candidate {index}'} "
         f"while the bad end failed {bad_hits} of {bad_runs}: a good build fails some runs too. The search now "
         f"weighs every probe's runs, learning the false-positive rate (good end so far: {good_hits} of {good_runs} "
         f"runs) with the hit rate: per probe ({reps} runs) false_positive ~{b.fp:.3f}, false_negative "
         f"~{b.fn:.3f}; ~{b.steps_left()} probes, {budget_text(b)}")
    return True


def _weight_span(rates: list[float], weights: list[float], mass: float = 0.9) -> tuple[float, float]:
    """The central ``mass`` of a weighted grid of rates: ``(lowest, highest)`` rate inside it."""
    tail = (1 - mass) / 2
    acc, lo, hi = 0.0, rates[0], rates[-1]
    for t, w in zip(rates, weights):
        if acc <= tail < acc + w:
            lo = t
        if acc < 1 - tail <= acc + w:
            hi = t
        acc += w
    return lo, hi


def run_repeats(run_once: Callable[[], tuple[Judgement, dict[str, Any]]], repeats: int,
                all_runs: bool, fix: bool = False) -> tuple[Judgement, dict[str, Any]]:
    """Run one probe's command ``repeats`` times and combine one-sidedly: the first run that
    shows the bug decides (unless ``all_runs``: every run is made, to count hits); a skip ends
    the probe (untestable); no run showing it -> the other verdict. ``extra`` gets ``runs`` and
    ``hits`` (runs that showed the bug).

    The bug shows as a bad run, or with ``fix`` (a fix bisection, ``regress: success``, whose
    runs are judged inverted) as a good, "still broken" run: a fixed build never shows the bug,
    a broken one may pass, so one failing run makes the probe "still broken" and "fixed" needs
    every run to pass (before: one passing run of a broken build made it "fixed")."""
    shows = Verdict.GOOD if fix else Verdict.BAD
    runs = hits = 0
    first_hit: tuple[Judgement, dict[str, Any]] | None = None
    last: tuple[Judgement, dict[str, Any]] | None = None
    for _ in range(max(1, repeats)):
        j, extra = run_once()
        runs += 1
        last = (j, extra)
        if j.verdict is Verdict.SKIP:
            break
        if j.verdict is shows:
            hits += 1
            first_hit = first_hit or (j, extra)
            if not all_runs:
                break
    assert last is not None
    j, extra = first_hit or last
    if repeats > 1 and j.verdict is not Verdict.SKIP:
        word = "still broken" if fix else "bad"
        j = Judgement(j.verdict, f"{j.reason} ({hits} of {runs} runs {word})", j.signature)
    return j, {**extra, "runs": runs, "hits": hits}


__all__ = ["adapt_rates", "check_runnable", "derived_rates_note", "is_unrunnable", "repeats_per_probe", "veiled_hint",
           "run_repeats"]
