"""How few prompt tokens can a threshold search send? Dynamic programs beside the real search (issue 15).

``benchmarks/reproducer_cost.py`` prints, per planted threshold T, the least that any search
meeting issue 11 sends when it knows T (4T - w + 1 tokens). A search does not know T; this
script asks what the best search that does not know it can guarantee, under the same rules:

* sizes on the 3 % grid of 1K-120K (each size ``max(3 % of it, 64)`` tokens above the last,
  155 steps), so that two neighbours make an interval narrow enough for issue 11;
* a search ends with both interval ends requested, the first-garbage size asked again (the
  second filler seed) and one larger size, unless a GARBAGE size at most ``--reuse`` times the
  first-garbage size was already requested (the real search reuses one within two steps; the
  default 2.0 here is generous, so "infeasible" answers are the stronger);
* at most 12 sizes in all (issue 11's budget), confirmation included;
* optionally the maximum first (``--healthy`` tokens for a healthy build: 120,000 = one
  request at the maximum, which is what the real search spends on half of a bisection's probes).

Printed: for each ``--feasible`` limit Tc, whether some search keeps every T <= Tc within
2 x the fixed 5-size sweep (171,521 tokens) at the given healthy-build cost, with the least
worst excess over that limit (tokens); and the least *mean* prompt tokens over T uniform on
the grid's steps with the maximum first, beside the real ``search`` (``bisectbot.reproduce.
threshold``) on the same thresholds. The grid restricts where a search may probe, so the
figures describe searches on that grid, not every conceivable search.

Run: ``python benchmarks/threshold_bounds.py [--feasible 40000,50000] [--healthy 120000]``
(each limit takes 10-60 s of one core).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.reproducer_cost import MAX, MIN, sweep_sizes  # noqa: E402

TOL, FLOOR, BUDGET = 0.03, 64, 12
INF = float("inf")


def size_grid(lo: int = MIN, hi: int = MAX) -> list[int]:
    """Sizes (tokens) from ``lo`` to ``hi``, each ``max(TOL * previous, FLOOR)`` above the previous."""
    g = [lo]
    while g[-1] + max(math.floor(TOL * g[-1]), FLOOR) < hi:
        g.append(g[-1] + max(math.floor(TOL * g[-1]), FLOOR))
    return g + [hi]


GRID = size_grid()
TOP = len(GRID) - 1
SWEEP = sum(sweep_sizes())


def _larger(j: int) -> int:
    return min(MAX, math.ceil(GRID[j] * (1 + TOL)))


def least_worst_excess(limit: float, healthy: float, reuse: float, budget: int = BUDGET) -> float:
    """min over searches of max over T of (tokens(T) - allowance(T)), allowance 2 x sweep for
    T <= ``limit`` and unlimited above, and ``healthy`` tokens when there is no threshold.
    <= 0: some search meets 2 x the sweep for every T <= ``limit``."""

    def allowance(j: int) -> float:
        return 2 * SWEEP if GRID[j] <= limit else INF

    @functools.cache
    def f(i: int, j: int, k: int, lo_asked: bool, hi_asked: bool, near: bool) -> float:
        # T in (GRID[i], GRID[j]]; with j == TOP and not hi_asked also "no threshold"
        if j - i == 1:
            cost, n = GRID[j], 1  # the second filler seed
            if not lo_asked:
                cost, n = cost + GRID[i], n + 1
            if not hi_asked:
                cost, n = cost + GRID[j], n + 1
            if not near and j < TOP:
                cost, n = cost + _larger(j), n + 1
            worst = cost - allowance(j)
            if not hi_asked:  # j == TOP: the healthy build ends after asking the maximum
                worst = max(worst, GRID[j] - healthy)
            return worst if n <= k else INF
        if k <= 0:
            return INF
        best = INF
        top = j + 1 if (j == TOP and not hi_asked) else j
        for x in range(i + 1, top):
            if x == j:  # the maximum itself: GARBAGE -> known; OK -> healthy, done
                v = GRID[x] + max(f(i, j, k - 1, lo_asked, True, False), -healthy)
            else:
                v = GRID[x] + max(f(i, x, k - 1, lo_asked, True, hi_asked and GRID[j] <= reuse * GRID[x]),
                                  f(x, j, k - 1, True, hi_asked, near))
            best = min(best, v)
        return best

    return f(0, TOP, budget, False, False, False)


def least_mean(reuse: float, budget: int = BUDGET) -> float:
    """Least mean prompt tokens of a search that asks the maximum first (GARBAGE there), T uniform
    over the grid's steps (GRID[j] for j = 1..TOP)."""

    @functools.cache
    def e(i: int, j: int, k: int, lo_asked: bool, near: bool) -> float:
        if j - i == 1:
            cost, n = GRID[j], 1
            if not lo_asked:
                cost, n = cost + GRID[i], n + 1
            if not near and j < TOP:
                cost, n = cost + _larger(j), n + 1
            return cost if n <= k else INF
        if k <= 0:
            return INF
        best = INF
        for x in range(i + 1, j):
            p = (x - i) / (j - i)  # T <= GRID[x]: GARBAGE at x
            v = GRID[x] + p * e(i, x, k - 1, lo_asked, GRID[j] <= reuse * GRID[x]) \
                + (1 - p) * e(x, j, k - 1, True, near)
            best = min(best, v)
        return best

    return MAX + e(0, TOP, budget - 1, False, False)


