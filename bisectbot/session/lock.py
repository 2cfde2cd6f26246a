"""One writer per session: a lock that names its holder, and per-process probe directories.

The writers of a recipe's state (``bisectbot run``, ``round plan``, ``round import``)
hold :func:`writer_lock` on ``STATE/locks/writer-<recipe>.lock`` while they run: a
``fcntl.flock`` (released by the kernel when the holder dies, ``kill -9`` included)
whose file names the holder (pid, host, command, start time). A second writer waits
up to ``wait_s`` seconds, then exits with :class:`WriterBusy` naming the holder.

Only a writer cleans up what killed runs left behind (servers, worktrees), and only
while it holds the lock, so no process signals a child of a live run it did not start.
``round probe`` processes are not writers: each works in its own :func:`probe_dir`
(held by its own lock); a writer removes such a directory only when that lock is free
(:func:`cleanup_free_probe_dirs`).

Lock files live under the state directory and are opened with ``O_NOFOLLOW``: a
symlink planted there is refused, never followed. The ledger (SQLite, WAL) must be on
a local disk: ``flock`` and WAL both misbehave on network filesystems.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import jsonio as _jsonio
from ..errors import BisectbotError


class WriterBusy(BisectbotError):
    """Another live process holds the writer lock of this recipe's state (exit code 1)."""


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:100] or "_"


def _open_nofollow(path: Path) -> int:
    """Open (create) a lock file for read/write without following a symlink. OSError names the path."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BisectbotError(f"lock file {path} is a symbolic link: refused (remove it)") from None
        raise


def read_holder(path: Path) -> dict[str, Any]:
    """What the lock file at ``path`` says about its holder (``{}`` when empty or unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        d = _jsonio.loads(raw.decode("utf-8", "replace") or "{}")
        return d if isinstance(d, dict) else {}
    except ValueError:
        return {}


def describe_holder(h: dict[str, Any]) -> str:
    """``pid 123 on host, 'bisectbot run r.yaml', since 2026-11-30T19:00:00Z``."""
    if not h:
        return "an unknown process"
    cmd = str(h.get("command", ""))[:120]
    return (f"pid {h.get('pid', '?')} on {h.get('host', '?')}" + (f", {cmd!r}" if cmd else "")
            + (f", since {h['since']}" if h.get("since") else ""))


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def lock_is_free(path: Path) -> bool:
    """True when no live process holds the lock at ``path`` (or it does not exist)."""
    if not path.exists() and not path.is_symlink():
        return True
    fd = _open_nofollow(path)
    try:
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        return False
    finally:
        os.close(fd)


# filesystems where flock and SQLite's WAL (shared memory) are not reliable (SQLite docs, "WAL mode":
# "WAL does not work over a network filesystem"); fuse.* covers sshfs, s3fs, gcsfuse
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre",
                        "gpfs", "beegfs", "davfs", "ncpfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse",
                        "fuse.glusterfs", "fuse.rclone"})


def filesystem_of(path: Path, mounts: str | None = None) -> str:
    """The filesystem type of the mount holding ``path`` (longest mount point prefix in
    ``/proc/mounts``, or the ``mounts`` text given); ``""`` when unknown."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
    target = str(Path(path).resolve())
    best, fstype = -1, ""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) > best:
            best, fstype = len(mnt), parts[2]
    return fstype


def check_local_disk(state_dir: Path, mounts: str | None = None) -> None:
    """Raise BisectbotError when ``state_dir`` is on a network filesystem (:data:`NETWORK_FS`):
    the ledger (SQLite, WAL) and the writer lock (flock) need a local disk."""
    fs = filesystem_of(state_dir, mounts)
    if fs in NETWORK_FS:
        raise BisectbotError(f"state directory {state_dir} is on a network filesystem ({fs}): the ledger "
                             "(SQLite in WAL mode) and the writer lock need a local disk; use --state DIR "
                             "on a local disk (share verdict files with 'bisectbot round', not the ledger)")


def writer_lock_path(state_dir: Path, recipe_name: str) -> Path:
    """``STATE/locks/writer-<recipe name>.lock`` (the name made file-safe)."""
    return Path(state_dir) / "locks" / f"writer-{_safe(recipe_name)}.lock"


@contextlib.contextmanager
def writer_lock(state_dir: Path, recipe_name: str, *, wait_s: float = 0.0, session: str = "",
                echo: Callable[[str], None] | None = None, poll_s: float = 0.2) -> Iterator[Path]:
    """Hold the writer lock of ``recipe_name``'s state under ``state_dir`` for the ``with`` body.

    Waits up to ``wait_s`` seconds (0: not at all; negative: forever) for a holder to
    finish, telling ``echo`` once whom it waits for. Raises :class:`WriterBusy` naming the
    holder when the lock stays taken, BisectbotError when the lock file is a symlink or the
    state directory is on a network filesystem (:func:`check_local_disk`).
    """
    check_local_disk(state_dir)
    path = writer_lock_path(state_dir, recipe_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_nofollow(path)
    try:
        deadline = None if wait_s < 0 else time.monotonic() + wait_s
        told = False
        while not _try_lock(fd):
            holder = describe_holder(read_holder(path))
            if deadline is not None and time.monotonic() >= deadline:
                raise WriterBusy(
                    f"another bisectbot writer holds recipe {recipe_name!r} in {state_dir}: {holder}; "
                    f"it must finish first (wait with --wait-lock SECONDS, or use another --state)")
            if echo and not told:
                echo(f"waiting for the writer lock of recipe {recipe_name!r}: held by {holder}")
                told = True
            time.sleep(poll_s)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv[:6]),
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "session": session}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def probe_dir(root: Path) -> Iterator[Path]:
    """A fresh directory ``root/<host>-<pid>-<time>`` for one ``round probe`` process, held by its
    own lock (``owner.lock`` inside) while the ``with`` body runs and removed afterwards."""
    d = Path(root) / f"{_safe(socket.gethostname())}-{os.getpid()}-{time.time_ns()}"
    d.mkdir(parents=True)
    fd = _open_nofollow(d / "owner.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "command": " ".join(sys.argv[:6])}).encode(), 0)
        yield d
    finally:
        os.close(fd)
        shutil.rmtree(d, ignore_errors=True)


def cleanup_free_probe_dirs(root: Path, cleanup: Callable[[Path], None]) -> list[Path]:
    """Call ``cleanup(dir)`` and remove each probe directory under ``root`` whose owner lock is
    free (its ``round probe`` process died); directories of live probes are left alone.
    Returns the directories removed. Call it only while holding the writer lock."""
    removed: list[Path] = []
    if not Path(root).is_dir():
        return removed
    for d in sorted(Path(root).iterdir()):
        if not d.is_dir() or d.is_symlink():
            continue
        lk = d / "owner.lock"
        if not lk.exists():  # a probe between mkdir and taking its lock: leave young ones alone
            with contextlib.suppress(OSError):
                if time.time() - d.stat().st_mtime < 300:
                    continue
        try:
            free = lock_is_free(lk)
        except (OSError, BisectbotError):
            continue
        if not free:
            continue
        with contextlib.suppress(Exception):
            cleanup(d)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed
