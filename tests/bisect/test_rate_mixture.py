"""Derived flake rates that say how little few runs tell (issue 23, input 8): the hit rate of a
flaky bug, estimated from the bad end's runs, is a distribution (bisect.hit_rate_prior), and the
search's posterior is the mixture over it (Bisection.set_rate_mixture), as the session sets it
(verdict.honesty.adapt_rates). Pure functions and the session's rate rule; no I/O."""

from __future__ import annotations

import numpy as np
import pytest

from bisectbot.bisect import Bisection, estimate_hit_rate, hit_rate_prior, search_settings
from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict
from bisectbot.recipe import Recipe
from bisectbot.verdict.honesty import adapt_rates

G, B = Verdict.GOOD, Verdict.BAD


def _recipe(repeats: int = 3) -> Recipe:
    return Recipe.model_validate({
        "name": "mix", "source": {"kind": "git", "repo": "."}, "regress": "command",
        "reproducer": {"kind": "command", "command": ["true"], "repeats": repeats}})


def _feed(recipe: Recipe, b: Bisection, i: int, verdict: Verdict, hits: int, runs: int = 3,
          lines: list[str] | None = None) -> None:
    """What the round loop does with one probe: feed its verdict, then let adapt_rates see its runs."""
    b.feed(i, verdict)
    res = ProbeResult(Candidate(CandidateKind.COMMIT, str(i)), verdict, extra={"runs": runs, "hits": hits})
    adapt_rates(recipe, b, i, res, (lines if lines is not None else []).append)


def test_hit_rate_prior_is_a_beta_posterior_whose_mode_is_the_point_estimate() -> None:
    for hits, runs in ((2, 3), (1, 9), (20, 60)):
        rates, weights = hit_rate_prior(hits, runs)
        assert len(rates) == len(weights) == 40 and sum(weights) == pytest.approx(1.0)
        assert all(0 < t < 1 for t in rates) and all(w >= 0 for w in weights)
        mode = rates[int(np.argmax(weights))]
        assert abs(mode - estimate_hit_rate(hits, runs)) <= 0.5 / 40 + 1e-9

    def spread(hits: int, runs: int) -> float:
        rates, weights = hit_rate_prior(hits, runs)
        mean = sum(t * w for t, w in zip(rates, weights))
        return sum(w * (t - mean) ** 2 for t, w in zip(rates, weights)) ** 0.5

    assert spread(2, 3) > 0.15 > 0.06 > spread(20, 60)  # 3 runs say little, 60 say much more
    with pytest.raises(ValueError):
        hit_rate_prior(4, 3)
    with pytest.raises(ValueError):
        hit_rate_prior(1, 3, points=1)


def test_a_mixture_of_one_rate_is_that_rate() -> None:
    verdicts = [(64, B), (0, G), (30, G), (45, B), (40, G), (43, B), (41, G), (42, B)]
    one, mix = (Bisection(65, check_boundary=True) for _ in range(2))
    for i, v in verdicts:
        one.feed(i, v)
        mix.feed(i, v)
    one.set_rates(0.003, 0.3)
    mix.set_rate_mixture([(0.003, 0.3)], [2.0])
    assert np.allclose(one.posterior, mix.posterior) and (one.fp, one.fn) == (mix.fp, mix.fn)
    c = mix.copy()
    c.feed(42, G)
    assert np.allclose(one.posterior, mix.posterior)  # a copy's verdicts stay in the copy
    for rates, weights in (([], []), ([(0.003, 0.3)], [0.0]), ([(0.003, 0.3)], [-1.0]), ([(0.6, 0.5)], [1.0])):
        with pytest.raises(ValueError):
            mix.set_rate_mixture(rates, weights)


