"""Time and memory of the probe against hostile servers and a flooding reproducer (issue 13).

Usage: ``python benchmarks/hostile_bounds.py``

Starts each hostile server of ``tests/hostile/hostile_server.py`` in its own process, runs
``bisectbot probe`` against it in another, and prints the probe process's wall time and peak RSS
(``wait4`` in a small launcher: that process and the children it waited for). The tests in ``tests/hostile/`` assert
the bounds (peak RSS < 512 MiB, dribbling servers cut off at the timeout); this prints the figures.
Before issue 13: a 50 MB reply took 1.8 GB, 500 MB of reproducer output 1 GB, and a server
sending one byte every 1.5 s held ``--timeout 3`` for more than 45 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "hostile" / "hostile_server.py"
sys.path.append(str(ROOT))

from tests.hostile.peak_rss import run_measured  # noqa: E402


def measure(args: list[str], timeout: float = 300) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak RSS MiB) of ``bisectbot ARGS`` (its own peak, read in a small
    launcher: ``tests/hostile/peak_rss.py`` says why ``wait4`` from here would report this script's)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        rc, rss, wall = run_measured([sys.executable, "-m", "bisectbot", "--json", *args], Path(tmp), env=env,
                                     timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return rc, wall, rss / 1024


def server(mode: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, str(SERVER), mode], stdout=subprocess.PIPE, text=True)
    return p, f"http://127.0.0.1:{p.stdout.readline().strip()}"


def main() -> None:
    probe = ["probe", "--sizes", "200", "--max-tokens", "10"]
    rows = []
    for mode, timeout in (("dribble", "3"), ("dribble-headers", "3"), ("huge", "60"), ("huge-declared", "60"),
                          ("gzip-bomb", "60")):
        srv, url = server(mode)
        try:
            rc, wall, rss = measure([*probe, "--endpoint", url, "--timeout", timeout])
        finally:
            srv.kill()
            srv.wait()
        rows.append((f"server: {mode} (--timeout {timeout})", rc, wall, rss))
    with tempfile.TemporaryDirectory() as tmp:
        flood = Path(tmp) / "flood.py"
        flood.write_text("import sys\nb = b'x' * (1 << 20)\nfor _ in range(500):\n    sys.stdout.buffer.write(b)\n")
        rec = Path(tmp) / "r.yaml"
        rec.write_text(f"name: flood\nsource: {{kind: git, repo: {tmp}}}\nregress: command\n"
                       f"reproducer: {{kind: command, command: ['{sys.executable}', '{flood}'], sizes: [1000], "
                       "min_size: 1000, max_size: 1000}\n")
        rc, wall, rss = measure(["probe", "--recipe", str(rec)])
        rows.append(("reproducer printing 500 MB", rc, wall, rss))
    print(f"{'case':42} {'exit':>4} {'wall s':>7} {'peak RSS MiB':>13}")
    for name, rc, wall, rss in rows:
        print(f"{name:42} {rc:>4} {wall:>7.1f} {rss:>13.0f}")
    print("bounds: peak RSS < 512 MiB; dribbling servers cut off near their --timeout")


if __name__ == "__main__":
    main()
