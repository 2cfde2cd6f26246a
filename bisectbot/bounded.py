"""Bounded I/O with untrusted peers: HTTP replies of servers under test and output of candidate processes.

The server and the commands being bisected are code under test: they may hang, dribble, or
flood. Everything the bot reads from them is bounded in **time** and **memory** (issue 13):

* :func:`request` -- one HTTP request whose ``total_s`` bounds the *whole* exchange (connect,
  headers and body), not the gap between two bytes: a watchdog shuts the socket down at the
  deadline, so a server that sends one byte every 1.5 s cannot hold a 3 s timeout for minutes.
  The body is streamed and reading stops past ``max_bytes`` (default :data:`MAX_BODY_BYTES`,
  8 MiB; a chat completion of 1000 tokens is a few KB) with :class:`BodyTooLarge`.
* :func:`run_process` -- one process whose stdout/stderr are drained by reader threads into a
  log file (up to ``log_limit`` bytes) while only the last ``tail_bytes`` of each are kept in
  memory, so a reproducer printing 500 MB costs a few KB of RAM.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .secrets import redact

MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest HTTP reply body read from a server under test (bytes, after content decoding)."""

TAIL_BYTES = 4096
"""Bytes of each output stream kept in memory by :func:`run_process` (the end is where the error is)."""

LOG_LIMIT_BYTES = 64 * 1024 * 1024
"""Bytes of each output stream written to the log file; the rest is counted, not stored."""

_CHUNK = 64 * 1024


class BodyTooLarge(requests.RequestException):
    """The reply body passed ``max_bytes``; reading stopped there (never retried)."""


class TotalTimeout(requests.exceptions.ReadTimeout):
    """The whole request took longer than its ``total_s`` (a :class:`requests.Timeout`)."""


# --------------------------------------------------------------------------- HTTP

_active = threading.local()