def real_mean() -> tuple[float, int]:
    """Mean prompt tokens of ``bisectbot.reproduce.search.search`` over T = GRID[1..TOP] (a server
    that is GARBAGE at and above T for either prompt) and its most sizes."""
    from bisectbot.models import Outcome
    from bisectbot.recipe import ReproducerSpec
    from bisectbot.reproduce.search import SizeResult, search

    spec = ReproducerSpec(min_size=MIN, max_size=MAX, tolerance=TOL, tolerance_tokens=FLOOR)
    total, most = 0, 0
    for t in GRID[1:]:
        sent: list[int] = []

        def probe(size: int, t: int = t, sent: list[int] = sent) -> SizeResult:
            sent.append(size)
            return SizeResult(size, size, Outcome.GARBAGE if size >= t else Outcome.OK, requests=1)

        probe.confirm = probe  # type: ignore[attr-defined]
        res = search(probe, spec)
        assert res.status == "garbage" and res.last_ok < t <= res.first_garbage, (t, sent)
        total += sum(sent)
        most = max(most, len(sent))
    return total / TOP, most


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--feasible", default="40000,50000", help="comma-separated limits Tc (tokens)")
    ap.add_argument("--healthy", type=float, default=120000,
                    help="tokens a healthy build may cost (120000: the maximum first; 0: no limit)")
    ap.add_argument("--reuse", type=float, default=2.0)
    a = ap.parse_args(argv)
    sys.setrecursionlimit(10000)
    healthy = a.healthy or INF
    print(f"grid: {len(GRID)} sizes {MIN}-{MAX}; sweep {SWEEP:,} tokens; <= {BUDGET} sizes; larger size reused "
          f"up to {a.reuse} x first garbage; healthy build <= {'any' if healthy == INF else f'{healthy:,.0f}'} tokens")
    for limit in (float(x) for x in a.feasible.split(",")):
        t0 = time.monotonic()
        v = least_worst_excess(limit, healthy, a.reuse)
        print(f"every T <= {limit:,.0f} within 2 x sweep: {'possible' if v <= 0 else 'IMPOSSIBLE'} "
              f"(least worst excess {v:+,.0f} tokens; {time.monotonic() - t0:.0f} s)", flush=True)
    t0 = time.monotonic()
    best = least_mean(a.reuse)
    mean, most = real_mean()
    print(f"mean over T on the grid, maximum first: least {best / SWEEP:.3f} x sweep; bisectbot's search "
          f"{mean / SWEEP:.3f} x (at most {most} sizes) ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
