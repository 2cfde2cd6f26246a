"""Network failures, told apart: "unreachable" fails at once, transient errors are retried visibly.

A failed name resolution (``socket.gaierror``, urllib3's ``NameResolutionError``) and a
refused connection (``ECONNREFUSED``) will not heal within a retry budget of seconds, so the
clients of registries, the package index and GitHub raise
:class:`bisectbot.errors.UpstreamUnreachable` (exit code 5) on the first one instead of
retrying it five times in silence. Timeouts, resets and 429/5xx answers are retried, and each
retry is announced on stderr as ``<what>: <reason>; retrying 2/5 in 4 s`` (issue 14).
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

from .errors import UpstreamUnreachable

__all__ = ["announce_retry", "is_unreachable", "reason", "unreachable"]

log = logging.getLogger("bisectbot.net")

#: Texts of a failed name resolution / refused connection, matched case-insensitively: Python's
#: (glibc ``getaddrinfo``, urllib3) and Go's (the Docker daemon's pull errors relay its net package:
#: ``dial tcp: lookup HOST on DNS:53: no such host``, ``dial tcp ...: connect: connection refused``).
_DNS_TEXT = ("Name or service not known", "Temporary failure in name resolution", "nodename nor servname",
             "No address associated with hostname", "Failed to resolve", "getaddrinfo failed",
             ": no such host", "server misbehaving")
_REFUSED_TEXT = ("Connection refused", "[Errno 111]", "[WinError 10061]")


def _chain(exc: BaseException | None, depth: int = 0) -> Iterator[BaseException]:
    """``exc``, its causes/contexts, the exceptions among its ``args`` and urllib3's ``reason``."""
    if exc is None or depth > 8:
        return
    yield exc
    seen: list[BaseException] = []
    for nxt in (exc.__cause__, exc.__context__, getattr(exc, "reason", None),
                *(a for a in getattr(exc, "args", ()) if isinstance(a, BaseException))):
        if isinstance(nxt, BaseException) and nxt is not exc and all(nxt is not s for s in seen):
            seen.append(nxt)
            yield from _chain(nxt, depth + 1)


def _kind(exc: BaseException) -> str | None:
    for e in _chain(exc):
        if isinstance(e, socket.gaierror) or type(e).__name__ == "NameResolutionError":
            return "dns"
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "refused"
    text = str(exc).lower()
    if any(t.lower() in text for t in _DNS_TEXT):
        return "dns"
    if any(t.lower() in text for t in _REFUSED_TEXT):
        return "refused"
    return None


def is_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (a ``requests``/``urllib3``/``OSError`` failure) is a name-resolution failure
    or a refused connection: retrying within seconds will not help."""
    return _kind(exc) is not None


def reason(exc: BaseException) -> str:
    """A short, token-free reason: ``name resolution failed``, ``connection refused``, else the type."""
    k = _kind(exc)
    if k == "dns":
        return "name resolution failed"
    if k == "refused":
        return "connection refused"
    return type(exc).__name__


def unreachable(what: str, exc: BaseException, hint: str = "") -> UpstreamUnreachable:
    """The :class:`UpstreamUnreachable` to raise for ``exc`` while doing ``what`` (e.g. ``Docker Hub
    tags of rocm/vllm-dev``); ``hint`` is appended (what still works offline)."""
    msg = f"{what}: upstream unreachable ({reason(exc)})"
    return UpstreamUnreachable(msg + (f"; {hint}" if hint else ""))


def announce_retry(what: str, max_attempts: int) -> Callable[[Any], None]:
    """A tenacity ``before_sleep`` callback that logs ``<what>: <reason>; retrying N/M in S s`` at
    WARNING (shown by default, on stderr): N is the attempt about to start."""

    def before_sleep(state: Any) -> None:
        exc = state.outcome.exception() if getattr(state, "outcome", None) else None
        wait = getattr(getattr(state, "next_action", None), "sleep", None) or 0.0
        why = str(exc).split("\n")[0][:160] if exc is not None else "failed"
        log.warning("%s: %s; retrying %d/%d in %s s", what, why, state.attempt_number + 1, max_attempts,
                    f"{wait:.0f}" if wait >= 1 else f"{wait:.1f}")

    return before_sleep
