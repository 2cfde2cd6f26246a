"""``round probe --focus`` refuses what is not prompt sizes with a clear error (exit 2) before any probe runs
(hostile inputs on issue 23's focus sizes): a superscript digit used to pass ``str.isdigit`` and end in an
internal error (exit 70, "invalid literal for int()"); non-ASCII digits were read as sizes the plan never
named.

Real parts: the CLI in its own process, a real git history and a command recipe over it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RECIPE = """\
name: focus-input
source: {kind: git, repo: history, component: engine}
reproducer: {kind: command, command: [python3, -c, 'raise SystemExit(0)']}
"""


@pytest.mark.parametrize("focus", ["-5", "0", "1.5", "abc", "20000,²", "١٢", "2\u00b3"])
def test_round_probe_refuses_focus_that_is_not_prompt_sizes(tmp_path: Path, focus: str) -> None:
    repo = tmp_path / "history"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "c0"], cwd=repo, check=True, env=env)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, env=env, capture_output=True,
                         text=True).stdout.strip()
    (tmp_path / "r.yaml").write_text(RECIPE)
    out = tmp_path / "v.json"
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "round", "probe",
                        str(tmp_path / "r.yaml"), "--session", "s1", "--ref", sha, "--focus", focus, "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-1500:])
    assert f"--focus {focus!r}: prompt sizes (tokens) or prompts (N@seedSwW" in r.stderr, r.stderr[-1500:]
    assert "internal error" not in r.stderr and not out.exists()
