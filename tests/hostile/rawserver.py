"""A raw TCP server that answers each request as a test says (dribbles, floods, bombs, silence),
and the installed CLI run with its own peak RSS: the hostile tests of remote replies share them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def hostile(reply: Callable[[socket.socket], None]) -> Iterator[tuple[str, list[float]]]:
    """A TCP server on 127.0.0.1 that reads one request per connection and lets ``reply`` answer
    it; yields its base URL and the times (monotonic) requests arrived."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop, arrivals = threading.Event(), []

    def serve_one(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                arrivals.append(time.monotonic())
                reply(conn)
            except OSError:
                pass

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", arrivals
    finally:
        stop.set()
        t.join(5)
        srv.close()


def cli_with_rusage(args: list[str], timeout: float, env_extra: dict[str, str] | None = None
                    ) -> tuple[int, str, float, int]:
    """Run the installed CLI; returns (exit code, stderr, wall seconds, peak RSS in KiB)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_STEP_SUMMARY",
                                                            "BISECTBOT_GITHUB_TOKEN")}
    env.update(env_extra or {})
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "bisectbot", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    err = proc.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
    proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, time.monotonic() - t0, usage.ru_maxrss
