"""Fixtures of the rounds area: a generated git history (git fast-import) with a planted
culprit, a command-reproducer recipe over it, and the CLI in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

CHECK = """\
import os, sys, time
time.sleep(float(os.environ.get("CHECK_SLEEP", "0")))
log = os.environ.get("CHECK_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(open("n.txt").read().strip() + "\\n")
sys.exit(1 if os.path.exists("BUG") and "--workaround" not in sys.argv else 0)
"""


@dataclass
class History:
    path: Path
    shas: list[str]
    culprit: int  # index of the first bad commit


def git(repo: Path, *args: str, input: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True,
                          input=input).stdout.strip()


def make_history(path: Path, n: int, culprit: int) -> History:
    """``n`` commits on ``main`` (one git fast-import); from commit ``culprit`` on the file
    ``BUG`` exists, so ``check.py`` (the reproducer) exits 1 there and 0 before."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    lines: list[str] = []

    def blob(text: str) -> str:
        data = text.encode()
        return f"data {len(data)}\n{text}\n"

    for i in range(n):
        msg = f"change {i}"
        lines.append("commit refs/heads/main")
        lines.append(f"mark :{i + 1}")
        lines.append(f"committer t <t@example.com> {1_700_000_000 + i * 60} +0000")
        lines.append(blob(msg).rstrip("\n"))
        if i:
            lines.append(f"from :{i}")
        lines.append("M 644 inline check.py")
        lines.append(blob(CHECK).rstrip("\n"))
        lines.append("M 644 inline n.txt")
        lines.append(blob(f"{i}\n").rstrip("\n"))
        if i == culprit:
            lines.append("M 644 inline BUG")
            lines.append(blob("the planted regression\n").rstrip("\n"))
        lines.append("")
    git(path, "fast-import", "--quiet", input="\n".join(lines) + "\n")
    git(path, "checkout", "-q", "main")
    shas = git(path, "rev-list", "--reverse", "main").splitlines()
    assert len(shas) == n
    return History(path, shas, culprit)


def write_recipe(path: Path, hist: History, out: Path, triage: list | None = None, **bisect) -> Path:
    data = {
        "name": f"rounds-{path.stem}",
        "source": {"kind": "git", "repo": str(hist.path)},
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"], "command_timeout_s": 60},
        "regress": "command",
        "bisect": {"good": hist.shas[0], "bad": hist.shas[-1], **bisect},
        "report": {"dir": str(out)},
        "env_passthrough": ["CHECK_SLEEP", "CHECK_LOG"],
    }
    if triage:
        data["triage"] = triage
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def cli_popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bisectbot", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def plan(state: Path, recipe: Path, *extra: str) -> dict:
    p = cli("--state", str(state), "round", "plan", str(recipe), *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


class Kit:
    make_history = staticmethod(make_history)
    write_recipe = staticmethod(write_recipe)
    cli = staticmethod(cli)
    cli_popen = staticmethod(cli_popen)
    plan = staticmethod(plan)
    git = staticmethod(git)


@pytest.fixture
def kit() -> Kit:
    return Kit()
