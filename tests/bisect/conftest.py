"""Fixtures of the bisect area: real git histories of the reference engine, recipes over them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

SERVE = """\
import os, sys, time
# counts server starts per candidate (tests check that no probe is repeated)
with open(os.environ["ENGINE_STARTS"], "a") as fh:
    fh.write(os.environ.get("RUN_ID", "0") + " " + open("version.txt").read().strip() + "\\n")
from bisectbot.demo.engine import main
sys.exit(main(["--config", "engine.json"] + sys.argv[1:]))
"""

BUILD = """\
import os, sys
if os.path.exists("BUILD_FAILS"):
    print("error: the build of this commit fails (BUILD_FAILS)")
    sys.exit(1)
print("built")
"""

CHECK = """\
import json, os, sys, time
with open(os.environ["ENGINE_STARTS"], "a") as fh:
    fh.write(os.environ.get("RUN_ID", "0") + " " + open("version.txt").read().strip() + "\\n")
time.sleep(float(os.environ.get("CHECK_SLEEP", "0")))
cfg = json.load(open("engine.json"))
if cfg.get("broken"):
    print("engine broken", file=sys.stderr)
    sys.exit(125)
thr = cfg.get("threshold")
if thr is not None and thr < 10000:
    print(f"threshold {thr} below 10000 tokens", file=sys.stderr)
    sys.exit(1)
sys.exit(0)
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@dataclass
class EngineRepo:
    path: Path
    shas: list[str] = field(default_factory=list)
    k: int = 0

    def index_of(self, sha: str) -> int:
        return self.shas.index(sha)


def make_engine_repo(path: Path, n: int, k: int, unbuildable: set[int] = frozenset(),
                     broken: set[int] = frozenset(), low: int = 4000, high: int = 30000,
                     name: str = "engine", extra_cfg: dict | None = None) -> EngineRepo:
    """A git history of n commits of the reference engine: the threshold drops to ``low`` at commit k.

    Commits in ``unbuildable`` fail the build command; commits in ``broken`` have an engine
    that exits at start (``"broken": true``).
    """
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "serve.py").write_text(SERVE)
    (path / "build.py").write_text(BUILD)
    (path / "check.py").write_text(CHECK)
    repo = EngineRepo(path, k=k)
    for i in range(n):
        cfg = {"threshold": low if i >= k else high, "seed": i, **(extra_cfg or {})}
        if i in broken:
            cfg["broken"] = True
        (path / "engine.json").write_text(json.dumps(cfg))
        (path / "version.txt").write_text(f"{name}-{i}\n")
        (path / "BUILD_FAILS").unlink(missing_ok=True)
        if i in unbuildable:
            (path / "BUILD_FAILS").write_text("x")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"{name} change {i}")
        repo.shas.append(git(path, "rev-parse", "HEAD"))
    return repo


def write_recipe(path: Path, repo: EngineRepo, out: Path, mode: str = "prefill", **extra) -> Path:
    py = sys.executable
    data = {
        "name": "engine-demo",
        "source": {"kind": "git", "repo": str(repo.path)},
        "server": {"command": [py, "serve.py", "--port", "{port}"], "build_command": [py, "build.py"],
                   "health_timeout_s": 30, "request_timeout_s": 30},
        "reproducer": {"min_size": 2000, "max_size": 16000, "sizes": [2000, 8000, 16000]},
        "regress": "garbage",
        "bisect": {"good": repo.shas[0], "bad": repo.shas[-1]},
        "report": {"dir": str(out)},
        # candidates see an allow-listed environment (issue 13): the engine's test knobs pass on purpose
        "env_passthrough": ["ENGINE_STARTS", "RUN_ID", "CHECK_SLEEP"],
    }
    if mode == "command":
        data["reproducer"] = {"kind": "command", "command": [py, "check.py"], "command_timeout_s": 30}
        data["regress"] = "command"
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k].update(v)
        else:
            data[k] = v
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def starts_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "starts.txt"
    p.touch()
    monkeypatch.setenv("ENGINE_STARTS", str(p))
    return p


def read_starts(p: Path) -> list[tuple[str, str]]:
    return [tuple(ln.split(" ", 1)) for ln in p.read_text().splitlines() if ln.strip()]  # type: ignore[misc]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=e,
                          timeout=timeout)


class Kit:
    """The helpers above, handed to tests as one fixture (tests cannot import conftest)."""

    make_engine_repo = staticmethod(make_engine_repo)
    write_recipe = staticmethod(write_recipe)
    read_starts = staticmethod(read_starts)
    run_cli = staticmethod(run_cli)
    git = staticmethod(git)


@pytest.fixture
def kit() -> Kit:
    return Kit()
