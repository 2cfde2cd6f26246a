"""A repository URL with credentials (``https://user:TOKEN@host/x.git``, a private fork) leaves no
credentials where candidates can read them (hostile inputs on issue 24's URL components): the bare
clone in the cache kept the URL, token included, as ``remote.origin.url`` in its config, and every
candidate's command runs in a worktree of that clone (``git config remote.origin.url`` printed it).
Later fetches name the URL itself, so the clone still follows the upstream.

Real parts: the CLI in its own processes, real git, a real HTTP server (``python -m http.server``
serving a bare repository over git's dumb HTTP protocol) in its own process, a command reproducer
that records what it can see.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

TOKEN = "S3cretCloneTok3n" + "0123456789"
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin"}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**ENV, "HOME": str(cwd)}).stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_credentialed_repository_url_is_not_readable_by_candidates(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    for i in range(3):
        (work / "v.txt").write_text(f"{i}\n")
        _git(work, "add", "v.txt")
        _git(work, "commit", "-qm", f"c{i}")
        if i == 0:
            _git(work, "tag", "v0")
    served = tmp_path / "srv"
    served.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(served / "engine.git"))
    _git(served / "engine.git", "update-server-info")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=served,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        seen = tmp_path / "seen.txt"
        url = f"http://bob:{TOKEN}@127.0.0.1:{port}/engine.git"
        recipe = tmp_path / "r.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "credentialed", "source": {"kind": "git", "repo": url, "component": "engine"},
            "reproducer": {"kind": "command", "command": [
                "sh", "-c", f"(git config --get remote.origin.url; cat \"$(git rev-parse --git-common-dir)/config\") "
                            f">> {seen} 2>&1; exit 0"]},
            "bisect": {"good": "v0", "bad": "main"}}))
        env = {**os.environ, "BISECTBOT_CACHE": str(tmp_path / "cache")}
        for n in (1, 2):  # the second run finds the clone and fetches it
            r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / f"state{n}"), "run",
                                str(recipe), "--runner", "local", "--out", str(tmp_path / f"out{n}")],
                               capture_output=True, text=True, timeout=300, env=env)
            assert r.returncode in (0, 3), (r.returncode, r.stderr[-2000:])  # 3: no regression (all good)
            assert "fetch of" not in r.stderr, r.stderr[-2000:]
        assert f"url = http://127.0.0.1:{port}/engine.git" in seen.read_text(), seen.read_text()
        (clone,) = (tmp_path / "cache" / "repos").iterdir()
        assert TOKEN not in seen.read_text() and TOKEN not in (clone / "config").read_text()
    finally:
        server.kill()
        server.wait()
