"""The known-failing end is probed until its "not bad" is believable (issue 23, input 8).

The bad end of a regression search (the good end, "still broken", of a fix bisection) is
known to fail: the nightly or the user said so. With a flaky bug one probe of it may miss:
``repeats: 3`` and a bug seen in 30 % of runs miss ``0.7 ** 3 = 34 %`` of the time, and a
search that believes the first clean probe ends "no-regression" (40 % of runs did).

:func:`sequential_end` keeps probing that end while its probes come back clean, until either
a probe shows the bug (the end is bad after all; the clean probes' runs are pooled into its
``runs``/``hits``, so the hit rate derived from it is honest) or the clean probes reach
:func:`bisectbot.bisect.clean_probes_needed` for the recipe's confidence: at a per-run hit
rate of :data:`bisectbot.bisect.MIN_HIT_RATE` or more (or the recipe's ``false_negative``
per probe) so many clean probes happen less often than ``1 - confidence``. The verdict then
carries how many probes and runs it took. A deterministic reproducer (one run per probe, no
``bisect.flake``) is believed at once, as before.

:func:`sequential_good_end` is the same test on the other end (issue 35, input 4): the good end of
a regression search whose probe failed a minority of its runs (:func:`bisectbot.bisect.minority`)
while the bad end failed every run is probed again while that holds, up to the same number of
probes, its runs pooled: "the regression is older than the range" is never concluded from such
failures, which are what a good build of a two-sided noisy measurement (a throughput check) does.
The pooled runs go to the search, which weighs them (:func:`bisectbot.verdict.honesty.adapt_rates`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..bisect import MIN_HIT_RATE, clean_probes_needed, minority
from ..models import Candidate, ProbeResult, Verdict
from ..recipe import Recipe
from .honesty import repeats_per_probe


def miss_per_probe(recipe: Recipe) -> float | None:
    """Chance that one probe of a bad build shows nothing: the recipe's ``bisect.flake``
    false-negative rate (the false positive of a fix bisection), else ``(1 - MIN_HIT_RATE) **
    repeats`` with repeats > 1; None for a deterministic reproducer."""
    fl = recipe.bisect.flake
    if fl is not None:
        miss = fl.false_positive if recipe.regress.is_fix else fl.false_negative
        return miss if miss > 0 else None
    reps = repeats_per_probe(recipe)
    return (1 - MIN_HIT_RATE) ** reps if reps > 1 else None


def shows_bug(recipe: Recipe, res: ProbeResult) -> bool:
    """True when ``res`` shows the bug: bad in a regression search, good ("still broken") in a fix one."""
    return res.verdict is (Verdict.GOOD if recipe.regress.is_fix else Verdict.BAD)


def clean(recipe: Recipe, res: ProbeResult) -> bool:
    """True when ``res`` is the known-failing end's verdict *without* the bug."""
    return res.verdict is (Verdict.BAD if recipe.regress.is_fix else Verdict.GOOD)


