"""File locks: one per GPU slot (two probes never share GPUs) and general exclusive locks.

Locks are ``fcntl.flock`` on files under a lock directory (default ``locks/`` under the state
directory: ``$BISECTBOT_STATE``, ``$XDG_STATE_HOME/bisectbot`` or ``~/.local/state/bisectbot``),
so they are released by the kernel when the holding process dies (kill -9 included) and work
across processes of one host. Never in a shared ``/tmp`` (issue 13): the directory is created
0700, and refused when it is a symlink or writable by others; lock files are opened with
``O_NOFOLLOW`` so a planted symlink is an error, never followed. A slot is a string such as ``"0-3"`` (GPUs 0,1,2,3) or
``"4,5"``; :func:`slot_gpus` expands it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .confine import open_nofollow
from .errors import BisectbotError


def default_lock_dir() -> Path:
    """``locks/`` under the state directory (see :func:`bisectbot.ledger.default_state_dir`)."""
    from .ledger import default_state_dir

    return default_state_dir() / "locks"


def _lock_dir(d: Path) -> Path:
    """Create ``d`` (0700) if needed; refuse a symlink or a directory others may write to."""
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise BisectbotError(f"lock directory {d} is a symlink or not a directory: refusing to use it")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise BisectbotError(f"lock directory {d} is writable by other users: refusing to use it (chmod 700)")
    return d


def _open_lock(path: Path) -> Any:
    try:
        return open_nofollow(path, "a+")
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BisectbotError(f"lock file {path} is a symlink: refusing to follow it") from None
        raise


def slot_gpus(slot: str) -> list[int]:
    """GPU indices of a slot: ``"0-3"`` -> ``[0, 1, 2, 3]``, ``"4,6"`` -> ``[4, 6]``, ``""`` -> ``[]``.

    Raises :class:`ValueError` on anything else.
    """
    out: list[int] = []
    for part in (p.strip() for p in slot.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad GPU slot {slot!r}: expected e.g. '0-3' or '4,5'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"bad GPU slot {slot!r}: {hi} < {lo}")
        out.extend(range(lo, hi + 1))
    return out


class LockTimeout(BisectbotError):
    """No lock became free within the timeout."""


def _lock_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".lock"


@contextmanager
def file_lock(name: str, lock_dir: Path | None = None, timeout_s: float | None = None,
              poll_s: float = 0.2) -> Iterator[Path]:
    """Hold an exclusive lock called ``name``; wait at most ``timeout_s`` seconds (None: forever).

    Raises :class:`LockTimeout`.
    """
    d = _lock_dir(lock_dir or default_lock_dir())
    path = d / _lock_name(name)
    fh = _open_lock(path)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {path} still held after {timeout_s:.0f} s") from None
                time.sleep(poll_s)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield path
    finally:
        try:
            fcntl.flock(fh, fcntl.LOCK_UN)
        finally:
            fh.close()


@contextmanager
def gpu_slot(slots: Sequence[str], runner: str = "default", lock_dir: Path | None = None,
             timeout_s: float | None = None, poll_s: float = 0.5) -> Iterator[str | None]:
    """Acquire the first free slot of ``slots`` (e.g. ``["0-3", "4-7"]``) and yield it.

    An empty ``slots`` yields None at once (CPU runners). Lock files are named
    ``gpu-<index>.lock`` (one per GPU of the host, all GPUs of a slot held), so two
    profiles whose slots overlap on a GPU still exclude each other. Raises :class:`LockTimeout` after ``timeout_s`` seconds.
    """
    if not slots:
        yield None
        return
    d = _lock_dir(lock_dir or default_lock_dir())
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        for slot in slots:
            handles = []
            ok = True
            for gpu in slot_gpus(slot):
                fh = _open_lock(d / f"gpu-{gpu}.lock")
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    handles.append(fh)
                except BlockingIOError:
                    fh.close()
                    ok = False
                    break
            if ok:
                try:
                    yield slot
                finally:
                    for fh in handles:
                        fcntl.flock(fh, fcntl.LOCK_UN)
                        fh.close()
                return
            for fh in handles:
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
        if deadline is not None and time.monotonic() >= deadline:
            raise LockTimeout(f"no free GPU slot of {list(slots)} ({runner}) after {timeout_s:.0f} s")
        time.sleep(poll_s)