def test_two_hits_in_three_bad_end_runs_do_not_make_four_clean_probes_a_good_verdict() -> None:
    # the simulator's trial that named a wrong culprit at 0.9986 before (benchmarks/bisect_sim.py,
    # known-bad end row, seed 1): 65 candidates, first bad 47, a bug seen in 30 % of runs, 3 runs a
    # probe. The bad end showed it in 2 of 3 runs: taken as a hit rate of 0.40, four clean probes of
    # candidate 48 (12 runs; 0.7 ** 12 = 1.4 % for a bad one) read as "48 is good" at 0.993, and
    # the verification (49 bad, 48 clean once more) named 49 at 0.9986. At the true rate these
    # verdicts hold 49 at 0.943; weighing every rate that 2 of 3 runs leave plausible they hold it
    # below the confidence too: the search goes on instead of verifying.
    # Issue 35: the runs are now weighed per candidate from the first counted probe on (the bug's one
    # rate, each bad candidate's own, or either: Bisection.set_open_hit_rates; the good side's one
    # false-positive rate). With a shared rate alone, the pooled 7 of 12 made 48's 12 clean runs
    # decisive: 49 at 0.990, then named at 0.9987 after the verification's 49 bad, 48 clean.
    recipe = _recipe()
    b = Bisection(65, **search_settings(recipe.bisect, 65))
    lines: list[str] = []
    _feed(recipe, b, 64, B, hits=2, lines=lines)
    assert b.open_rates and b.hit_rate is None and "each bad candidate's own, either, or one rate up to a step" in lines[0]
    for i, v, hits in [(0, G, 0), (28, G, 0), (40, G, 0), (48, G, 0), (54, B, 1), (49, B, 2), (43, G, 0),
                       (46, G, 0), (48, G, 0), (48, G, 0), (48, G, 0), (49, B, 2)]:
        _feed(recipe, b, i, v, hits)
    assert not b.done and float(b.posterior[49]) < 0.99
    assert b.next_probes(1) != [49] and not b._verify_targets  # no verification yet: more evidence first
    # the point rates the probes are chosen at (posterior means): a bad build's clean probe of 3 runs
    # is neither the bad end's 2 of 3 taken as a rate ((1/3) ** 3 = 0.04) nor the pooled 7 of 12
    # (0.07): the shared rate's spread and the candidates that may have their own rate keep it
    # nearer the truth's 0.7 ** 3 = 0.34
    assert 0.1 < b.fn < 0.343 and b.fp < 0.05


def _open(n: int, repeats: int, runs: dict[int, tuple[int, int]]) -> Bisection:
    """A search with open rates (as the session sets them) fed ``{candidate: (failing, runs)}``, the
    bad end first."""
    from bisectbot.bisect import MIN_HIT_RATE
    from bisectbot.verdict.honesty import OPEN_FALSE_POSITIVES, OPEN_WEIGHTS

    b = Bisection(n, confidence=0.99, max_probes=10_000)
    b.set_open_hit_rates(OPEN_FALSE_POSITIVES, OPEN_WEIGHTS, repeats, MIN_HIT_RATE)
    for j in sorted(runs, reverse=True):
        k, m = runs[j]
        b.feed(j, B if k else G, None, runs=(k, m))
    return b


@pytest.mark.parametrize("n, repeats, runs, truth, later", [
    # simulated step-up searches that named the later commit at 0.99+ before the step description
    # (seeds of the issue-35 attack: first rate 15 %, then 100 %; 10 and 2 runs a probe)
    (115, 10, {0: (0, 10), 55: (0, 10), 61: (0, 10), 62: (0, 10), 63: (1, 10), 64: (2, 10), 65: (0, 10),
               66: (2, 10), 67: (2, 20), 68: (20, 20), 69: (10, 10), 70: (10, 10), 71: (10, 10), 82: (10, 10),
               114: (10, 10)}, 63, 68),
    (47, 2, {0: (0, 2), 22: (0, 2), 24: (0, 2), 26: (0, 2), 28: (0, 2), 29: (0, 2), 30: (0, 2), 31: (1, 4),
             34: (0, 2), 35: (0, 2), 36: (0, 2), 37: (0, 2), 38: (1, 6), 39: (0, 4), 40: (2, 18), 41: (8, 8),
             42: (4, 4), 43: (4, 4), 44: (4, 4), 45: (4, 4), 46: (4, 4)}, 31, 41),
])
def test_a_hit_rate_that_steps_up_later_is_not_read_as_the_good_sides_noise(n, repeats, runs, truth, later) -> None:
    """Issue 35, the step-up kind: a bug in 8-15 % of runs from its first bad until a later commit
    raises it to 70-100 %. Without a description of that (one rate up to a step, another from it),
    the good side's noise explained the rare failures more cheaply and the later commit was named at
    0.99+. With it, the later commit is no longer certain and the first bad keeps its share."""
    b = _open(n, repeats, runs)
    p = b.posterior
    assert p[later] < 0.9 and not (b.done and b.result().first_bad == later), (p[later], b.result())
    assert p[truth] > 0.05, p[truth]


def test_the_step_description_sums_over_every_step_as_a_direct_sum_does() -> None:
    """The step rows' likelihood (Bisection._step_tails: prefix and suffix sums and one log-sum-exp)
    against the sum over every first bad h and step s written out, on random per-candidate terms."""
    rng = np.random.default_rng(7)
    b = Bisection(9)
    d_a, d_b = rng.normal(size=(3, 9)), rng.normal(size=(3, 9))
    got = b._step_tails(d_a, d_b)
    n = 9
    for r in range(3):
        for h in range(n + 1):
            terms = [d_a[r, h:s].sum() + d_b[r, s:].sum() - np.log(n - 1 - h) for s in range(h + 1, n) if h > 0]
            want = np.logaddexp.reduce(terms) if terms else -np.inf
            assert got[r, h] == pytest.approx(want) if terms else got[r, h] == -np.inf, (r, h)
