"""Failed server starts and builds that may pass on their own (issue 23, input 3; builds: issue 35).

A server that exits before it is healthy because the model hub rate-limited its download
(``429 Too Many Requests``, pytorch#170150), a gateway answered 502/503, a connection was
reset or a download timed out (llm-d-router#1527) says nothing about the candidate: the
next start usually works. :func:`transient_cause` reads the end of the start's log for
such a cause; the probe retries the start with backoff (:data:`START_RETRIES`,
:func:`backoff_s`) and a failure that stays transient is never cached as the candidate's
verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

#: Causes in a failed start's log that may pass on their own: HTTP 429 / 5xx from a hub or
#: gateway, a reset or refused connection, a timed-out download, a failed name lookup.
TRANSIENT_START = re.compile(
    r"\b429\b|too many requests|rate.?limit|\bHTTP(?:/\d(?:\.\d)?)?\s*5\d\d\b|\b5\d\d\s+(?:server error|internal "
    r"server error|bad gateway|service unavailable|gateway time-?out)|bad gateway|service unavailable|"
    r"connection (?:reset|aborted)|ECONNRESET|connection refused by (?:the )?(?:hub|remote)|"
    r"read timed out|timed out (?:while )?(?:downloading|connecting|reading)|ReadTimeout|ConnectTimeout|"
    r"temporary failure in name resolution",
    re.IGNORECASE)
#: More starts after a transiently failed one, within one probe.
START_RETRIES = 2
#: Seconds before the first retried start; doubled each time (a hub's rate limit lifts in seconds to minutes).
START_BACKOFF_S = 2.0
#: Bytes of the start log's end that are searched for a cause.
LOG_TAIL_BYTES = 16 * 1024


def backoff_s(retry: int) -> float:
    """Seconds to wait before retried start number ``retry`` (1-based): 2, 4, 8..."""
    return START_BACKOFF_S * 2 ** (retry - 1)


def is_start_failure(message: str) -> bool:
    """True when a :class:`bisectbot.errors.ServerError` message is a server that never became
    healthy (exited before, or not healthy in time), not a failure while serving."""
    return any(s in message for s in ("before it was healthy", "before /health answered", "not healthy after",
                                      "before its port was published", "cannot start server"))


def transient_cause(message: str, log_paths: Sequence[str], kinds: Sequence[str] = ("server-", "container-")
                    ) -> str | None:
    """The transient cause (one line of the log, or of ``message``) of a failed start, or None.
    ``log_paths`` are the probe's logs; the newest log whose name has one of ``kinds`` (server logs;
    ``("build-",)`` for a failed build, issue 35) is read, its last :data:`LOG_TAIL_BYTES`."""
    texts = [message]
    for p in reversed(list(log_paths)):
        if any(k in Path(p).name for k in kinds):
            try:
                with open(p, "rb") as fh:
                    fh.seek(0, 2)
                    size = fh.tell()
                    fh.seek(max(0, size - LOG_TAIL_BYTES))
                    texts.append(fh.read().decode("utf-8", "replace"))
            except OSError:
                pass
            break
    for text in texts:
        for line in reversed(text.splitlines()):
            if TRANSIENT_START.search(line):
                return " ".join(line.split())[:200]
    return None


__all__ = ["START_RETRIES", "TRANSIENT_START", "backoff_s", "is_start_failure", "transient_cause"]
