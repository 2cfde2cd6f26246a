"""Simulated bisections: probes and accuracy of bisectbot's search against Burnashev's bound.

Each trial draws a history of ``N`` candidates after a known-good one (``N + 1`` in all,
the last one known bad), a first-bad candidate uniformly among the ``N``, a share of
untestable candidates (their verdict is always ``skip``), and a verdict channel that
flips each good/bad verdict with probability ``p`` (false positives = false negatives =
``p``). The search is :class:`bisectbot.bisect.Bisection` itself -- the state machine
``bisectbot run`` drives -- with the ends trusted and verification off, so the figures
are the cost of the search alone (a real run adds 2 boundary and 2 verification probes).

Per setting it prints mean probes, the worst case, accuracy (the reported culprit, or
the reported skip-bounded range, contains the true first-bad), and the ratio of mean
probes to ``B = log2(N)/(1 - H(p)) + log2(1/delta)/D(p || 1-p)`` (bits; Burnashev's
figure for sequential search with feedback, ``delta = 1 - confidence``), beside two
baselines: plain binary search, and binary search with every verdict repeated 3x and a
majority vote. With ``p = 0`` and no untestable candidates every first-bad position is
run (exhaustive), so "worst" is exact.

Targets (issue 6): ``p = 0``: worst case exactly ``ceil(log2 N)``; ``p`` in 0.05..0.2:
accuracy >= 99 % and mean probes <= 1.15 B for every N. The ratio target is checked on
the rows without untestable candidates (B knows nothing of skips); the accuracy target on
every row. The last lines say plainly which targets were met.

Two more tables (issue 12):

* **One-sided flake**: a bug that shows in a share ``h`` (0.2..0.7) of the runs of a bad
  candidate, a healthy one almost never (``RUN_FALSE_POSITIVE`` per run); each probe is
  ``r`` runs combined one-sidedly (bad if any run is bad), so the channel is asymmetric:
  ``fp = 1 - (1 - 0.001)^r``, ``fn = (1 - h)^r``. Printed: accuracy, the wrong-culprit rate
  (a culprit or range named that does not hold the first bad) with its 95 % Clopper-Pearson
  interval beside the rate the posterior predicted (the mean of ``1 - confidence`` of the
  named culprits); target < 1 - confidence: the search names a culprit only at that
  posterior mass, so its expected wrong-culprit rate is below 1 - confidence by
  construction and the observed rate sits just under it; the row fails when the interval
  lies at or above 1 - confidence (N = 64 rows run 2 x ``--trials`` so that the interval is
  about +-0.3 %), mean probes (each ``r`` runs) against the bound of that channel
  (:func:`bisectbot.bisect.channel_bound`, target <= 1.15 x), and, for comparison, the
  wrong-culprit rate of a majority vote over the same repeats fed to a search that assumes
  the recipe's symmetric rates (the failure of issue 12, input 2).
* **Drift**: the bug appears at ``k`` with a first-garbage threshold of 20K tokens and the
  threshold drops to 6K at ``d > k``. Printed: how often the first search names ``k`` and
  the drift search names ``d``, the probes of each against ``B``.

One more (issue 23, input 8): **a known-bad end that misses**. ``repeats: 3``, a bug seen in
30 % of runs, no ``bisect.flake``: the session's whole flow -- the bad end first, then rates
derived from its runs (:func:`bisectbot.bisect.estimate_hit_rate`), boundary and
verification probes. Before, a clean first probe of the bad end (``0.7 ** 3 = 34 %``) ended
the run "no-regression"; now the bad end is probed again until the bug shows or
:func:`bisectbot.bisect.clean_probes_needed` clean probes make "not bad" hold at the
confidence. The rates the search then uses are derived from the bad end's runs, and few runs
say little (2 of 3 runs leave hit rates from 0.16 to 0.74 plausible): the search weighs every
plausible rate (:func:`bisectbot.bisect.hit_rate_prior`, a Beta posterior over 40 rates, and
:meth:`bisectbot.bisect.Bisection.set_rate_mixture`: the posterior is the mixture), as the
session does (:func:`bisectbot.verdict.honesty.adapt_rates`). Before, one rate was taken (2 of
3 runs: 0.40, truth 0.30): clean probes of a bad candidate read "good" too strongly and 4 of
2,000 runs (seeds 1-3: 9 of 6,000) named a wrong culprit at >= 0.99; 3.5 % of runs ran into
the cap (the hit rate lowered again and again). Measured (2,000 trials, seed 1): no-regression
0.05 %, wrong culprit 0 of 2,000 (seeds 2 and 3: 0 and 1 of 2,000; the named culprits'
1 - confidence averages 0.26 %, what the posterior promises), right 99.55 %, inconclusive
0.4 %, 35.5 probes a run (1.53 of them at the bad end). Targets: no-regression <= 1 % of runs;
no wrong culprit named (at the confidence) in the row's trials (issue 23: "0 confidently
wrong"), and its rate not shown at or above 1 - confidence (95 % interval), as the one-sided
rows.

Since issue 35 (2026-12-04) the session weighs such runs under open rates (the good side's one
false-positive rate learnt; the hit rate the bug's one rate, each bad candidate's own, or either:
:meth:`bisectbot.bisect.Bisection.set_open_hit_rates`), probes chosen by the joint information gain.
Each bad candidate's own rate alone took ~267 probes and was right in 35 % of 20 trials here (a
hypothesis "fewer bad candidates and a noisy good side" out-weighed the truth, and the per-probe
information gain kept asking the bad end). Measured with the three descriptions (1,000 trials, seed
1): no-regression 0 %, wrong culprit 0 of 1,000 (predicted 0.47 %), right 100 %, 32.7 probes a run
(1.56 at the bad end). With the fourth, the step (one rate up to a later commit, another from it),
the same row (1,000 trials, seed 1, main e413d20): no-regression 0 %, wrong 0 of 1,000 (predicted
0.50 %), right 100 %, 37.4 probes a run (1.49 at the bad end): the step's share of the prior is
doubt the runs must remove, +4.7 probes. The full run (every table, 2,000 trials, seed 1, main
d71d246, 2026-12-04 sixth session, wall ~27 min on 2 cores): **targets met**; this row 0 wrong of
2,000 (predicted 0.49 %), right 100 %, 37.7 probes a run (one bad-end probe; 37.5 and 1.52 at the
bad end sequentially), inconclusive 0.05 %.

``--quick`` (300 trials, N up to 1024) is a smoke run: there a point figure that misses a
target while its 95 % interval still holds it (an accuracy of 98.67 %, 4 errors in 300:
[0.4 %, 3.4 %] errors; a ratio of 1.158 +- 0.026) is listed as within the noise, not failed;
the full run fails on the point figures. The five accuracies of 97.7-98.7 % and the one-sided
ratio 1.158 that ``--quick`` showed are such noise: the same figures on the code before issue
23 (same seeds; these rows do not pass through its changes), and at 2,000 trials every accuracy
is >= 99.1 % (N=256 and 1024, p=0.1-0.2: 99.2-99.8 %), the one-sided N=64 hit 0.3 r=1 ratio
1.149 at 4,000 trials (+-0.010).

Run: ``python benchmarks/bisect_sim.py [--trials 2000] [--quick] [--jobs 2]``.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bisectbot.bisect import (  # noqa: E402
    MIN_HIT_RATE,
    Bisection,
    burnashev_bound,
    channel_bound,
    clean_probes_needed,
    combine_repeats,
    per_probe_rates,
    search_settings,
)
from bisectbot.models import Status, Verdict  # noqa: E402
from bisectbot.verdict import judge_drift, judge_threshold  # noqa: E402

SIZES = (16, 64, 256, 1024, 5000)
FLAKES = (0.0, 0.05, 0.1, 0.2)
UNTESTABLE = (0.0, 0.1, 0.2)
CONFIDENCE = 0.99


@dataclass
class Row:
    n: int
    p: float
    u: float
    trials: int
    mean: float
    worst: int
    acc: float
    bound: float
    bin_mean: float
    bin_acc: float
    maj_mean: float
    maj_acc: float
    seconds: float
    sd: float = 0.0

    @property
    def acc_ci(self) -> tuple[float, float]:
        """95 % Clopper-Pearson interval of the accuracy."""
        return binomial_interval(round(self.acc * self.trials), self.trials)

    @property
    def ratio_low(self) -> float:
        """Lower end of the ratio's 95 % interval (the mean probes' standard error)."""
        return (self.mean - 1.96 * self.sd / math.sqrt(self.trials)) / self.bound

    @property
    def ratio(self) -> float:
        return self.mean / self.bound


def _history(rng: random.Random, n: int, u: float, h: int | None = None) -> tuple[int, set[int]]:
    first_bad = rng.randint(1, n) if h is None else h
    untestable = {j for j in range(1, n) if rng.random() < u}  # the ends (0 and n) are known
    return first_bad, untestable


def _verdict(rng: random.Random, j: int, h: int, p: float) -> bool:
    bad = j >= h
    return (not bad) if rng.random() < p else bad


def ours(rng: random.Random, n: int, p: float, h: int, untestable: set[int]) -> tuple[int, bool]:
    b = Bisection(n + 1, false_positive=p, false_negative=p, confidence=CONFIDENCE, check_boundary=False,
                  verify=False, max_probes=4000)
    while not b.done:
        (j,) = b.next_probes(1)
        if j in untestable:
            b.feed(j, Verdict.SKIP)
        else:
            b.feed(j, Verdict.BAD if _verdict(rng, j, h, p) else Verdict.GOOD)
    r = b.result()
    return b.probes, r.status in (Status.CULPRIT, Status.RANGE) and h in r.culprits


def binary(rng: random.Random, n: int, p: float, h: int, untestable: set[int], repeat: int = 1) -> tuple[int, bool]:
    """Plain binary search with skip (nearest testable to the midpoint); each verdict the majority of ``repeat``."""
    lo, hi, probes, skipped = 0, n, 0, set()
    while True:
        inside = [j for j in range(lo + 1, hi) if j not in skipped] if hi - lo < 64 else None
        mid = (lo + hi) / 2
        if inside is None:  # large interval: search outward from the midpoint
            j, d = None, 0
            while j is None and d <= hi - lo:
                for c in (math.floor(mid - d), math.ceil(mid + d)):
                    if lo < c < hi and c not in skipped:
                        j = c
                        break
                d += 1
        else:
            j = min(inside, key=lambda x: (abs(x - mid), x)) if inside else None
        if j is None:
            break
        if j in untestable:
            probes += 1
            skipped.add(j)
            continue
        votes = sum(_verdict(rng, j, h, p) for _ in range(repeat))
        probes += repeat
        if votes * 2 > repeat:
            hi = j
        else:
            lo = j
    return probes, lo < h <= hi


def run_setting(args: tuple[int, float, float, int, int]) -> Row:
    n, p, u, trials, seed = args
    t0 = time.monotonic()
    rng = random.Random(f"{seed}-{n}-{p}-{u}")
    exhaustive = p == 0 and u == 0
    hs = list(range(1, n + 1)) if exhaustive else [None] * trials
    res, res_b, res_m = [], [], []
    for h0 in hs:
        h, unt = _history(rng, n, u, h0)
        res.append(ours(rng, n, p, h, unt))
        if p > 0 or u > 0 or len(res_b) < 200:
            res_b.append(binary(rng, n, p, h, unt))
            res_m.append(binary(rng, n, p, h, unt, repeat=3))
    mean = sum(q for q, _ in res) / len(res)
    sd = math.sqrt(sum((q - mean) ** 2 for q, _ in res) / max(1, len(res) - 1))
    return Row(n, p, u, len(res), mean, max(q for q, _ in res), sum(a for _, a in res) / len(res),
               burnashev_bound(n, p, 1 - CONFIDENCE),
               sum(q for q, _ in res_b) / len(res_b), sum(a for _, a in res_b) / len(res_b),
               sum(q for q, _ in res_m) / len(res_m), sum(a for _, a in res_m) / len(res_m),
               time.monotonic() - t0, sd)


class Verdicts:
    """The targets missed, and with ``quick`` (few trials) the point figures that miss a target
    while its 95 % interval still holds it: those are noted, not failed (``--quick`` is a smoke
    run; 300 trials put about +-1.1 % around an accuracy of 99 %). The full run fails on the
    point figures, as before."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.failures: list[str] = []
        self.noise: list[str] = []

    def check(self, missed: bool, shown: bool, text: str, why: str = "") -> None:
        """``missed``: the point figure misses; ``shown``: its 95 % interval lies beyond the target too."""
        if not missed:
            return
        if self.quick and not shown:
            self.noise.append(f"{text} ({why or 'its 95 % interval holds the target'})")
        else:
            self.failures.append(text)


