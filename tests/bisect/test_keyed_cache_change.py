"""Issue 40, the re-check of the hostile pass: the local runner's component-keyed cache base holds the
change under test (issue 42's try job and minimize subsets), as the container runner's does: an aiter
change measured with the unchanged build's JIT modules would be the old kernel."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import parse_recipe
from bisectbot.run.base import Prepared
from bisectbot.run.local import LocalRunner

DIFF = ("diff --git a/csrc/kernel.cu b/csrc/kernel.cu\n--- a/csrc/kernel.cu\n+++ b/csrc/kernel.cu\n"
        "@@ -1 +1 @@\n-int clamp = 0;\n+int clamp = 1;\n")


def _repo(p: Path, f: str, text: str) -> str:
    p.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    for a in (["init", "-q", "-b", "main"],):
        subprocess.run(["git", *a], cwd=p, check=True, env=env)
    (p / f).parent.mkdir(parents=True, exist_ok=True)
    (p / f).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=p, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "c"], cwd=p, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=p, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.mark.parametrize("component", ["aiter", ""])
def test_a_change_to_aiter_gets_its_own_aiter_jit_cache(tmp_path: Path, monkeypatch, component: str) -> None:
    """A try job / minimize subset whose change edits aiter's sources (component ``aiter``, or the
    candidate's own tree when the history is aiter's) must not share AITER_JIT_DIR with the unchanged
    build: aiter reuses a module it finds there, so the change would be measured as the old kernel (and its
    module would poison the unchanged candidates' later starts)."""
    monkeypatch.setenv("BISECTBOT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BISECTBOT_SANDBOX", "off")
    v = _repo(tmp_path / "vllm", "setup.py", "x\n")
    a = _repo(tmp_path / "aiter", "csrc/kernel.cu", "int clamp = 0;\n")
    primary = "aiter" if component == "" else "vllm"
    recipe = parse_recipe(
        "name: kc\nsource: {{kind: git, repo: {}, component: {}}}\n"
        "bisect: {{components: {{{}: {{repo: {}}}}}}}\n".format(
            tmp_path / primary, primary, "vllm" if primary == "aiter" else "aiter",
            tmp_path / ("vllm" if primary == "aiter" else "aiter")))
    runner = LocalRunner(recipe, workdir=tmp_path / "work")
    commits = {"vllm": v, "aiter": a}
    ref = commits[primary]

    def aiter_dir(change: dict | None) -> str:
        c = Candidate(CandidateKind.COMMIT, ref, ref[:8], primary,
                      {"commits": commits, **({"change": change} if change else {})})
        p = Prepared(c, build_key=runner.build_key(c), meta={"commits": commits})
        return str(runner.keyed_caches(p)["AITER_JIT_DIR"])

    change = {"diff": DIFF, "source": "patch fix.diff", "component": component, "fuzz": 0}
    assert aiter_dir(None) != aiter_dir(change), "the changed aiter build shares the unchanged build's JIT modules"
