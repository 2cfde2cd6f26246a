"""Peak RSS of one command in its own process, not inflated by the process that started it.

Linux carries the resident-set high-water mark of the exec-ing process over ``execve``
(``exec_mmap`` → ``setmax_mm_hiwater_rss(&signal->maxrss, old_mm)``), and a child forked or
vforked by the test runner still has the runner's memory when it execs. So ``ru_maxrss`` of a
child of a pytest worker (from ``wait4`` or from the child's own ``getrusage``) is at least the
worker's own peak: a worker that earlier ran memory-heavy tests reports hundreds of MiB for a
20 MiB child. :func:`run_measured` therefore starts the command from a small launcher process
(one bare Python, ~10 MiB) and reads ``wait4`` there: the figure is the command's own peak (and
that of the children it waited for), whatever the runner holds. Used by tests/hostile and
``benchmarks/hostile_bounds.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO

LAUNCHER = """\
import os, subprocess, sys, threading, time
out, timeout, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t0 = time.monotonic()
p = subprocess.Popen(argv)
killer = threading.Timer(timeout, p.kill)
killer.start()
try:
    _, status, usage = os.wait4(p.pid, 0)
finally:
    killer.cancel()
with open(out, "w") as fh:
    fh.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss} {time.monotonic() - t0}")
"""


def run_measured(argv: list[str], tmp: Path, *, env: dict[str, str] | None = None, timeout: float = 300,
                 stdout: IO | int | None = None, stderr: IO | int | None = None) -> tuple[int, int, float]:
    """Run ``argv`` to its end (killed after ``timeout`` seconds); return (exit code, peak RSS in
    KiB, wall seconds) of that process alone (see the module docstring). ``tmp`` is a directory
    for the launcher's figures; ``stdout``/``stderr`` are passed to the command."""
    figures = Path(tmp) / f"peak-rss-{os.getpid()}-{len(list(Path(tmp).glob('peak-rss-*')))}.txt"
    subprocess.run([sys.executable, "-c", LAUNCHER, str(figures), str(timeout), *argv], env=env,
                   stdout=stdout, stderr=stderr, check=True, timeout=timeout + 60)
    rc, rss, wall = figures.read_text().split()
    return int(rc), int(rss), float(wall)
