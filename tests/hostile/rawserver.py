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
    """Run the installed CLI from a small launcher (:mod:`tests.hostile.peak_rss`: the peak is the
    CLI's own, not the pytest worker's it was forked from); returns (exit code, stderr, wall
    seconds, peak RSS in KiB)."""
    import tempfile
    from pathlib import Path

    from tests.hostile.peak_rss import run_measured

    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_STEP_SUMMARY",
                                                            "BISECTBOT_GITHUB_TOKEN")}
    env.update(env_extra or {})
    with tempfile.TemporaryDirectory() as d, open(Path(d) / "stderr", "w+", encoding="utf-8",
                                                    errors="replace") as err:
        code, rss, wall = run_measured([sys.executable, "-m", "bisectbot", *args], Path(d), env=env,
                                       timeout=timeout, stdout=subprocess.DEVNULL, stderr=err)
        err.seek(0)
        text = err.read()
    return code, text, wall, rss