def sequential_end(recipe: Recipe, end: Candidate, first: ProbeResult, attempt: int,
                   reprobe: Callable[[int], ProbeResult], echo: Callable[[str], None]) -> tuple[ProbeResult, int, str]:
    """Probe the known-failing ``end`` again (``reprobe(attempt)``) while its probes are clean;
    ``first`` is its clean probe number ``attempt``. Returns ``(verdict to feed, last attempt
    number, note)``: the first probe that shows the bug (its ``runs``/``hits`` pooled with the
    clean ones before), or the last clean probe once :func:`clean_probes_needed` were clean (a
    skip stops the test: the end is untestable), and a sentence saying how many it took."""
    miss = miss_per_probe(recipe)
    if miss is None:
        return first, attempt, ""
    need = clean_probes_needed(miss, recipe.bisect.confidence)
    name = "good end (still broken)" if recipe.regress.is_fix else "bad end"
    runs = int(first.extra.get("runs") or repeats_per_probe(recipe))
    probes = 1
    last = first
    while probes < need:
        echo(f"{name} {end.label or end.ref[:12]} looked clean ({probes} probe(s), {runs} runs): it is known to "
             f"fail, probing it again ({probes + 1} of up to {need})")
        attempt += 1
        res = reprobe(attempt)
        if res.verdict is Verdict.SKIP:
            return res, attempt, ""
        r_runs = int(res.extra.get("runs") or repeats_per_probe(recipe))
        if shows_bug(recipe, res):
            hits = int(res.extra.get("hits") or 1)
            total = runs + r_runs
            note = (f"the {name} showed the bug at probe {probes + 1} ({hits} of {total} runs over "
                    f"{probes + 1} probes)")
            extra = {**res.extra, "runs": total, "hits": hits, "end_test": note}
            return dataclasses.replace(res, reason=f"{res.reason}; {note}", extra=extra), attempt, note
        runs += r_runs
        probes += 1
        last = res
    if probes == 1:
        return first, attempt, ""
    rate = f"{miss:.3f} per probe (bisect.flake)" if recipe.bisect.flake is not None else (
        f"a per-run hit rate of {MIN_HIT_RATE:.0%} or more")
    note = (f"the {name} showed no bug in {runs} runs over {probes} probes (a sequential test: at {rate} that "
            f"happens with probability below {1 - recipe.bisect.confidence:.0%})")
    return dataclasses.replace(last, reason=f"{last.reason}; {note}",
                               extra={**last.extra, "end_test": note}), attempt, note


def sequential_good_end(recipe: Recipe, end: Candidate, first: ProbeResult, attempt: int, bad_end: tuple[int, int],
                        reprobe: Callable[[int], ProbeResult], echo: Callable[[str], None]) -> tuple[ProbeResult, int, str]:
    """The good ``end`` of a regression search showed the bug in ``first`` (its probe number
    ``attempt``); ``bad_end`` is the bad end's ``(hits, runs)``. While its runs, pooled, fail a
    minority and the bad end failed every run, probe it again (``reprobe(attempt)``), up to
    :func:`clean_probes_needed` probes in all as for the bad end; stop at the first clean probe or
    once the pooled failures are no minority. Returns ``(verdict to feed, last attempt, note)``:
    the last probe with the pooled ``runs``/``hits`` (a skip as it came), and a sentence ("" when
    the test did not apply)."""
    miss = miss_per_probe(recipe)
    bad_hits, bad_runs = bad_end
    runs, hits = int(first.extra.get("runs") or 0), int(first.extra.get("hits") or 0)
    if (miss is None or recipe.regress.is_fix or recipe.bisect.flake is not None or bad_runs == 0
            or bad_hits != bad_runs or not minority(hits, runs)):
        return first, attempt, ""
    need = clean_probes_needed(miss, recipe.bisect.confidence)
    probes, last = 1, first
    while probes < need and minority(hits, runs) and shows_bug(recipe, last):
        echo(f"good end {end.label or end.ref[:12]} failed {hits} of {runs} runs while the bad end failed "
             f"{bad_hits} of {bad_runs}: a minority, probing it again ({probes + 1} of up to {need})")
        attempt += 1
        res = reprobe(attempt)
        if res.verdict is Verdict.SKIP:
            return res, attempt, ""
        runs += int(res.extra.get("runs") or 0)
        hits += int(res.extra.get("hits") or 0)
        probes += 1
        last = res
    note = (f"the good end failed {hits} of {runs} runs over {probes} probes while the bad end failed "
            f"{bad_hits} of {bad_runs}")
    extra = {**last.extra, "runs": runs, "hits": hits, "end_test": note}
    return dataclasses.replace(last, reason=f"{last.reason}; {note}", extra=extra), attempt, note


__all__ = ["clean", "miss_per_probe", "sequential_end", "sequential_good_end", "shows_bug"]
