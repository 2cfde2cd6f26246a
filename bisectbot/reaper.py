"""Keep candidate processes from outliving their probe, and the bot's memory from candidates.

Candidate code (a build, a server, a command reproducer) runs as the bot's own user in the
local and release runners. GitHub's hardening guide for self-hosted runners: untrusted code
never shares a process tree with secrets. What this module adds (issue 24, input 2):

* :func:`harden_process` -- called once by the ``bisectbot`` entry point: ``prctl(PR_SET_DUMPABLE,
  0)`` (the kernel then makes ``/proc/<bisectbot>/environ``, ``mem`` and ``maps`` root-owned, so a
  candidate of the same uid cannot read the bot's environment or memory; Yama restricts attach,
  not reading ``environ``) and ``prctl(PR_SET_CHILD_SUBREAPER, 1)`` (an orphaned or ``setsid``'d
  candidate process is re-parented to the bot, not to init, so it stays a descendant that can
  be found and killed).
* Every candidate process started in a probe carries ``BISECTBOT_PROBE=<id>`` (:func:`marker_env`,
  added by :func:`bisectbot.secrets.candidate_env`), the probe's id (:func:`probe_scope`).
* :func:`kill_probe` kills the descendants of one probe (its marker, or an environment the bot
  cannot read for :data:`UNREADABLE_GRACE_S`: a process that made itself non-dumpable, while no
  other probe is in flight -- a fork of the bot reads the same until it execs); :func:`kill_descendants` kills every
  descendant. ``round probe`` kills every descendant before it writes the verdict file; each
  probe of ``run`` kills its own before its verdict is recorded, and ``run`` kills every
  descendant before it writes the report.

Limits (README, "Security model"): a candidate that clears or hides its environment *and* runs while
another probe of the same ``run --parallel`` is in flight survives until that run's end; the
container runner (``runners/*.yaml``) removes the candidate's whole container after each probe.
Linux only (``/proc``, ``prctl``); elsewhere the functions do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator

PR_SET_DUMPABLE = 4  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
PR_GET_DUMPABLE = 3
MARKER = "BISECTBOT_PROBE"

_local = threading.local()
_active: set[str] = set()  # ids of the probes in flight in this process (probe_scope)
_active_lock = threading.Lock()
#: Seconds a descendant's environment must stay unreadable before :func:`kill_probe` takes it for a
#: candidate that hid it: a fork of this (non-dumpable) process is unreadable too until it execs --
#: another thread's git, build or reproducer command in the making, which a kill (and the reaping
#: ``waitpid``) would turn into "exit 0" for that thread's ``Popen`` (ECHILD), a wrong verdict.
UNREADABLE_GRACE_S = 0.25
_servers: set[int] = set()  # sessions of running servers (spawn_logged): spared by kill_probe(spare_servers=True)


def _prctl(option: int, arg: int) -> int:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return -1
    return int(libc.prctl(option, arg, 0, 0, 0))


def harden_process() -> dict[str, bool]:
    """Make this process non-dumpable and a child subreaper; returns what took effect."""
    return {"non_dumpable": _prctl(PR_SET_DUMPABLE, 0) == 0, "subreaper": _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0}


def is_dumpable() -> bool:
    """Whether this process is dumpable (``/proc/self/environ`` readable by its uid)."""
    return _prctl(PR_GET_DUMPABLE, 0) != 0


def current_probe() -> str:
    """The probe id of this thread (``""`` outside :func:`probe_scope`)."""
    return getattr(_local, "probe", "")


def marker_env() -> dict[str, str]:
    """``{BISECTBOT_PROBE: id}`` for a candidate process started in this thread's probe; ``{}``
    outside a probe (a prefetch build, a ``build`` command: killed with every descendant at the end)."""
    pid = current_probe()
    return {MARKER: pid} if pid else {}


@contextlib.contextmanager
def probe_scope() -> Iterator[str]:
    """Run one probe under a fresh id; on the way out its descendants are killed (:func:`kill_probe`)."""
    pid = uuid.uuid4().hex[:16]
    prev = current_probe()
    _local.probe = pid
    with _active_lock:
        _active.add(pid)
    try:
        yield pid
    finally:
        _local.probe = prev
        with _active_lock:
            _active.discard(pid)
        kill_probe(pid)


def server_started(sid: int) -> None:
    """A probe's long-running server (its own session ``sid``) is up: a command the same probe runs
    meanwhile must not take it down (:func:`kill_probe` with ``spare_servers``)."""
    _servers.add(sid)


def server_stopped(sid: int) -> None:
    _servers.discard(sid)


def _sid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            rest = fh.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
        return int(rest[4])  # state ppid pgrp session
    except (OSError, IndexError, ValueError):
        return None


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) >= 2 and rest[0] != "Z":
            kids.setdefault(int(rest[1]), []).append(int(n))
    return kids


def descendants(root: int | None = None) -> list[int]:
    """Live (non-zombie) descendants of ``root`` (default: this process), parents first."""
    root = os.getpid() if root is None else root
    kids = _children_map()
    out: list[int] = []
    todo = list(kids.get(root, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _marker_of(pid: int) -> str | None:
    """The process's ``BISECTBOT_PROBE`` value, ``""`` when it has none, None when its
    environment cannot be read (non-dumpable, gone, another uid)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read(1 << 20)
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(MARKER.encode() + b"="):
            return item.split(b"=", 1)[1].decode("ascii", "replace")
    return ""


def _kill(pids: list[int]) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    for p in pids:  # adopted orphans are our children now: reap them (never a zombie left)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(p, os.WNOHANG)


def _sweep(select: object, passes: int = 20) -> int:
    """Kill the descendants ``select(pid)`` picks until none is left (a fork during a pass is
    caught by the next); returns how many were killed."""
    killed = 0
    for _ in range(passes):
        victims = [p for p in descendants() if select(p)]  # type: ignore[operator]
        if not victims:
            break
        _kill(victims)
        killed += len(victims)
        time.sleep(0.02)
    return killed


def kill_probe(probe_id: str, spare_servers: bool = False, passes: int = 40) -> int:
    """Kill every descendant of this process that belongs to probe ``probe_id`` (its marker) or
    whose environment stays unreadable for :data:`UNREADABLE_GRACE_S` seconds while no other probe
    is in flight here (with one in flight it may be that probe's: it is left to the end of the run,
    the limit the module docstring states); ``spare_servers``: not those in the session of a
    running server (:func:`server_started`). At most ``passes`` passes 20 ms apart. Returns the count."""
    if not os.path.isdir("/proc"):
        return 0
    with _active_lock:
        others = bool(_active - {probe_id})
    unreadable_since: dict[int, float] = {}
    killed = 0
    for _ in range(passes):
        victims: list[int] = []
        waiting = False
        for p in descendants():
            if spare_servers and _servers and _sid(p) in _servers:
                continue
            m = _marker_of(p)
            if m == probe_id:
                victims.append(p)
            elif m is None and not others:
                t0 = unreadable_since.setdefault(p, time.monotonic())
                if time.monotonic() - t0 >= UNREADABLE_GRACE_S:
                    victims.append(p)
                else:
                    waiting = True
        if victims:
            _kill(victims)
            killed += len(victims)
        elif not waiting:
            break
        time.sleep(0.02)
    return killed


def kill_descendants() -> int:
    """Kill every descendant of this process (before a verdict file or a report is written);
    returns the count."""
    if not os.path.isdir("/proc"):
        return 0
    return _sweep(lambda p: True)
