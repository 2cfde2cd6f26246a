"""Repeats of one probe (one-sided): how runs combine into a verdict and what that does to
the per-probe flake rates (issue 12)."""

from __future__ import annotations

from collections.abc import Iterable

#: Per-run false-positive rate assumed when the recipe gives no flake rates: garbage is
#: one-sided, a healthy build essentially never produces it (issue 12); not 0, so that one
#: stray classifier error can still be outweighed.
RUN_FALSE_POSITIVE = 0.001


def combine_repeats(bad_runs: Iterable[bool]) -> bool:
    """One-sided combination of the repeats of one probe: bad if **any** run was bad.

    Garbage is one-sided (a healthy build essentially never produces it): a majority vote
    over repeats would turn a bug that shows in 30 % of runs into an 84 % miss rate per
    probe at 5 repeats (issue 12); "any" turns it into ``0.7 ** 5 = 17 %``.
    """
    return any(bad_runs)


def per_probe_rates(hit_rate: float, repeats: int,
                    run_false_positive: float = RUN_FALSE_POSITIVE) -> tuple[float, float]:
    """``(false_positive, false_negative)`` of one probe of ``repeats`` runs, combined by
    :func:`combine_repeats`, given the per-run hit rate of the bug on a bad candidate
    (``P(garbage | bad)`` per run) and the per-run false-positive rate:
    ``fp = 1 - (1 - run_fp) ** repeats``, ``fn = (1 - hit_rate) ** repeats``.
    Raises ``ValueError`` when ``hit_rate`` is not in (0, 1] or ``repeats`` < 1."""
    if not 0 < hit_rate <= 1 or repeats < 1:
        raise ValueError(f"hit rate must be in (0, 1] and repeats >= 1, got {hit_rate}, {repeats}")
    return 1 - (1 - run_false_positive) ** repeats, (1 - hit_rate) ** repeats


def estimate_hit_rate(hits: int, runs: int) -> float:
    """Per-run hit rate of the bug from ``hits`` bad runs out of ``runs`` on a known-bad
    candidate (the bad end): ``hits / (runs + 2)``, shrunk towards 0 so that a few lucky
    runs do not make the search over-confident (5 of 5 -> 0.71, 1 of 5 -> 0.14).
    Raises ``ValueError`` unless ``0 < hits <= runs``."""
    if not 0 < hits <= runs:
        raise ValueError(f"need 0 < hits <= runs, got {hits} of {runs}")
    return hits / (runs + 2)


#: Hit-rate hypotheses of :func:`hit_rate_prior`: the midpoints of this many equal bins of (0, 1).
HIT_RATE_POINTS = 40


def hit_rate_prior(hits: int, runs: int, points: int = HIT_RATE_POINTS) -> tuple[list[float], list[float]]:
    """What ``hits`` bad runs out of ``runs`` on a known-bad candidate say about the per-run hit
    rate: ``(rates, weights)``, the midpoints of ``points`` equal bins of (0, 1) and the weight of
    each under the posterior ``Beta(hits + 1, runs - hits + 3)`` (a ``Beta(1, 3)`` prior, mean
    0.25, towards the low rates; its mode is :func:`estimate_hit_rate`). Weights sum to 1. For
    :meth:`bisectbot.bisect.Bisection.set_rate_mixture`: 2 of 3 runs leave rates from 0.16 to 0.74
    plausible (90 % of the weight), 20 of 60 only 0.24..0.44. The lowest rate is 1/80: finer bins
    (up to 200 at many runs) let the leader's rate (lowered by stray false-positive runs, issue
    12's rule) sink further and named 2 wrong culprits in the simulator's 2,000 runs. Raises ``ValueError`` unless ``0 <= hits <= runs`` and
    ``points >= 2``."""
    import math

    if not 0 <= hits <= runs or points < 2:
        raise ValueError(f"need 0 <= hits <= runs and points >= 2, got {hits} of {runs}, {points} points")
    rates = [(i + 0.5) / points for i in range(points)]
    logs = [hits * math.log(t) + (runs - hits + 2) * math.log(1 - t) for t in rates]
    top = max(logs)
    w = [math.exp(x - top) for x in logs]
    total = sum(w)
    return rates, [x / total for x in w]


#: Smallest per-run hit rate a known-bad end is tested against before "not bad" is believed
#: (issue 23, input 8; :func:`clean_probes_needed`): a bug that shows in one run of five. The
#: one-sided tables of ``benchmarks/bisect_sim.py`` start there too.
MIN_HIT_RATE = 0.2


def clean_probes_needed(miss_per_probe: float, confidence: float) -> int:
    """Probes of a known-bad end, none showing the bug, after which "the end is not bad" holds
    at ``confidence``: the smallest ``m`` with ``miss_per_probe ** m <= 1 - confidence`` (a
    one-sided sequential test: the first probe that shows the bug ends it the other way).
    ``miss_per_probe`` is the chance that one probe of a bad build shows nothing (the recipe's
    ``false_negative``, or ``(1 - MIN_HIT_RATE) ** repeats``). Raises ``ValueError`` unless
    ``0 <= miss_per_probe < 1`` and ``0 < confidence < 1``."""
    import math

    if not 0 <= miss_per_probe < 1 or not 0 < confidence < 1:
        raise ValueError(f"need 0 <= miss < 1 and 0 < confidence < 1, got {miss_per_probe}, {confidence}")
    if miss_per_probe == 0:
        return 1
    return max(1, math.ceil(math.log(1 - confidence) / math.log(miss_per_probe) - 1e-9))


def two_sided_prior(points: int = HIT_RATE_POINTS) -> tuple[list[tuple[float, float]], list[float]]:
    """The prior of a two-sided noisy measurement (issue 35, input 4) for
    :meth:`bisectbot.bisect.Bisection.set_run_mixture`: every per-run pair ``(false_positive,
    hit_rate)`` on the midpoints of ``points`` equal bins of (0, 1) with ``false_positive <
    hit_rate`` (a bad build fails more often than a good one: the only order the question itself
    gives), equally weighted, beside the one-sided family (``false_positive`` =
    :data:`RUN_FALSE_POSITIVE`, every hit rate) with the same total weight: a flaky bug that failed
    every run at the bad end by luck and one run in three at a bad build is the same question
    with a healthy build that never fails, and keeps the one-sided search's strength once its
    good builds' clean runs say so. No rate is assumed: the ends' counted runs and every later
    probe's tell them, jointly with the first bad. Raises ``ValueError`` when ``points`` < 2."""
    if points < 2:
        raise ValueError(f"need points >= 2, got {points}")
    grid = [(i + 0.5) / points for i in range(points)]
    pairs = [(f, h) for h in grid for f in grid if f < h]
    one = [(RUN_FALSE_POSITIVE, h) for h in grid]
    return one + pairs, [0.5 / len(one)] * len(one) + [0.5 / len(pairs)] * len(pairs)


def minority(hits: int, runs: int) -> bool:
    """True when some but fewer than half of ``runs`` failed: what a good build of a two-sided noisy
    measurement does, never the sign of a bug that fails every run at the bad end."""
    return 0 < hits and 2 * hits < runs
