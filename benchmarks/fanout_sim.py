"""Fan-out of probes over runners: rounds and wall-clock hours to a verified culprit (issue 16).

Each trial draws a first-bad candidate uniformly among ``N`` candidates (index 0 the
known-good end, ``N - 1`` the known-bad end) and drives the real
:meth:`bisectbot.bisect.Bisection.next_probes` with ``k`` probes per round -- both ends
checked in the first round, verification on (the culprit and its predecessor re-probed,
folded into the last search round where the posterior allows), the recipe defaults
(confidence 0.99, the probe budget derived from the information bound,
:func:`bisectbot.bisect.default_budget`) -- exactly as ``bisectbot run --parallel k`` and
``bisectbot round plan --slots k`` do, feeding each round's verdicts in the order the
session feeds them (:func:`bisectbot.session.rounds.loop.feed_order`).

Probe times are drawn uniformly from 15-40 minutes (issue 16: image pull or build, a
754B-parameter server start, the sweep on MI355X); a round lasts as long as its slowest
probe. Verdicts are exact, or flaky with ``p = 0.1`` (each good/bad verdict flipped with
probability ``p``; the search knows the rate). The same culprits and probe-time streams
are used for every ``k`` (paired trials).

Printed per (N, mode, k): mean and worst rounds, mean wall-clock hours, accuracy (a
verified culprit that is the true first bad; the rest are wrong -- a culprit or range
without the true first bad -- or inconclusive, e.g. the probe budget spent) and the
ratio of mean hours to ``k = 1``.
Target (issue 16): at ``N = 500``, exact, ``k = 4`` takes <= 0.6 x the wall clock of
``k = 1`` with the same accuracy; the flaky figure is printed beside it. The last lines
say plainly whether the target is met.

Run: ``python benchmarks/fanout_sim.py [--trials 200] [--flaky-trials 60] [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bisectbot.bisect import Bisection, default_budget  # noqa: E402
from bisectbot.models import Status, Verdict  # noqa: E402
from bisectbot.session.rounds.loop import feed_order  # noqa: E402

SIZES = (100, 500, 2000)
KS = (1, 2, 4, 8)
FLAKE = 0.1
PROBE_MIN = (15.0, 40.0)  # minutes per probe (issue 16)
CONFIDENCE = 0.99  # recipe default (bisect.confidence)


@dataclass
class Row:
    n: int
    flaky: bool
    k: int
    trials: int
    rounds: float
    worst: int
    hours: float
    acc: float
    wrong: float
    probes: float
    seconds: float


def trial(n: int, k: int, culprit: int, p: float, seed: int) -> tuple[int, float, bool, bool, int]:
    """One search: ``(rounds, wall-clock minutes, correct, wrong culprit named, probes)``."""
    rng_t = random.Random(seed)  # probe times: one stream per trial, the same for every k
    rng_v = random.Random(seed ^ 0x5EED)  # verdict flips
    b = Bisection(n, false_positive=p, false_negative=p, confidence=CONFIDENCE,
                  budget=default_budget(n, p, p, CONFIDENCE, k))  # the recipe default (no max_probes)
    rounds, minutes = 0, 0.0
    while not b.done:
        batch = b.next_probes(k)
        if not batch:
            break
        rounds += 1
        minutes += max(rng_t.uniform(*PROBE_MIN) for _ in batch)
        for (i, _), _ in feed_order(b, [((i, j), None) for j, i in enumerate(batch)]):
            if b.done:
                break
            bad = i >= culprit
            if p and rng_v.random() < p:
                bad = not bad
            b.feed(i, Verdict.BAD if bad else Verdict.GOOD)
    r = b.result()
    ok = r.status is Status.CULPRIT and r.first_bad == culprit and r.verified
    wrong = r.status in (Status.CULPRIT, Status.RANGE) and culprit not in r.culprits
    return rounds, minutes, ok, wrong, b.probes


def run_setting(n: int, k: int, flaky: bool, trials: int, seed: int) -> Row:
    rng = random.Random(seed)
    t0 = time.monotonic()
    rs, ms, oks, bad, ps = [], [], 0, 0, []
    for t in range(trials):
        culprit = rng.randrange(1, n)
        r, m, ok, wrong, pr = trial(n, k, culprit, FLAKE if flaky else 0.0, seed * 100_003 + t)
        bad += wrong
        rs.append(r)
        ms.append(m)
        ps.append(pr)
        oks += ok
    return Row(n, flaky, k, trials, sum(rs) / trials, max(rs), sum(ms) / trials / 60, oks / trials, bad / trials,
               sum(ps) / trials, time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200, help="trials per exact setting")
    ap.add_argument("--flaky-trials", type=int, default=60, help="trials per flaky setting")
    ap.add_argument("--quick", action="store_true", help="fewer trials (50 / 20)")
    ap.add_argument("--seed", type=int, default=16)
    a = ap.parse_args(argv)
    if a.quick:
        a.trials, a.flaky_trials = 50, 20
    print(f"fan-out: probes {PROBE_MIN[0]:.0f}-{PROBE_MIN[1]:.0f} min each, a round = its slowest probe; "
          f"ends checked, verification on, confidence {CONFIDENCE}, derived budget; flaky p = {FLAKE}")
    print(f"{'N':>5} {'mode':>6} {'k':>2} {'trials':>6} {'rounds':>7} {'worst':>5} {'probes':>6} "
          f"{'hours':>6} {'acc':>6} {'wrong':>6} {'x k=1':>6} {'sec':>5}")
    rows: dict[tuple[int, bool, int], Row] = {}
    for n in SIZES:
        for flaky in (False, True):
            for k in KS:
                row = run_setting(n, k, flaky, a.flaky_trials if flaky else a.trials, a.seed + n)
                rows[(n, flaky, k)] = row
                base = rows[(n, flaky, 1)]
                print(f"{n:>5} {'flaky' if flaky else 'exact':>6} {k:>2} {row.trials:>6} {row.rounds:>7.2f} "
                      f"{row.worst:>5} {row.probes:>6.1f} {row.hours:>6.2f} {row.acc:>6.1%} {row.wrong:>6.1%} "
                      f"{row.hours / base.hours:>6.2f} {row.seconds:>5.1f}", flush=True)
    e1, e4 = rows[(500, False, 1)], rows[(500, False, 4)]
    f1, f4 = rows[(500, True, 1)], rows[(500, True, 4)]
    ratio = e4.hours / e1.hours
    met = ratio <= 0.6 and e4.acc >= e1.acc
    print(f"N = 500 exact: k = 4 takes {e4.hours:.2f} h vs {e1.hours:.2f} h at k = 1 = {ratio:.2f} x "
          f"(target <= 0.60 x), accuracy {e4.acc:.1%} vs {e1.acc:.1%}: {'MET' if met else 'NOT MET'}")
    print(f"N = 500 flaky (p = {FLAKE}): k = 4 takes {f4.hours:.2f} h vs {f1.hours:.2f} h at k = 1 = "
          f"{f4.hours / f1.hours:.2f} x, accuracy {f4.acc:.1%} vs {f1.acc:.1%}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
