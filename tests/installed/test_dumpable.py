"""The installed ``bisectbot`` CLI makes itself non-dumpable (issue 24, input 2; ``bisectbot/reaper.py``).

The claim: ``prctl(PR_SET_DUMPABLE, 0)`` in the entry point, so the kernel makes
``/proc/<bisectbot>/environ`` (and ``mem``, ``maps``) root-owned and a candidate running as the
bot's own user cannot read the bot's environment.

* In process: the ``bisectbot`` console script's entry point, read from the installed
  distribution's metadata, run as the script runs it; before it the process is dumpable, after it
  not, and it is a child subreaper.
* From where the threat sits: a command reproducer run by ``bisectbot probe --recipe`` (a
  candidate process, the bot's child, the same uid) finds its ``bisectbot`` ancestor and tries to
  open that ancestor's ``/proc/PID/environ``, which holds a sentinel variable. Root reads any
  process's ``environ`` (on this kernel even without ``CAP_SYS_PTRACE``), so as root the bot and
  its candidate run as ``nobody`` (``setpriv --reuid``, util-linux).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.installed.test_installed import clean_env, exe

CHECK = textwrap.dedent('''\
    """Candidate: read the environment of the bisectbot process above me; print what happened as JSON."""
    import json, os, sys

    out, sentinel = sys.argv[1], sys.argv[2]
    pid, seen = os.getppid(), []
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\\0")
        seen.append(pid)
        if any(a.endswith(b"bisectbot") for a in argv[:2]) and b"probe" in argv:
            break
        with open(f"/proc/{pid}/stat", "rb") as fh:
            pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    else:
        pid = 0
    rec = {"bot_pid": pid, "walked": seen, "uid": os.getuid()}
    if pid:
        rec["environ_uid"] = os.stat(f"/proc/{pid}/environ").st_uid
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                rec["read"], rec["sentinel_seen"] = True, sentinel.encode() in fh.read()
        except PermissionError as e:
            rec["read"], rec["error"] = False, f"{type(e).__name__}: {e}"
    with open(out, "w") as fh:
        json.dump(rec, fh)
    sys.exit(0)
''')


NOBODY = 65534

IN_PROCESS = textwrap.dedent('''\
    import ctypes, sys
    from importlib.metadata import entry_points

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    before = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "bisectbot"]
    main = ep.load()
    try:
        main(["recipe", "schema"])  # any command: the entry point hardens the process first
    except SystemExit as e:
        code = e.code
    reaper = ctypes.c_int(0)
    libc.prctl(37, ctypes.byref(reaper), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    print(f"RESULT {ep.value} {code} {before} {libc.prctl(3, 0, 0, 0, 0)} {reaper.value}", file=sys.stderr)
    ''')


def test_the_console_script_entry_point_makes_the_process_non_dumpable() -> None:
    p = subprocess.run([sys.executable, "-c", IN_PROCESS], capture_output=True, text=True, timeout=60)
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-2000:]
    _, entry, code, before, after, subreaper = line[0].split()
    assert entry == "bisectbot.cli:main" and code == "0", line
    assert (before, after, subreaper) == ("1", "0", "1"), line  # dumpable -> not; a child subreaper


def _as_bot_user() -> list[str]:
    """The argv prefix that runs the bot (and so its candidates) as a uid without root's powers:
    ``[]`` below root, ``setpriv --reuid nobody`` as root; skips as root when ``nobody`` cannot run
    this interpreter (e.g. pyenv under a 0700 /root: the in-process test still runs)."""
    if os.getuid() != 0:
        return []
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    p = subprocess.run([*drop, sys.executable, "-c", "import bisectbot"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"as root, nobody cannot run {sys.executable} ({p.stderr.strip()[-200:]})")
    return drop


def test_a_candidate_cannot_read_the_bots_environ(tmp_path_factory) -> None:
    drop = _as_bot_user()
    work = Path(tempfile.mkdtemp(prefix="bisectbot-dumpable-"))  # not under pytest's 0700 temporary root
    try:
        (work / "check.py").write_text(CHECK)
        sentinel = f"dumpable-sentinel-{uuid.uuid4().hex}"
        out = work / "seen.json"
        # the candidate needs only the standard library: a system python3 nobody can run, else this one
        py = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") if drop else sys.executable
        (work / "recipe.yaml").write_text(textwrap.dedent(f"""\
            name: dumpable-check
            source: {{kind: git, repo: .}}
            runner: cpu
            reproducer:
              kind: command
              command: ["{py}", "{work / 'check.py'}", "{out}", "{sentinel}", "{{size}}"]
              command_timeout_s: 60
            regress: garbage
            """))
        (work / "home").mkdir()
        if drop:
            for p in [work, *work.rglob("*")]:
                os.chown(p, NOBODY, NOBODY)
        # the second line of defence alone: in the sandbox (issue 36) the candidate does not even see its
        # bot ancestor (own PID namespace: tests/sandbox); here the bot's non-dumpable flag is tested
        env = clean_env(HOME=str(work / "home"), BISECTBOT_STATE=str(work / "state"), DUMPABLE_SENTINEL=sentinel,
                        BISECTBOT_CACHE=str(work / "cache"), XDG_CACHE_HOME=str(work / "cache"),
                        BISECTBOT_SANDBOX="off")
        r = subprocess.run([*drop, exe(), "probe", "--recipe", str(work / "recipe.yaml"), "--sizes", "1000"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert out.is_file(), f"the candidate never ran: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
        rec = json.loads(out.read_text())
        assert rec["bot_pid"] and rec["uid"] == (NOBODY if drop else os.getuid()), rec  # found its bot ancestor
        # non-dumpable: the kernel hands the bot's /proc files to root, and the bot's own uid is refused
        assert rec["environ_uid"] == 0, rec
        assert rec["read"] is False and "Permission denied" in rec["error"], rec
        assert not rec.get("sentinel_seen"), rec
    finally:
        shutil.rmtree(work, ignore_errors=True)
