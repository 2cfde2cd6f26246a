"""The Reproduce section's overlay lines, run as written against a real image by digest (issue 38).

A component commit overlaid on a nightly must come out as the bot's build made it: the package files
changed since the image's own commit written over the installed package, the files the commit
deleted removed, everything else of the installed package (files the image's build made) untouched.
The member here: a module that became a package (``old.py`` -> ``old/__init__.py``); copying the
whole tree over the image leaves ``old.py`` beside the new package."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from bisectbot.models import Candidate, CandidateKind, RunResult, StageResult, Status
from bisectbot.report.reproduce_kit import kit
from tests.containers.conftest import REGISTRY, base_image, registry  # noqa: F401

pytestmark = [pytest.mark.docker]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_overlay_lines_build_what_the_bot_built(base_image, registry, tmp_path: Path) -> None:  # noqa: F811
    repo = tmp_path / "toy"
    (repo / "toypkg" / "sub").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "toypkg" / "__init__.py").write_text("")
    (repo / "toypkg" / "a.py").write_text("A = 0\n")
    (repo / "toypkg" / "old.py").write_text("OLD = 1\n")
    (repo / "toypkg" / "sub" / "keep.py").write_text("KEEP = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c0")
    c0 = git(repo, "rev-parse", "HEAD")
    (repo / "toypkg" / "a.py").write_text("A = 1\n")
    (repo / "toypkg" / "old.py").unlink()
    (repo / "toypkg" / "old").mkdir()
    (repo / "toypkg" / "old" / "__init__.py").write_text("OLD = 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c1: old becomes a package")
    c1 = git(repo, "rev-parse", "HEAD")

    # the "nightly": c0's package installed, plus a file the image's own build made (kept untouched)
    ctx = tmp_path / "ctx"
    site = ctx / "usr/local/lib/python3.11/dist-packages"
    site.mkdir(parents=True)
    subprocess.run(f"git -C {repo} archive {c0} toypkg | tar -x -C {site}", shell=True, check=True)
    (site / "toypkg" / "_built.py").write_text("BUILT = 1\n")
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY usr/ /usr/\n")
    ref = f"{REGISTRY}/bisectbot-test/overlay-{uuid.uuid4().hex[:8]}:nightly"
    subprocess.run(["docker", "build", "-q", "-t", ref, str(ctx)], check=True, capture_output=True)
    tag = f"bisectbot-ovl-{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(["docker", "push", ref], check=True, capture_output=True)
        digest = subprocess.run(["docker", "image", "inspect", "-f", "{{index .RepoDigests 0}}", ref], check=True,
                                capture_output=True, text=True).stdout.strip()
        cand = Candidate(CandidateKind.COMMIT, c1, "c1", "toypkg", meta={"base": digest, "base_commit": c0})
        good = Candidate(CandidateKind.COMMIT, c0, "c0", "toypkg", meta={"base": digest, "base_commit": c0})
        f = {"source": {"kind": "registry", "registry": REGISTRY, "repository": "x"}, "model": "m", "tp": 1,
             "server": {"command": ["python3", "-c", "pass"], "env": {}, "port": 8000, "mounts": []},
             "reproducer": {}, "patches": [], "repos": {"toypkg": str(repo)}, "packages": {"toypkg": "toypkg"}}
        run = RunResult("r", "regression", Status.CULPRIT,
                        [StageResult("s", "toypkg", Status.CULPRIT, [good, cand], [], good, cand, [cand], 1.0)])
        run.reproduction = f
        k = kit(run)
        assert k is not None and k.server[-1].startswith("docker run")
        script = "\n".join(k.server[:-1]).replace("bisectbot-candidate", tag)
        work = tmp_path / "maintainer"
        work.mkdir()
        p = subprocess.run(["bash", "-euc", script], cwd=work, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        probe = ("import importlib, toypkg, toypkg.a, toypkg.sub.keep, toypkg._built, os; "
                 "d = os.path.dirname(toypkg.__file__); import toypkg.old as o; "
                 "print(toypkg.a.A, o.OLD, os.path.exists(os.path.join(d, 'old.py')), toypkg._built.BUILT)")
        out = subprocess.run(["docker", "run", "--rm", "--entrypoint", "python3", tag, "-c", probe],
                             capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == ["1", "2", "False", "1"], out.stdout + out.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", tag, ref], capture_output=True)
