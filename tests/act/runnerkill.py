"""A runner that dies mid-round, killed from outside as a real one is.

The candidates run in the sandbox (``bisectbot.sandbox``): their own PID namespace, so a
candidate cannot signal the ``bisectbot round probe`` process that runs it (``os.getppid()``
names a process of its own namespace). A test that wants "this runner dies" has its candidate
ask the host instead: the candidate writes ``kill-<n>-<anything>`` (``n``: the commit index of
its checkout, from ``n.txt``) into a directory the sandbox lets it write (the tests' base
temporary directory, tests/conftest.py) and waits; :class:`RunnerKiller`, a thread of the test
on the host, SIGKILLs every ``round probe`` process whose command line names that commit. The
bot dies before it writes a verdict file, and ``bwrap --die-with-parent`` takes the candidate
with it: what the round sees is a runner that vanished.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
from pathlib import Path
from types import TracebackType

#: The candidate's side, for a check script: ``die(reqdir)`` asks the host to kill its runner.
DIE = """\
def die(reqdir):  # the sandbox gives the candidate no route to its bot: ask the test's host-side killer
    import time, uuid
    open(os.path.join(reqdir, "kill-" + open("n.txt").read().strip() + "-" + uuid.uuid4().hex), "w").close()
    time.sleep(120)  # killed with the runner long before this ends
    sys.exit(3)
"""


def _round_probes(sha: str) -> list[int]:
    """Host pids of ``bisectbot ... round probe ... --ref SHA`` processes (any PID namespace below the host's)."""
    out = []
    for p in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            args = Path(p).read_bytes().split(b"\0")
        except OSError:
            continue
        pairs = list(zip(args, args[1:]))
        if (b"round", b"probe") in pairs and (b"--ref", sha.encode()) in pairs:
            out.append(int(p.split("/")[2]))
    return out


class RunnerKiller:
    """``with RunnerKiller(reqdir, shas) as k:`` -- while the block runs, each request file a candidate
    writes into ``reqdir`` kills the runners probing ``shas[n]``; ``k.killed`` lists the commit
    indices whose runners were killed (a test asserts on it, so a killer that never fired fails)."""

    def __init__(self, reqdir: Path, shas: list[str]) -> None:
        self.reqdir, self.shas = Path(reqdir), shas
        self.reqdir.mkdir(parents=True, exist_ok=True)
        self.killed: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RunnerKiller:
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            for req in sorted(self.reqdir.glob("kill-*")):
                n = int(req.name.split("-")[1])
                pids = _round_probes(self.shas[n])
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if pids:
                    self.killed.append(n)
                    req.rename(req.with_name("done-" + req.name))
