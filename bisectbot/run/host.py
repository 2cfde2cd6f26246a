"""Host failures: what goes wrong on this host the same way for every candidate (issue 35, item 2).

The Docker daemon that cannot be reached, a full disk, a read-only or forbidden state
directory, a device node the runner profile requires and the host lacks: none of them says
anything about the candidate, so none of them may become a verdict (a skip cached in the
ledger, a "boundary-failed" filed upstream). :func:`host_cause` is the one place that tells
such a failure from a candidate's own (a message, an exception, the end of a build or server
log); :func:`check_host` raises :class:`bisectbot.errors.HostFailure` (exit 1, nothing
recorded) when it finds one. The probe (:func:`bisectbot.session.probing.executor.run_probe`)
asks it about every failed preparation and server start; ``bisectbot run`` runs the same
preflight as ``bisectbot runner check`` before the first probe.
"""

from __future__ import annotations

import errno
import re
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

#: Bytes at the end of each log searched for a cause.
LOG_TAIL_BYTES = 16 * 1024
#: The bot's own writes (worktrees, logs, the ledger) that fail for the host's reasons. A read-only file
#: system counts only here: inside the sandbox a candidate meets read-only paths by design.
_HOST_ERRNOS = {errno.ENOSPC: HOST_CAUSES[1][1], errno.EDQUOT: HOST_CAUSES[1][1],
                errno.EROFS: "a directory the bot writes is on a read-only file system"}


def _tail(path: str | Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def host_cause(text: str, log_paths: Sequence[str | Path] = ()) -> str | None:
    """``"<what it means>: <the line that says so>"`` when ``text`` or the end of one of ``log_paths``
    (build and server logs) names a host failure (:data:`HOST_CAUSES`), else None."""
    for blob in [text, *(_tail(p) for p in log_paths)]:
        for line in reversed(blob.splitlines()):
            for pattern, what in HOST_CAUSES:
                if pattern.search(line):
                    return f"{what}: {' '.join(line.split())[:240]}"
    return None


def exception_cause(e: BaseException) -> str | None:
    """:func:`host_cause` of an exception: an ``OSError`` by its errno (full disk, read-only file
    system), else by its text (a git command that found the disk full)."""
    if isinstance(e, HostFailure):
        return str(e)
    if isinstance(e, OSError) and e.errno in _HOST_ERRNOS:
        return f"{_HOST_ERRNOS[e.errno]}: {e}"
    return host_cause(f"{type(e).__name__}: {e}")


def check_host(where: str, text: str, log_paths: Sequence[str | Path] = ()) -> None:
    """Raise :class:`HostFailure` when ``text`` (or the end of ``log_paths``) names a host failure;
    ``where`` says what was being done (``preparing nightly_main_20260408``)."""
    cause = host_cause(text, log_paths)
    if cause is not None:
        raise HostFailure(host_message(where, cause))


def host_message(where: str, cause: str) -> str:
    """The one line a host failure ends a run with: what failed, why it is the host's, what to do."""
    return (f"{where}: {cause}. This is the host, the same for every candidate: not a verdict, nothing was "
            "recorded or filed. Fix the host (`bisectbot runner check` shows what it needs) and run the same "
            "command again")


__all__ = ["HOST_CAUSES", "check_host", "exception_cause", "host_cause", "host_message"]
