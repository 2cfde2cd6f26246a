"""A repository URL whose server accepts and never answers cannot hang a night (hostile inputs, issue 24's
URL components): ``bisectbot run`` over a recipe whose ``source.repo`` is such a URL ends with a clear
"cannot clone URL" error (exit 2) instead of waiting forever -- an HTTP(S) transfer that stalls is aborted
(git's low-speed limit, ``GIT_HTTP_LOW_SPEED_TIME`` shortened here) and any clone is killed after
``$BISECTBOT_GIT_TIMEOUT_S`` (``git://`` has no stall limit).

Real parts: the installed CLI in its own process, real ``git``, a real TCP server in its own process that
accepts connections and never writes a byte.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SILENT = """\
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accept, never answer
"""

RECIPE = """\
name: silent-upstream
source: {{kind: git, repo: '{url}', component: engine}}
reproducer: {{kind: command, command: [python3, -c, 'raise SystemExit(0)']}}
bisect: {{good: v1, bad: main}}
"""


@pytest.fixture
def silent_port():
    proc = subprocess.Popen([sys.executable, "-c", SILENT], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("scheme,env", [("http", {"GIT_HTTP_LOW_SPEED_TIME": "2"}),
                                        ("git", {"BISECTBOT_GIT_TIMEOUT_S": "3"})])
def test_a_silent_repository_server_is_a_clear_error_not_a_hang(tmp_path: Path, silent_port: int, scheme: str,
                                                                  env: dict) -> None:
    url = f"{scheme}://127.0.0.1:{silent_port}/engine.git"
    recipe = tmp_path / "silent.yaml"
    recipe.write_text(RECIPE.format(url=url))
    started = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(recipe),
                            "--runner", "local"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "BISECTBOT_CACHE": str(tmp_path / "cache"), **env})
    except subprocess.TimeoutExpired:
        pytest.fail(f"bisectbot run still waits on {url} after 60 s")
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert f"cannot clone {url}" in r.stderr, r.stderr[-2000:]
    assert time.monotonic() - started < 40
    assert not list((tmp_path / "cache" / "repos").glob("*.partial"))  # nothing half-cloned is left to reuse
