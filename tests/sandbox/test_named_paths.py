"""Issue 36, new-user pass: the sandbox gives candidates an empty ``/tmp``, so a recipe whose command
names a file under the host's ``/tmp`` -- a virtualenv's interpreter, a reproducer script kept
outside the tree -- found nothing there, and bwrap's own exit 1 ("bwrap: execvp ...: No such file")
was read as the candidate's verdict: every probe "bad", "the regression is older than the range".

Kind: a path the candidate's argv names, on the host, below a directory the sandbox makes private.
Members: the program itself (a script; a virtualenv's python) and an absolute path argument; and,
for a program the sandbox cannot show (below a hidden directory), the run must stop as a command
that cannot run (exit 2), never a verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import git

PY = sys.executable


def _history(repo: Path, n: int = 10, bad_from: int = 6) -> list[str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (repo / "state.txt").write_text("bad\n" if i >= bad_from else "good\n")
        (repo / "n.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


CHECK = "import sys\nsys.exit(1 if open('state.txt').read().strip() == 'bad' else 0)\n"


def _run(tmp: Path, command: list[str], shas: list[str], repo: Path) -> tuple[subprocess.CompletedProcess, dict]:
    recipe = tmp / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "named-paths", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": command},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp / "out")}}))
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "BISECTBOT_SANDBOX_WRITABLE")}
    p = subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp / "state"), "--json", "run", str(recipe),
                        "--runner", "local", "--out", str(tmp / "out")], capture_output=True, text=True, env=env,
                       timeout=600)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = {}
    return p, doc


def _culprit(doc: dict) -> str:
    final = (doc.get("result") or doc).get("stages", [{}])[-1]
    return (final.get("first_bad") or {}).get("ref", "")


@pytest.mark.slow
def test_a_script_and_a_virtualenv_under_tmp_that_the_command_names_are_seen(tmp_path: Path) -> None:
    assert str(tmp_path).startswith("/tmp/"), tmp_path  # the case: below the sandbox's private /tmp
    repo = tmp_path / "repo"
    shas = _history(repo)
    ext = tmp_path / "outside" / "check.py"  # a reproducer kept outside the candidate's tree
    ext.parent.mkdir()
    ext.write_text(CHECK)
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    p, doc = _run(tmp_path, [str(venv / "bin" / "python"), str(ext)], shas, repo)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _culprit(doc) == shas[6], (doc.get("status"), p.stderr[-2000:])


@pytest.mark.slow
def test_a_program_the_sandbox_cannot_show_is_a_command_that_cannot_run(tmp_path: Path) -> None:
    # below the bot's state directory, which every candidate's sandbox hides: bwrap cannot execvp it
    repo = tmp_path / "repo"
    shas = _history(repo)
    hidden = tmp_path / "state" / "check.sh"
    hidden.parent.mkdir()
    hidden.write_text("#!/bin/sh\nexit 0\n")
    hidden.chmod(0o755)
    p, doc = _run(tmp_path, [str(hidden)], shas, repo)
    assert p.returncode == 2, p.stdout[-3000:] + p.stderr[-3000:]
    text = p.stdout + p.stderr
    assert "cannot run" in text and "sandbox" in text, text[-3000:]
    assert "older than the range" not in text and _culprit(doc) == ""
