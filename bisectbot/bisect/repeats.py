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
