"""One probe's sweep never takes another probe's process (``bisectbot/reaper.py``, issue 24's reaper).

``run --parallel`` runs probes in threads of one non-dumpable bot. After each command of a probe
(``bisectbot.bounded.run_process``) and at its end, :func:`bisectbot.reaper.kill_probe` kills that
probe's descendants -- and, before, every descendant whose environment it could not read. Below
root the bot cannot read the environment of a non-dumpable process of its own uid, and a fork of
the bot is non-dumpable until it execs: another thread's reproducer in the making. The sweep
killed it and reaped it, and that thread's ``Popen.wait()`` read ``0`` (ECHILD): "command exit
0", a GOOD verdict for a commit that has the bug.

Here the installed ``reaper`` module (copied beside a script: it needs only the standard
library) runs under the system ``python3`` as ``nobody`` when the tests run as root (root reads
every ``environ``), as the bot does on a runner set up as runners/README.md says (a dedicated
user). Probe B's reproducer hides its environment and exits 3 after 1.5 s; probe A ends while it
runs. B must read 3 (before: 0). With no other probe in flight, a hidden descendant is still
killed at a probe's end (the guarantee of issue 24, input 2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''\
    import os, subprocess, sys, threading, time
    import reaper

    reaper.harden_process()
    HIDE = "import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(%s); raise SystemExit(3)"
    out, started = {}, threading.Event()

    def probe_b():
        with reaper.probe_scope():
            p = subprocess.Popen([sys.executable, "-c", HIDE % 1.5],
                                 env={"PATH": "/usr/bin:/bin", **reaper.marker_env()})
            started.set()
            out["rc"] = p.wait()

    t = threading.Thread(target=probe_b)
    t.start()
    started.wait()
    time.sleep(0.4)
    with reaper.probe_scope():  # probe A ends while B's reproducer runs
        pass
    t.join()
    p = subprocess.Popen([sys.executable, "-c", HIDE % 30])  # no other probe in flight now
    time.sleep(0.4)
    with reaper.probe_scope():
        pass
    stat = f"/proc/{p.pid}/stat"
    state = open(stat).read().rsplit(")", 1)[1].split()[0] if os.path.exists(stat) else "gone"
    print("RESULT", out["rc"], state in ("Z", "gone"), flush=True)
''')


def test_a_probe_ending_never_kills_or_reaps_another_probes_reproducer() -> None:
    import bisectbot.reaper

    py = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    assert py, "a system python3 (the bot's user must be able to run it)"
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] if os.getuid() == 0 else []
    work = Path(tempfile.mkdtemp(prefix="bisectbot-reaper-"))  # not under pytest's 0700 temporary root
    try:
        shutil.copy(bisectbot.reaper.__file__, work / "reaper.py")
        (work / "s.py").write_text(SCRIPT)
        for f in (work, work / "reaper.py", work / "s.py"):
            f.chmod(0o755)
        p = subprocess.run([*drop, py, "s.py"], cwd=work, capture_output=True, text=True, timeout=120,
                           env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
        _, rc, hidden_killed = line[0].split()
        assert rc == "3", f"probe B's reproducer read exit {rc} (0: reaped by probe A's sweep; -9: killed by it)"
        assert hidden_killed == "True", "a hidden descendant survived a probe's end with no other probe in flight"
    finally:
        shutil.rmtree(work, ignore_errors=True)