# --------------------------------------------------------------------------- one-sided flake

HIT_RATES = (0.2, 0.3, 0.5, 0.7)
REPEATS = (1, 3, 5)
ONE_SIDED_SIZES = (64, 1024)


def binomial_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a rate from ``k`` events in ``n`` trials (exact binomial
    tails, solved by bisection; no scipy needed)."""

    def cdf(p: float, upto: int) -> float:  # P(X <= upto | p), terms in logs (no overflow at n in the thousands)
        if p <= 0.0 or p >= 1.0:
            return 1.0 if p <= 0.0 or upto >= n else 0.0
        lp, lq, ln = math.log(p), math.log1p(-p), math.lgamma(n + 1)
        return min(1.0, sum(math.exp(ln - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                            for i in range(upto + 1)))

    def solve(f: Callable[[float], float], target: float) -> float:  # f increasing in p
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2

    a = (1 - level) / 2
    lower = 0.0 if k == 0 else solve(lambda p: 1.0 - cdf(p, k - 1), a)  # P(X >= k | lower) = a
    upper = 1.0 if k == n else solve(lambda p: 1.0 - cdf(p, k), 1 - a)  # P(X <= k | upper) = a
    return lower, upper


@dataclass
class OneSidedRow:
    n: int
    hit: float
    repeats: int
    trials: int
    mean: float
    acc: float
    wrong: float
    bound: float
    maj_wrong: float
    sd: float = 0.0
    predicted: float = 0.0

    @property
    def ratio(self) -> float:
        return self.mean / self.bound

    @property
    def wrong_ci(self) -> tuple[float, float]:
        return binomial_interval(round(self.wrong * self.trials), self.trials)


def _runs_bad(rng: random.Random, bad: bool, hit: float, repeats: int, run_fp: float = 0.001) -> list[bool]:
    return [rng.random() < (hit if bad else run_fp) for _ in range(repeats)]


def one_sided_setting(args: tuple[int, float, int, int, int]) -> OneSidedRow:
    n, hit, repeats, trials, seed = args
    rng = random.Random(f"one-sided-{seed}-{n}-{hit}-{repeats}")
    fp, fn = per_probe_rates(hit, repeats)
    probes = right = wrong = maj_wrong = 0
    counts: list[int] = []
    predicted = 0.0
    for _ in range(trials):
        h = rng.randint(1, n)
        b = Bisection(n + 1, false_positive=fp, false_negative=fn, confidence=CONFIDENCE, check_boundary=False,
                      verify=False, max_probes=20000)
        while not b.done:
            (j,) = b.next_probes(1)
            b.feed(j, Verdict.BAD if combine_repeats(_runs_bad(rng, j >= h, hit, repeats)) else Verdict.GOOD)
        r = b.result()
        probes += b.probes
        counts.append(b.probes)
        named = r.status in (Status.CULPRIT, Status.RANGE)
        right += named and h in r.culprits
        wrong += named and h not in r.culprits
        predicted += (1 - r.confidence) if named else 0.0
        # before issue 12: a majority vote over the repeats, and the recipe's symmetric guess
        m = Bisection(n + 1, false_positive=0.01, false_negative=0.45, confidence=CONFIDENCE,
                      check_boundary=False, verify=False, max_probes=20000)
        while not m.done:
            (j,) = m.next_probes(1)
            votes = sum(_runs_bad(rng, j >= h, hit, repeats))
            m.feed(j, Verdict.BAD if votes * 2 > repeats else Verdict.GOOD)
        mr = m.result()
        maj_wrong += mr.status in (Status.CULPRIT, Status.RANGE) and h not in mr.culprits
    mean = probes / trials
    sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / max(1, trials - 1))
    return OneSidedRow(n, hit, repeats, trials, mean, right / trials, wrong / trials,
                       channel_bound(n, fp, fn, 1 - CONFIDENCE), maj_wrong / trials, sd, predicted / trials)


# --------------------------------------------------------------------------- drift


@dataclass
class DriftRow:
    n: int
    p: float
    trials: int
    first_acc: float
    first_wrong: float
    drift_acc: float
    first_mean: float
    drift_mean: float
    first_bound: float
    drift_bound: float


def drift_setting(args: tuple[int, float, int, int]) -> DriftRow:
    n, p, trials, seed = args
    rng = random.Random(f"drift-{seed}-{n}-{p}")
    ok1 = wrong1 = ok2 = probes1 = probes2 = 0
    bound2 = 0.0
    for _ in range(trials):
        k = rng.randint(1, n - 2)
        d = rng.randint(k + 1, n - 1)

        def measure(j: int, k: int = k, d: int = d) -> tuple[str, int | None]:
            t = None if j < k else 20000 if j < d else 6000
            if rng.random() < p:  # a flaky measurement: no garbage seen, or garbage where there is none
                t = 20000 if t is None else None
            return ("ok", None) if t is None else ("garbage", t)

        b = Bisection(n + 1, false_positive=p, false_negative=p, confidence=CONFIDENCE, max_probes=20000)
        while not b.done:
            (j,) = b.next_probes(1)
            st, t = measure(j)
            jd = judge_threshold("garbage", st, None if t is None else t - 256, t)
            b.feed(j, jd.verdict, jd.signature)
        r = b.result()
        probes1 += b.probes
        named = r.status in (Status.CULPRIT, Status.RANGE)
        ok1 += named and k in r.culprits
        wrong1 += named and k not in r.culprits
        drift = b.drift()
        if drift is None or not named or r.first_bad is None:
            continue
        idx = list(range(r.first_bad, n + 1))
        bound2 += burnashev_bound(max(2, len(idx) - 1), p, 1 - CONFIDENCE)
        b2 = Bisection(len(idx), false_positive=p, false_negative=p, confidence=CONFIDENCE, max_probes=20000)
        while not b2.done:
            (j,) = b2.next_probes(1)
            st, t = measure(idx[j])
            b2.feed(j, judge_drift(drift, st, t).verdict)
        r2 = b2.result()
        probes2 += b2.probes
        ok2 += r2.status is Status.CULPRIT and idx[r2.first_bad] == d
    return DriftRow(n, p, trials, ok1 / trials, wrong1 / trials, ok2 / trials, probes1 / trials,
                    probes2 / trials, burnashev_bound(n, p, 1 - CONFIDENCE) + 4, bound2 / trials + 4)


@dataclass
class BadEndRow:
    n: int
    hit: float
    repeats: int
    trials: int
    sequential: bool
    no_regression: float
    wrong: float
    right: float
    mean: float
    end_probes: float
    predicted: float = 0.0


#: Probe cap of one simulated session of :func:`bad_end_setting` (reached: inconclusive, counted).
BAD_END_CAP = 400


def bad_end_setting(args: tuple[int, float, int, int, int, bool]) -> BadEndRow:
    """The session's flow over ``n + 1`` candidates with a flaky bug (see the module docstring)."""
    from bisectbot.models import Candidate, CandidateKind, ProbeResult
    from bisectbot.recipe import Recipe
    from bisectbot.verdict.honesty import adapt_rates

    n, hit, repeats, trials, seed, sequential = args
    rng = random.Random(f"bad-end-{seed}-{n}-{hit}-{repeats}")
    recipe = Recipe.model_validate({
        "name": "sim", "source": {"kind": "git", "repo": "."}, "regress": "command",
        "reproducer": {"kind": "command", "command": ["true"], "repeats": repeats}})

    def fed(b: Bisection, j: int, rs: list[bool], runs: int | None = None, hits: int | None = None) -> None:
        """Feed one probe's verdict and let the session's rate adaptation see its runs."""
        b.feed(j, Verdict.BAD if combine_repeats(rs) else Verdict.GOOD)
        res = ProbeResult(Candidate(CandidateKind.COMMIT, str(j)), Verdict.GOOD,
                          extra={"runs": len(rs) if runs is None else runs, "hits": sum(rs) if hits is None else hits})
        adapt_rates(recipe, b, j, res, lambda _m: None)
    need = clean_probes_needed((1 - MIN_HIT_RATE) ** repeats, CONFIDENCE) if sequential else 1
    noreg = wrong = right = probes = end_probes = 0
    predicted = 0.0
    for _ in range(trials):
        h = rng.randint(1, n)
        # as the session (exact until the bad end's rates), with a cap: a hit rate lowered again and
        # again at the leading candidate (issue 12's rule) can make the budget run to thousands
        b = Bisection(n + 1, **{**search_settings(recipe.bisect, n + 1), "max_probes": BAD_END_CAP})
        runs = hits = k = 0
        while k < need:
            k += 1
            rs = _runs_bad(rng, True, hit, repeats)
            runs, hits = runs + repeats, hits + sum(rs)
            if hits:
                break
        end_probes += k
        fed(b, n, [hits > 0], runs, hits)  # the session pools the end test's runs into the verdict fed
        while not b.done:
            (j,) = b.next_probes(1)
            fed(b, j, _runs_bad(rng, j >= h, hit, repeats))
        r = b.result()
        probes += b.probes + k - 1
        noreg += r.status is Status.NO_REGRESSION
        named = r.status in (Status.CULPRIT, Status.RANGE)
        right += named and h in r.culprits
        wrong += named and h not in r.culprits
        predicted += (1 - r.confidence) if named else 0.0
    return BadEndRow(n, hit, repeats, trials, sequential, noreg / trials, wrong / trials, right / trials,
                     probes / trials, end_probes / trials, predicted / trials)