class _Watch:
    """The watchdog of one :func:`request`: at its deadline it shuts the connections of the request
    down. The deadline is the whole request's (``total_s`` from the start) or, with ``attempt_s``,
    the current attempt's (``attempt_s`` from the attempt's start, never past the whole request's):
    each attempt urllib3 makes (a retry after a 5xx, a reset) re-arms it."""

    def __init__(self, total_s: float, attempt_s: float | None) -> None:
        self.end = time.monotonic() + total_s
        self.attempt_s = attempt_s
        self.conns: list[Any] = []
        self.fired = threading.Event()
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.arm()

    def arm(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self.fired.clear()
            now = time.monotonic()
            due = self.end if self.attempt_s is None else min(self.end, now + self.attempt_s)
            self._timer = threading.Timer(max(0.0, due - now), self._expire)
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        self.fired.set()
        _shutdown(self.conns)

    def expired(self) -> bool:
        """The watchdog fired, or the whole request's deadline passed (checked between chunks)."""
        return self.fired.is_set() or time.monotonic() > self.end

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


class _Tracked:
    """Mixin of urllib3 connections: remember the connection used by the current request, and
    start the request's next attempt on the watchdog (urllib3 calls ``request`` once per attempt)."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        watch = getattr(_active, "watch", None)
        if watch is not None:
            watch.conns.append(self)
            if watch.attempt_s is not None and len(watch.conns) > 1:
                watch.arm()
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Tracked, HTTPConnection):
    pass


class _HTTPSConnection(_Tracked, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class BoundedAdapter(HTTPAdapter):
    """A requests adapter whose connections :func:`request`'s watchdog can shut down."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


class LimitedAdapter(BoundedAdapter):
    """A requests adapter that reads every reply whole within ``total_s`` seconds (status line,
    headers and body: the watchdog of :func:`request`, re-armed per urllib3 attempt with
    ``attempt_s``) and ``max_bytes`` bytes after content decoding (a gzip bomb stops at the cap),
    whoever calls the session: a library's own ``session.get`` (``pypi_simple``) is bounded as the
    bot's calls are. A caller that streams (``stream=True``) reads the body itself, as
    :func:`request` does. Raises :class:`TotalTimeout` and :class:`BodyTooLarge`."""

    def __init__(self, *, total_s: float, max_bytes: int = MAX_BODY_BYTES, attempt_s: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.total_s, self.max_bytes, self.attempt_s = total_s, max_bytes, attempt_s

    def send(self, request: Any, stream: bool = False, timeout: Any = None, **kwargs: Any) -> requests.Response:
        if stream or getattr(_active, "watch", None) is not None:  # the caller (or request()) bounds it
            return super().send(request, stream=stream, timeout=timeout, **kwargs)
        return _watched(lambda: super(LimitedAdapter, self).send(request, stream=True, timeout=timeout, **kwargs),
                        _Watch(self.total_s, self.attempt_s), f"{self.total_s:g} s", self.max_bytes)

def limited_session(total_s: float, max_bytes: int = MAX_BODY_BYTES, session: requests.Session | None = None
                    ) -> requests.Session:
    """``session`` (a new one by default) with both schemes mounted on a :class:`LimitedAdapter`."""
    s = session or requests.Session()
    adapter = LimitedAdapter(total_s=total_s, max_bytes=max_bytes)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s


def session() -> requests.Session:
    """A :class:`requests.Session` for :func:`request` (both schemes mounted on :class:`BoundedAdapter`)."""
    s = requests.Session()
    adapter = BoundedAdapter()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s


def _shutdown(conns: list[Any]) -> None:
    for c in conns:
        sock = getattr(c, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def request(sess: requests.Session, method: str, url: str, *, total_s: float, connect_s: float = 10.0,
            max_bytes: int = MAX_BODY_BYTES, attempt_s: float | None = None, **kwargs: Any) -> requests.Response:
    """Send one request and read the whole reply within ``total_s`` seconds and ``max_bytes`` bytes.

    ``sess`` should come from :func:`session` (another session still gets the body cap and the
    between-chunks deadline check, but a stalled header phase is then bounded only per read).
    ``attempt_s`` (seconds), where the session's adapter retries (``max_retries``), bounds each
    attempt as ``total_s`` bounds the whole: a retry's wait does not count against the attempt
    after it. Returns the response with its body loaded (``.content``/``.json()`` work). Raises
    :class:`TotalTimeout` (a ``requests.Timeout``) past a deadline, :class:`BodyTooLarge` past the
    cap, other ``requests`` exceptions as usual.
    """
    limit = f"{attempt_s:g} s" if attempt_s is not None and attempt_s < total_s else f"{total_s:g} s"
    read_s = min(total_s, attempt_s) if attempt_s is not None else total_s
    return _watched(lambda: sess.request(method, url, timeout=(min(connect_s, read_s), read_s), stream=True, **kwargs),
                    _Watch(total_s, attempt_s), limit, max_bytes, close=sess)


def _watched(send: Any, watch: _Watch, limit: str, max_bytes: int, close: requests.Session | None = None
             ) -> requests.Response:
    """``send()`` (a streamed request) under ``watch``, its body read whole up to ``max_bytes``
    (after content decoding) before the watchdog fires; the response with its body loaded.
    Raises :class:`TotalTimeout` naming ``limit``, :class:`BodyTooLarge`; ``close`` (a session)
    is closed when the watchdog fired, dropping the shut-down connection from its pool."""
    _active.watch = watch
    r: requests.Response | None = None
    try:
        try:
            r = send()
            length = r.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise BodyTooLarge(f"reply of {int(length)} bytes is larger than the {max_bytes}-byte limit")
            buf = bytearray()
            for chunk in r.iter_content(_CHUNK):
                buf += chunk
                if len(buf) > max_bytes:
                    raise BodyTooLarge(f"reply larger than the {max_bytes}-byte limit: stopped reading")
                if watch.expired():
                    raise TotalTimeout(f"no complete reply within {limit}")
        except requests.RequestException:
            if r is not None:
                r.close()
            if watch.fired.is_set():
                raise TotalTimeout(f"no complete reply within {limit}") from None
            raise
        if watch.fired.is_set():  # the watchdog cut the body short: what we have is not the reply
            r.close()
            raise TotalTimeout(f"no complete reply within {limit}")
    finally:
        watch.cancel()
        _active.watch = None
        if watch.fired.is_set() and close is not None:
            close.close()
    r._content = bytes(buf)
    r._content_consumed = True
    return r


# --------------------------------------------------------------------------- processes


@dataclass
class ProcessRun:
    """What :func:`run_process` saw. ``returncode`` is None when it timed out (process group killed);
    ``*_bytes`` count everything the process wrote, the tails hold the last bytes (decoded, lossy)."""

    returncode: int | None
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    timed_out: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0


def redact_bytes(data: bytes) -> bytes:
    """:func:`bisectbot.secrets.redact` over bytes (undecodable bytes kept as they are)."""
    return redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


class _Drain(threading.Thread):
    """Copy one pipe to a log file (up to a limit, redacted line by line) keeping a bounded tail in memory."""

    def __init__(self, pipe: IO[bytes], log: IO[bytes] | None, lock: threading.Lock, tail_bytes: int,
                 log_limit: int, name: str):
        super().__init__(daemon=True)
        self.pipe, self.log, self.lock, self.log_limit, self.name_ = pipe, log, lock, log_limit, name
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.tail_bytes = tail_bytes
        self.total = 0
        self.logged = 0
        self.pending = b""  # an unfinished line, redacted once complete (a secret is never split)
        #: the ``OSError`` a write to the log met (the disk full): logging stopped, the pipe is still
        #: drained (the process must not block on it) and the caller raises it once the process ended
        self.log_error: OSError | None = None

    def _log(self, data: bytes, final: bool = False) -> None:
        if self.log is None or self.logged >= self.log_limit:
            return
        data = self.pending + data
        cut = len(data) if final or len(data) > _CHUNK else data.rfind(b"\n") + 1
        self.pending = data[cut:]
        part = redact_bytes(data[:cut])[: self.log_limit - self.logged]
        if not part:
            return
        with self.lock:
            if self.log.closed:
                self.log_limit = 0
                return
            try:
                self.log.write(part)
                self.log.flush()  # readers (health-check failures quote the log's last line) see it at once
                self.logged += len(part)
                if self.logged >= self.log_limit:
                    self.log.write(f"\n[bisectbot: {self.name_} log cut at {self.log_limit} bytes]\n".encode())
            except OSError as e:  # a full disk: a thread's traceback says nothing; the caller raises it
                self.log_error, self.log_limit = e, 0

    def run(self) -> None:
        while True:
            chunk = self.pipe.read1(_CHUNK) if hasattr(self.pipe, "read1") else self.pipe.read(_CHUNK)
            if not chunk:
                break
            self.total += len(chunk)
            self._log(chunk)
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail and self.tail_len - len(self.tail[0]) >= self.tail_bytes:
                self.tail_len -= len(self.tail.popleft())
        self._log(b"", final=True)
        self.pipe.close()

    def text(self) -> str:
        return b"".join(self.tail)[-self.tail_bytes:].decode("utf-8", "replace")


def _close(log: IO[bytes], drain: _Drain) -> None:
    """Close ``log``; an ``OSError`` of its last flush is kept on ``drain`` (raised by the caller)."""
    try:
        log.close()
    except OSError as e:
        drain.log_error = drain.log_error or e


def spawn_logged(argv: list[str], *, log_path: str | Path, cwd: str | Path | None = None,
                 env: dict[str, str] | None = None, log_limit: int = LOG_LIMIT_BYTES,
                 pass_fds: tuple[int, ...] = ()) -> tuple[subprocess.Popen, Any]:
    """Start a long-running process (a server) in its own process group with stdout and stderr
    streamed, redacted line by line, into ``log_path`` (at most ``log_limit`` bytes; the rest is
    drained and dropped). Returns ``(proc, finish)``: call ``finish()`` after the process group is
    gone to close the log. ``pass_fds``: descriptors the process inherits (a sandbox's launch pipe).
    Raises ``OSError`` when the process cannot start."""
    log = open(log_path, "wb")
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=pass_fds)
    except OSError:
        log.close()
        raise
    lock = threading.Lock()
    assert proc.stdout is not None
    drain = _Drain(proc.stdout, log, lock, TAIL_BYTES, log_limit, "output")
    drain.start()
    from .reaper import server_started, server_stopped

    server_started(proc.pid)  # its own session (start_new_session): pid == sid

    def finish() -> None:
        server_stopped(proc.pid)
        drain.join(10)
        with lock:
            _close(log, drain)
        if drain.log_error is not None:
            raise drain.log_error

    return proc, finish


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    if grace_s > 0:
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_process(argv: list[str], *, timeout_s: float, cwd: str | Path | None = None,
                env: dict[str, str] | None = None, log_path: str | Path | None = None,
                tail_bytes: int = TAIL_BYTES, log_limit: int = LOG_LIMIT_BYTES, grace_s: float = 0.0,
                on_start: Any = None, pass_fds: tuple[int, ...] = ()) -> ProcessRun:
    """Run ``argv`` in its own process group with bounded memory and time.

    Stdout and stderr go to ``log_path`` (both streams, as they come, up to ``log_limit`` bytes
    each) and only the last ``tail_bytes`` of each stay in memory. After ``timeout_s`` seconds the
    process group gets SIGTERM, ``grace_s`` seconds, then SIGKILL (``timed_out=True``,
    ``returncode=None``). ``on_start(proc)`` is called once the process runs (e.g. to record its
    pid). ``pass_fds``: descriptors the process inherits (a sandbox's launch pipe). Raises
    ``OSError`` when the process cannot start (the caller maps it to 126/127).
    """
    t0 = time.monotonic()
    log = open(log_path, "wb") if log_path is not None else None
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
    except OSError:
        if log is not None:
            log.close()
        raise
    lock = threading.Lock()
    assert proc.stdout is not None and proc.stderr is not None
    out = _Drain(proc.stdout, log, lock, tail_bytes, log_limit, "stdout")
    err = _Drain(proc.stderr, log, lock, tail_bytes, log_limit, "stderr")
    out.start()
    err.start()
    timed_out = False
    try:
        if on_start is not None:
            on_start(proc)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc, grace_s)
            proc.wait()
    finally:
        # the leader is gone (or interrupted): children left in its group are killed too, and so is
        # every process of the probe that left the group (setsid): they would hold the pipes open
        _kill_group(proc, 0)
        from .reaper import current_probe, kill_probe

        if current_probe():
            kill_probe(current_probe(), spare_servers=True)
        proc.wait()
        # children holding the pipes open are killed with the group; bounded join either way
        out.join(10)
        err.join(10)
        if log is not None:
            with lock:
                _close(log, out)
    for d in (out, err):
        if d.log_error is not None:  # the log could not be written (the disk full): the host's failure
            raise d.log_error
    return ProcessRun(None if timed_out else proc.returncode, time.monotonic() - t0, out.text(), err.text(),
                      timed_out, out.total, err.total)
