"""Cost of one threshold search against the reference engine (issue 11 budget, issue 15 rows).

Usage: ``python benchmarks/reproducer_cost.py [--json] [--thresholds 1500,5000,20000,50000,110000]``

For each planted threshold T (prompt tokens) a real reference-engine process is started
(healthy replies terse 30 % of the time) and ``search_threshold`` runs over 1K-120K at
3 % / 64 tokens. Printed per T: chat requests (target <= 12, boundary confirmation
included), the interval and its width, prompt tokens sent by the search beside a fixed
5-size geometric sweep of the same range (the classic script's cost; issue 15 target
<= 2x), the least any search meeting issue 11 can send (:func:`oracle_tokens`) and its
ratio to the sweep, and ``/tokenize`` calls per chat request (target <= 1). Figures come
from the engine's own ``/stats`` (prompt tokens it served, requests it counted).

A last line measures a healthy engine (no threshold): an OK claim costs the coarse ladder
(issue 37, input 4: steps of at most 2x from 1K to 120K, 8 requests; one request before), the
price of saying "no garbage" only about sizes that were asked.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bisectbot.demo.engine import start_engine  # noqa: E402
from bisectbot.recipe import ReproducerSpec  # noqa: E402
from bisectbot.reproduce.threshold import search_threshold  # noqa: E402

MIN, MAX = 1000, 120000


def sweep_sizes(lo: int = MIN, hi: int = MAX, n: int = 5) -> list[int]:
    """``n`` sizes spaced geometrically from ``lo`` to ``hi`` (tokens)."""
    return [round(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)]


def oracle_tokens(threshold: int, tolerance: float = 0.03, tolerance_tokens: int = 64) -> int:
    """Fewest prompt tokens (a lower bound) that any threshold search meeting issue 11 sends
    for a planted threshold ``threshold`` (tokens), even one that knows it in advance.

    Issue 11 asks for an interval ``last_ok < T <= first_garbage`` at most
    ``w = max(tolerance * T, tolerance_tokens)`` wide, both ends sizes actually requested,
    and a boundary confirmation: ``first_garbage`` again with a second filler seed and one
    larger size. So at least four prompts are sent: ``last_ok >= T - w``,
    ``first_garbage >= T`` twice, and a size ``> first_garbage`` (one already requested
    during the search counts; it was still sent). Their sum is ``4 T - w + 1``.
    """
    w = max(tolerance * threshold, tolerance_tokens)
    return max(1, math.ceil(threshold - w)) + 2 * threshold + threshold + 1


def measure(threshold: int, terse: float = 0.3) -> dict[str, Any]:
    """One search against an engine with ``threshold``; the figures of the module docstring."""
    spec = ReproducerSpec(min_size=MIN, max_size=MAX, tolerance=0.03, tolerance_tokens=64)
    with start_engine(threshold=threshold, terse=terse) as e:
        res = search_threshold(e.url, spec)
        st = e.stats()
    sent = sum(st["prompt_tokens"])
    sweep = sum(sweep_sizes())
    lo, hi = res.last_ok, res.first_garbage
    return {"threshold": threshold, "status": res.status, "interval": [lo, hi],
            "inside": lo is not None and hi is not None and lo < threshold <= hi,
            "width": (hi - lo) if lo is not None and hi is not None else None,
            "width_ok": lo is not None and hi is not None and hi - lo <= max(0.03 * threshold, 64),
            "requests": st["chat_requests"], "tokenize_calls": st["tokenize_requests"],
            "tokenize_per_request": st["tokenize_requests"] / max(1, st["chat_requests"]),
            "prompt_tokens": sent, "sweep_tokens": sweep, "ratio_to_sweep": sent / sweep,
            "oracle_tokens": oracle_tokens(threshold), "oracle_ratio_to_sweep": oracle_tokens(threshold) / sweep,
            "flaky": res.flaky}


def measure_healthy() -> dict[str, Any]:
    """One search against a healthy engine: requests, prompt tokens and the sizes the OK claim names."""
    spec = ReproducerSpec(min_size=MIN, max_size=MAX, tolerance=0.03, tolerance_tokens=64)
    with start_engine(threshold=None) as e:
        res = search_threshold(e.url, spec)
        st = e.stats()
    return {"status": res.status, "requests": st["chat_requests"], "prompt_tokens": sum(st["prompt_tokens"]),
            "ok_sizes": res.ok_sizes, "ratio_to_sweep": sum(st["prompt_tokens"]) / sum(sweep_sizes())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--thresholds", default="1500,5000,20000,50000,110000")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = [measure(int(t)) for t in a.thresholds.split(",")]
    mean_ratio = sum(r["ratio_to_sweep"] for r in rows) / len(rows)
    healthy = measure_healthy()
    if a.json:
        print(json.dumps({"rows": rows, "mean_ratio_to_sweep": mean_ratio, "sweep_sizes": sweep_sizes(),
                          "healthy": healthy}, indent=2))
        return 0
    print(f"threshold search over {MIN}-{MAX} tokens to 3 % / 64 tokens; sweep = {sweep_sizes()}")
    print(f"{'T':>7} {'status':>8} {'interval':>17} {'width':>6} {'req':>4} {'tok/req':>7} "
          f"{'prompt tok':>10} {'sweep':>8} {'ratio':>6} {'bound':>8} {'ratio':>6}")
    for r in rows:
        iv = f"[{r['interval'][0]}, {r['interval'][1]}]"
        print(f"{r['threshold']:>7} {r['status']:>8} {iv:>17} {r['width'] or 0:>6} {r['requests']:>4} "
              f"{r['tokenize_per_request']:>7.2f} {r['prompt_tokens']:>10} {r['sweep_tokens']:>8} "
              f"{r['ratio_to_sweep']:>6.2f} {r['oracle_tokens']:>8} {r['oracle_ratio_to_sweep']:>6.2f}")
    print(f"inside 5/5: {sum(r['inside'] for r in rows)}/{len(rows)}; width within 3 % or 64 tokens: "
          f"{sum(r['width_ok'] for r in rows)}/{len(rows)}; max requests {max(r['requests'] for r in rows)} "
          f"(target <= 12); max /tokenize per request {max(r['tokenize_per_request'] for r in rows):.2f} "
          f"(target <= 1); prompt tokens vs sweep: mean {mean_ratio:.2f}x, max "
          f"{max(r['ratio_to_sweep'] for r in rows):.2f}x (target <= 2x)")
    print(f"healthy engine: {healthy['status']} after {healthy['requests']} requests, {healthy['prompt_tokens']} "
          f"prompt tokens ({healthy['ratio_to_sweep']:.2f}x the sweep); the OK claim names "
          f"{', '.join(map(str, healthy['ok_sizes']))} (coarse ladder, steps <= 2x; 1 request before issue 37)")
    print("bound: the fewest prompt tokens any search meeting issue 11 sends (last OK >= T - 3 %, first "
          "garbage, its second seed, one larger size: 4T - w + 1); ratio > 2 means the <= 2x target is "
          "out of reach at that T")
    return 0


if __name__ == "__main__":
    sys.exit(main())