def bad_end_table(trials: int, seed: int, jobs: int, verdicts: Verdicts) -> None:
    """Issue 23, input 8: the known-bad end probed until its "not bad" is believable."""
    sets = [(64, 0.3, 3, trials, seed, seq) for seq in (False, True)]
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        rows = list(ex.map(bad_end_setting, sets))
    print()
    print("known-bad end that misses (issue 23): repeats 3, hit rate 30 %, no bisect.flake; the whole session flow")
    print(f"{'N':>5} {'hit':>4} {'r':>2} {'trials':>6} {'bad end':>10} | {'no-regr':>7} {'wrong':>6} {'right':>6} | "
          f"{'probes':>6} {'end probes':>10}")
    for o in rows:
        how = "sequential" if o.sequential else "one probe"
        print(f"{o.n:>5} {o.hit:>4.1f} {o.repeats:>2} {o.trials:>6} {how:>10} | {o.no_regression:>7.2%} "
              f"{o.wrong:>6.2%} {o.right:>6.1%} | {o.mean:>6.2f} {o.end_probes:>10.2f}")
        nlo, nhi = binomial_interval(round(o.no_regression * o.trials), o.trials)
        verdicts.check(o.sequential and o.no_regression > 0.01, nlo > 0.01,
                       f"bad end N={o.n} hit={o.hit} r={o.repeats}: no-regression {o.no_regression:.2%} > 1%",
                       f"95 % interval [{nlo:.2%}, {nhi:.2%}]")
        lo, hi = binomial_interval(round(o.wrong * o.trials), o.trials)
        print(f"{'':>30} wrong-culprit 95 % interval [{lo:.2%}, {hi:.2%}], predicted {o.predicted:.2%} (the mean "
              f"1 - confidence of the named); inconclusive (capped at {BAD_END_CAP} probes or budget): "
              f"{1 - o.no_regression - o.wrong - o.right:.2%}")
        # a culprit is named at >= CONFIDENCE posterior mass (after verification): issue 23 asks for
        # none named wrong in the row's trials; the posterior promises at most the predicted rate
        # (0.26 % at 2,000 trials), never 0 by construction: other seeds showed 0 and 1 in 2,000
        if o.sequential and o.wrong > 0:
            verdicts.failures.append(f"bad end N={o.n} hit={o.hit} r={o.repeats}: {round(o.wrong * o.trials)} of "
                                     f"{o.trials} named a wrong culprit at >= {CONFIDENCE:.0%} (issue 23 asks for 0)")
        if o.sequential and lo >= 1 - CONFIDENCE:
            verdicts.failures.append(f"bad end N={o.n} hit={o.hit} r={o.repeats}: wrong culprit {o.wrong:.2%} "
                            f"(95 % interval [{lo:.2%}, {hi:.2%}]) not below {1 - CONFIDENCE:.0%}")


