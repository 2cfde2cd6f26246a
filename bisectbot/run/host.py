"""Host failures: what goes wrong on this host the same way for every candidate (issue 35, item 2).

The Docker daemon that cannot be reached, a full disk, a read-only or forbidden state
directory, a device node the runner profile requires and the host lacks: none of them says
anything about the candidate, so none of them may become a verdict (a skip cached in the
ledger, a "boundary-failed" filed upstream). :func:`host_cause` is the one place that tells
such a failure from a candidate's own (a message, an exception, the end of a build or server
log); :func:`check_host` raises :class:`bisectbot.errors.HostFailure` (exit 1, nothing
recorded) when it finds one.

A log's words are only a hint: build and server logs are the candidate's output, and a candidate
that prints "No space left on device" must not stop every night (hostile pass). A cause is a host
failure only when the bot observes it itself (:func:`observe`): a write of :data:`PROBE_WRITE_BYTES`
that fails for lack of space in one of the directories the probe writes, a Docker daemon that does
not answer its ping, a device path that does not exist. An exception of the bot's own system calls
(``OSError`` with ``ENOSPC``/``EDQUOT``/``EROFS``) is such an observation; any other exception while
a candidate is prepared is checked by measuring the disks, so a full disk that git reports as
"unable to write file" is the host too, never exit 70. The probe (:func:`bisectbot.session.probing.executor.run_probe`)
asks it about every failed preparation and server start; ``bisectbot run`` runs the same
preflight as ``bisectbot runner check`` before the first probe.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import HostFailure

#: ``(pattern, what it means)``: causes on the host's side, the same for every candidate.
HOST_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), what) for p, what in (
    (r"cannot reach the docker daemon|cannot connect to the docker daemon|is the docker daemon running|"
     r"error while fetching server api version|permission denied while trying to connect to the docker daemon",
     "the Docker daemon cannot be reached (is dockerd running, is DOCKER_HOST right?)"),
    (r"no space left on device|\[errno 28\]|\bENOSPC\b|database or disk is full|disk quota exceeded|\bEDQUOT\b",
     "the disk is full (free space, or point --state / the work directory elsewhere)"),
    (r"error gathering device information|(?:/dev/(?:kfd|dri)\S*|device)\b[^\n]{0,40}no such file or directory",
     "a device node the runner profile requires is missing on this host"),
))

#: Bytes written to observe a full disk: the size of the preflight's state-directory write check
#: (``bisectbot runner check``) and less than any build, log or worktree write a probe makes. A
#: filesystem that cannot take it cannot take the next probe either.
PROBE_WRITE_BYTES = 1024 * 1024

#: Bytes at the end of each log searched for a cause.
LOG_TAIL_BYTES = 16 * 1024
#: The bot's own writes (worktrees, logs, the ledger) that fail for the host's reasons. A read-only file
#: system counts only here: inside the sandbox a candidate meets read-only paths by design.
_HOST_ERRNOS = {errno.ENOSPC: HOST_CAUSES[1][1], errno.EDQUOT: HOST_CAUSES[1][1],
                errno.EROFS: "a directory the bot writes is on a read-only file system"}


def is_host_errno(e: OSError) -> bool:
    """True when ``e`` is the host's failure, not the candidate's (the disk full, a quota, a read-only
    file system under the bot's own writes): such an error propagates, it never becomes a verdict."""
    return e.errno in _HOST_ERRNOS


def _tail(path: str | Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _existing_dir(p: str | Path) -> Path | None:
    q = Path(p)
    while not q.is_dir():
        if q.parent == q:
            return None
        q = q.parent
    return q


def _mounts_below(dirs: Sequence[Path]) -> list[Path]:
    """The mount points at or below ``dirs`` (``/proc/self/mounts``): each is a filesystem of its own."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    out = []
    for ln in lines:
        parts = ln.split()
        if len(parts) < 2:
            continue
        mp = Path(parts[1].replace("\\040", " "))
        if any(mp == d or d in mp.parents for d in dirs):
            out.append(mp)
    return out


def disk_full(dirs: Sequence[str | Path]) -> str | None:
    """``"<dir>: <strerror>"`` for the first of ``dirs`` (or its nearest existing ancestor), or of the
    filesystems mounted below them, where a write of :data:`PROBE_WRITE_BYTES` fails for lack of
    space or quota, else None."""
    seen: set[Path] = set()
    roots = [q for q in (_existing_dir(d) for d in dirs) if q is not None]
    for d in [*roots, *_mounts_below([r.resolve() for r in roots])]:
        q = _existing_dir(d)
        if q is None or q in seen:
            continue
        seen.add(q)
        try:
            with tempfile.TemporaryFile(dir=q) as fh:
                fh.write(b"\0" * PROBE_WRITE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                return f"{q}: {e.strerror}"
    return None


def docker_unreachable() -> str | None:
    """Why the Docker daemon (``DOCKER_HOST`` or the default socket) does not answer a ping, else None."""
    try:
        import docker  # only where a log named the daemon

        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # docker.errors.DockerException, requests' errors: the daemon is not there
        return " ".join(str(e).split())[:200] or type(e).__name__
    return None


_DEV_PATH = re.compile(r"(/dev/\S+?)[:\s'\"]")


def observe(what: str, line: str, dirs: Sequence[str | Path], devices: Sequence[str] = ()) -> bool:
    """True when the bot itself sees the host cause ``what`` (one of :data:`HOST_CAUSES`) that
    ``line`` names: the disk by a write in ``dirs``, the daemon by a ping, a device by its path --
    one of the runner profile's ``devices`` (``HOST[:CONTAINER[:PERMS]]``) that does not exist."""
    if what == HOST_CAUSES[1][1]:
        return disk_full(dirs) is not None
    if what == HOST_CAUSES[0][1]:
        return docker_unreachable() is not None
    m = _DEV_PATH.search(line + " ")
    required = {d.split(":", 1)[0] for d in devices}
    return m is not None and m.group(1) in required and not os.path.exists(m.group(1))


def host_cause(text: str, log_paths: Sequence[str | Path] = (), dirs: Sequence[str | Path] = (),
               devices: Sequence[str] = ()) -> str | None:
    """``"<what it means>: <the line that says so>"`` when ``text`` or the end of one of ``log_paths``
    (build and server logs) names a host failure (:data:`HOST_CAUSES`) **and** the bot observes it
    (:func:`observe`, measuring ``dirs`` and the logs' directories), else None."""
    where = [*dirs, *(Path(p).parent for p in log_paths)]
    for blob in [text, *(_tail(p) for p in log_paths)]:
        for line in reversed(blob.splitlines()):
            for pattern, what in HOST_CAUSES:
                if pattern.search(line) and observe(what, line, where, devices):
                    return f"{what}: {' '.join(line.split())[:240]}"
    return None


def exception_cause(e: BaseException, dirs: Sequence[str | Path] = ()) -> str | None:
    """:func:`host_cause` of an exception of the bot's own: an ``OSError`` by its errno (full disk,
    read-only file system), else by its text when observed, else a full disk measured in ``dirs``
    (a git command that could not write a worktree: "unable to write file")."""
    if isinstance(e, HostFailure):
        return str(e)
    if isinstance(e, OSError) and e.errno in _HOST_ERRNOS:
        return f"{_HOST_ERRNOS[e.errno]}: {e}"
    cause = host_cause(f"{type(e).__name__}: {e}", dirs=dirs)
    if cause is None:
        full = disk_full(dirs)
        if full is not None:
            cause = f"{HOST_CAUSES[1][1]}: {full} ({type(e).__name__}: {' '.join(str(e).split())[:160]})"
    return cause


def check_host(where: str, text: str, log_paths: Sequence[str | Path] = (),
               dirs: Sequence[str | Path] = (), devices: Sequence[str] = ()) -> None:
    """Raise :class:`HostFailure` when ``text`` (or the end of ``log_paths``) names a host failure the
    bot observes (measuring ``dirs``); ``where`` says what was being done (``preparing nightly_main_20260408``)."""
    cause = host_cause(text, log_paths, dirs, devices)
    if cause is not None:
        raise HostFailure(host_message(where, cause))


def host_message(where: str, cause: str) -> str:
    """The one line a host failure ends a run with: what failed, why it is the host's, what to do."""
    return (f"{where}: {cause}. This is the host, the same for every candidate: not a verdict, nothing was "
            "recorded or filed. Fix the host (`bisectbot runner check` shows what it needs) and run the same "
            "command again")


__all__ = ["HOST_CAUSES", "PROBE_WRITE_BYTES", "check_host", "disk_full", "docker_unreachable", "exception_cause",
           "host_cause", "host_message", "observe"]
