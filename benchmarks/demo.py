"""Wall time of ``bisectbot demo`` on 2 CPU cores (target of issue 8: under two minutes).

Runs ``python -m bisectbot demo`` in a subprocess per (seed, commits) setting, pinned to
CPUs 0 and 1 with ``taskset`` when it exists (Linux), each with a fresh output and ledger
directory, and prints per run: wall time (seconds), probes (search, verification and
triage), skips, chat requests sent to the engines, mean seconds per probe, and whether
the planted culprit was found. The last line says whether every run met the target.

Run: ``python benchmarks/demo.py [--seeds 1,2,3] [--commits 40] [--target 120]``.
Exit code 0 when every run found the culprit within the target, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(seed: int, commits: int, cpus: str) -> dict[str, object]:
    """One demo run; returns its figures (``wall_s`` in seconds)."""
    with tempfile.TemporaryDirectory(prefix="bisectbot-bench-") as tmp:
        out, state = Path(tmp) / "out", Path(tmp) / "state"
        argv = [sys.executable, "-m", "bisectbot", "demo", "--out", str(out), "--state", str(state),
                "--seed", str(seed), "--commits", str(commits)]
        if cpus and shutil.which("taskset"):
            argv = ["taskset", "-c", cpus, *argv]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        wall = time.monotonic() - t0
        probes: list[dict] = []
        if (out / "result.json").is_file():  # the run's result (report.json nests it under "result")
            res = json.loads((out / "result.json").read_text())
            probes = [pr for st in res.get("stages", []) for pr in st.get("probes", [])]
        requests = sum(int((pr.get("extra") or {}).get("requests") or 0) for pr in probes)
        return {"seed": seed, "commits": commits, "rc": p.returncode, "wall_s": wall, "probes": len(probes),
                "skips": sum(1 for pr in probes if pr.get("verdict") == "skip"), "requests": requests,
                "per_probe_s": sum(float(pr.get("duration_s", 0)) for pr in probes) / max(1, len(probes)),
                "tail": (p.stdout + p.stderr)[-600:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated history seeds")
    ap.add_argument("--commits", type=int, default=40, help="commits per history")
    ap.add_argument("--cpus", default="0,1", help="taskset CPU list ('' = no pinning)")
    ap.add_argument("--target", type=float, default=120.0, help="seconds per run")
    a = ap.parse_args(argv)
    rows = [run_once(int(s), a.commits, a.cpus) for s in a.seeds.split(",") if s.strip()]
    print(f"{'seed':>4} {'commits':>7} {'rc':>3} {'wall s':>7} {'probes':>6} {'skips':>5} {'requests':>8} "
          f"{'s/probe':>7}")
    for r in rows:
        print(f"{r['seed']:>4} {r['commits']:>7} {r['rc']:>3} {r['wall_s']:>7.1f} {r['probes']:>6} {r['skips']:>5} "
              f"{r['requests']:>8} {r['per_probe_s']:>7.2f}")
        if r["rc"] != 0:
            print(r["tail"])
    ok = all(r["rc"] == 0 and float(r["wall_s"]) < a.target for r in rows)  # type: ignore[arg-type]
    worst = max(float(r["wall_s"]) for r in rows)  # type: ignore[arg-type]
    print(f"target: every run finds the planted culprit in under {a.target:.0f} s on CPUs "
          f"{a.cpus or 'all'}: {'met' if ok else 'NOT met'} (slowest {worst:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