def issue12_tables(trials: int, seed: int, jobs: int, verdicts: Verdicts) -> None:
    # N = 64 is cheap: its rows get 2 x ``trials`` (a wrong-culprit rate near 1 % needs thousands
    # of trials to be told apart from 1 %, and the ratio's 95 % error is then about 1 %);
    # N = 1024 a quarter
    sets = [(n, h, r, 2 * trials if n <= 64 else max(100, trials // 4), seed)
            for n in ONE_SIDED_SIZES for h in HIT_RATES for r in REPEATS]
    sets.sort(key=lambda s: -s[0] * s[3] / s[1])  # longest first
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        rows = list(ex.map(one_sided_setting, sets))
        drows = list(ex.map(drift_setting, [(n, p, max(100, trials // 4), seed) for n in (64, 1024)
                                            for p in (0.0, 0.1)]))
    rows.sort(key=lambda o: (o.n, o.hit, o.repeats))
    print()
    print(f"one-sided flake: probe = r runs, bad if any run is bad; channel bound B (delta = {1 - CONFIDENCE:.2f})")
    print("wrong: observed wrong-culprit rate [95 % Clopper-Pearson interval]; predicted: the mean of "
          "1 - confidence of the named culprits (what the posterior promised)")
    print(f"{'N':>5} {'hit':>4} {'r':>2} {'trials':>6} | {'acc':>6} {'wrong':>6} {'[95 % CI]':>15} {'predicted':>9} | "
          f"{'mean':>6} {'+-':>4} {'B':>6} {'ratio':>5} | {'majority+guess wrong':>20}")
    for o in rows:
        lo, hi = o.wrong_ci
        se = 1.96 * o.sd / math.sqrt(o.trials)
        print(f"{o.n:>5} {o.hit:>4.1f} {o.repeats:>2} {o.trials:>6} | {o.acc:>6.1%} {o.wrong:>6.2%} "
              f"{f'[{lo:.2%}, {hi:.2%}]':>15} {o.predicted:>9.2%} | {o.mean:>6.2f} {se:>4.2f} {o.bound:>6.2f} "
              f"{o.ratio:>5.3f} | {o.maj_wrong:>20.1%}")
        # the search names a culprit only at >= CONFIDENCE posterior mass, so its expected
        # wrong-culprit rate is below 1 - CONFIDENCE when the flake model holds; the row fails
        # when the trials show otherwise: the interval lies at or above 1 - CONFIDENCE
        if lo >= 1 - CONFIDENCE:
            verdicts.failures.append(f"one-sided N={o.n} hit={o.hit} r={o.repeats}: wrong-culprit rate {o.wrong:.2%} "
                            f"(95 % interval [{lo:.2%}, {hi:.2%}]) not below {1 - CONFIDENCE:.0%}")
        low = (o.mean - se) / o.bound
        verdicts.check(o.ratio > 1.15, low > 1.15, f"one-sided N={o.n} hit={o.hit} r={o.repeats}: mean probes "
                       f"{o.mean:.2f} > 1.15 B = {1.15 * o.bound:.2f}", f"ratio's 95 % interval from {low:.3f}")
    print()
    print("drift: bug from k (garbage above 20K tokens), threshold 6K from d > k; probes incl. boundary + verify")
    print(f"{'N':>5} {'p':>4} {'trials':>6} | {'k named':>7} {'wrong':>6} {'mean':>6} {'B+4':>6} | "
          f"{'d named':>7} {'mean':>6} {'B+4':>6}")
    for d in drows:
        print(f"{d.n:>5} {d.p:>4.2f} {d.trials:>6} | {d.first_acc:>7.1%} {d.first_wrong:>6.2%} {d.first_mean:>6.2f} "
              f"{d.first_bound:>6.2f} | {d.drift_acc:>7.1%} {d.drift_mean:>6.2f} {d.drift_bound:>6.2f}")
        if d.first_wrong >= 1 - CONFIDENCE:
            verdicts.failures.append(f"drift N={d.n} p={d.p}: wrong first bad {d.first_wrong:.2%}")
        if d.p == 0 and (d.first_acc < 1 or d.drift_acc < 1):
            verdicts.failures.append(f"drift N={d.n} p=0: first bad {d.first_acc:.1%}, drift {d.drift_acc:.1%} < 100%")


def _noise(verdicts: Verdicts) -> None:
    if verdicts.noise:
        print(f"--quick: {len(verdicts.noise)} point figure(s) miss a target within the noise of these few trials "
              "(not shown missed; the full run decides):")
        for line in verdicts.noise:
            print("  " + line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2000, help="trials per setting (default 2000)")
    ap.add_argument("--quick", action="store_true", help="N up to 1024, 300 trials (a smoke run)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only-issue12", action="store_true", help="only the one-sided flake and drift tables")
    a = ap.parse_args(argv)
    verdicts = Verdicts(a.quick)
    if a.only_issue12:
        issue12_tables(300 if a.quick else a.trials, a.seed, a.jobs, verdicts)
        bad_end_table(300 if a.quick else a.trials, a.seed, a.jobs, verdicts)
        _noise(verdicts)
        for f in verdicts.failures:
            print("TARGET NOT MET: " + f)
        return 1 if verdicts.failures else 0
    sizes = SIZES[:-1] if a.quick else SIZES
    trials = 300 if a.quick else a.trials
    settings = [(n, p, u, trials, a.seed) for n in sizes for p in FLAKES for u in UNTESTABLE]
    settings.sort(key=lambda s: -(s[0] * (1 + 10 * s[1])))  # longest first
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        rows = list(ex.map(run_setting, settings))
    rows.sort(key=lambda r: (r.n, r.p, r.u))
    print(f"bisectbot search vs Burnashev's B (delta = {1 - CONFIDENCE:.2f}); probes are search probes only")
    print(f"{'N':>5} {'p':>5} {'untest':>6} {'trials':>6} | {'mean':>6} {'worst':>5} {'acc':>6} | {'B':>6} "
          f"{'ratio':>5} | {'bin mean':>8} {'bin acc':>7} | {'3xmaj mean':>10} {'3xmaj acc':>9}")
    failures = verdicts.failures
    for r in rows:
        print(f"{r.n:>5} {r.p:>5.2f} {r.u:>6.0%} {r.trials:>6} | {r.mean:>6.2f} {r.worst:>5} {r.acc:>6.1%} | "
              f"{r.bound:>6.2f} {r.ratio:>5.3f} | {r.bin_mean:>8.2f} {r.bin_acc:>7.1%} | {r.maj_mean:>10.2f} "
              f"{r.maj_acc:>9.1%}")
        if r.p == 0 and r.u == 0 and r.worst != math.ceil(math.log2(r.n)):
            failures.append(f"N={r.n} p=0: worst case {r.worst} != ceil(log2 N) = {math.ceil(math.log2(r.n))}")
        if r.p == 0 and r.acc < 1.0:
            failures.append(f"N={r.n} p=0 untestable={r.u:.0%}: accuracy {r.acc:.2%} < 100%")
        if 0.05 <= r.p <= 0.2:
            lo, hi = r.acc_ci
            verdicts.check(r.acc < 0.99, hi < 0.99, f"N={r.n} p={r.p} untestable={r.u:.0%}: accuracy {r.acc:.2%} "
                           "< 99%", f"95 % interval [{lo:.2%}, {hi:.2%}]")
            verdicts.check(r.u == 0 and r.ratio > 1.15, r.ratio_low > 1.15, f"N={r.n} p={r.p}: mean probes "
                           f"{r.mean:.2f} > 1.15 B = {1.15 * r.bound:.2f}", f"ratio's 95 % interval from "
                           f"{r.ratio_low:.3f}")
    print(f"({len(rows)} settings in {time.monotonic() - t0:.0f} s; accuracy of {trials} trials has a standard "
          f"error of about {math.sqrt(0.01 * 0.99 / trials):.1%} near 99%: the search stops when the posterior "
          f"holds {CONFIDENCE:.0%}, so its expected accuracy is at least that by construction)")
    issue12_tables(300 if a.quick else a.trials, a.seed, a.jobs, verdicts)
    bad_end_table(300 if a.quick else a.trials, a.seed, a.jobs, verdicts)
    _noise(verdicts)
    if failures:
        print("TARGETS NOT MET:")
        for f in failures:
            print("  " + f)
        return 1
    if verdicts.noise:
        print(f"--quick: no target shown missed ({len(verdicts.noise)} point figure(s) within the noise, listed above); "
              "the full run checks the point figures")
        return 0
    print("targets met: p=0 worst case = ceil(log2 N) (exhaustive over the first-bad position); "
          "p in 0.05..0.2: accuracy >= 99% and mean probes <= 1.15 B for every N; one-sided flake: "
          "mean probes <= 1.15 B and no wrong-culprit rate shown at or above 1 - confidence (95 % interval); "
          "drift at p=0: both findings 100%; a known-bad end that misses (hit 30 %, repeats 3): "
          "no-regression <= 1 %, no wrong culprit named at the confidence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
