"""Per-probe cost of the candidate sandbox (issue 36): the same bisection with and without it.

Usage: ``python benchmarks/sandbox_overhead.py [--repeats N]``

Builds one history of the reference engine (16 commits, command reproducer: a build command and
one reproducer process per probe, the local runner's two candidate processes), then runs
``bisectbot run`` on it ``N`` times with the sandbox (bubblewrap) and ``N`` times with
``BISECTBOT_SANDBOX=off``, alternating, each on a fresh state directory. Prints the median
wall time per probe of each, their ratio, the added seconds per probe, and those seconds as a
share of a real-vLLM lane probe (40.5 s on the H200, 65-138 s on the CPU lane: TOOLING.md).
Also the bare cost of one sandboxed process start (``bwrap ... true`` against ``true``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

from tests.bisect.conftest import make_engine_repo, write_recipe  # noqa: E402

REAL_PROBE_S = 40.5  # a real vLLM probe on the H200 (TOOLING.md, "A real probe's time")


def one_run(recipe: Path, work: Path, sandbox: bool, n: int) -> tuple[float, int]:
    """(wall seconds, probes) of one ``bisectbot run`` on a fresh state directory."""
    state, out = work / f"state-{n}", work / f"out-{n}"
    env = {**os.environ, "ENGINE_STARTS": "/dev/null", "BISECTBOT_SANDBOX": "on" if sandbox else "off"}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(recipe),
                        "--out", str(out)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"run failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    stages = json.loads((out / "result.json").read_text()).get("stages", [])
    probes = sum(len(st.get("probes") or []) for st in stages) or 1
    return wall, probes


def spawn_cost(reps: int = 30) -> tuple[float, float]:
    """Median seconds of ``true`` and of ``true`` inside the sandbox's namespaces."""
    from bisectbot import sandbox

    argv, env = sandbox.wrap(["true"], tree=tempfile.gettempdir(), env=dict(os.environ))
    out = []
    for cmd in (["true"], argv):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisectbot-sandbox-bench-") as d:
        work = Path(d)
        repo = make_engine_repo(work / "repo", n=16, k=11)
        recipe = write_recipe(work / "r.yaml", repo, work / "out", mode="command")
        per = {True: [], False: []}
        n = 0
        for _ in range(args.repeats):
            for sb in (False, True):
                wall, probes = one_run(recipe, work, sb, n)
                per[sb].append(wall / probes)
                n += 1
        off, on = statistics.median(per[False]), statistics.median(per[True])
        bare, boxed = spawn_cost()
    added = on - off
    print(f"per probe (median of {args.repeats} runs, 16-commit history, build + reproducer per probe)")
    print(f"  sandbox off: {off * 1000:8.1f} ms")
    print(f"  sandbox on:  {on * 1000:8.1f} ms   ratio {on / off:.2f}x, +{added * 1000:.1f} ms per probe")
    print(f"  share of a real vLLM probe ({REAL_PROBE_S} s): {added / REAL_PROBE_S * 100:.3f} %")
    print(f"one process start: true {bare * 1000:.1f} ms, in the sandbox {boxed * 1000:.1f} ms")


if __name__ == "__main__":
    main()
