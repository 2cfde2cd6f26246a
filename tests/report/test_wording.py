"""Issue 25, input 8: wording that misled. A tree the bot patched itself is not "already upstream";
``report reply`` written without GitHub links the request's comment, not ``#12``; ``patches check --image``
names the missing file; a finished bisection run again is not "resuming"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bisectbot.patches import MARKER
from bisectbot.recipe import GitHubTarget
from bisectbot.report.markdown import render_markdown
from bisectbot.report.reply import reply_with_result
from tests.report.report_helpers import make_result

ROOT = Path(__file__).resolve().parents[2]


def test_a_tree_bisectbot_patched_itself_is_not_already_upstream(tmp_path) -> None:
    """``patches check`` on a tree that carries the patch's own marker (an image the bot built)."""
    target = tmp_path / "tree" / "aiter" / "ops" / "triton" / "attention" / "pa_mqa_logits.py"
    target.parent.mkdir(parents=True)
    target.write_text(f"def stage1(heads):\n    ChunkQ = 64  # {MARKER} aiter-chunkq-clamp\n    return heads // ChunkQ\n")
    p = subprocess.run([sys.executable, "-m", "bisectbot", "patches", "check", "--source", str(tmp_path / "tree"),
                        "--ids", "aiter-chunkq-clamp", "--stack", str(ROOT / "patches" / "stack.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if "aiter-chunkq-clamp" in ln)
    assert "already applied here" in line and "patched by bisectbot, not upstream" in line, line
    assert "already upstream" not in line, line
    # a result written before: its patch table says the same
    res = make_result()
    res.patch_stack = [{"id": "aiter-chunkq-clamp", "state": "already upstream",
                        "detail": f"already patched here ('{MARKER} aiter-chunkq-clamp' marker)"}]
    row = next(ln for ln in render_markdown(res).splitlines() if ln.startswith("| aiter-chunkq-clamp |"))
    assert "already applied here (patched by bisectbot, not upstream)" in row and "already upstream" not in row, row


def test_dry_run_reply_links_the_comment_not_a_bare_issue_number(tmp_path) -> None:
    target = GitHubTarget(repo="octo-org/vllm", labels=["bisectbot"])
    out = reply_with_result(make_result(), target, None, 12, 2345678, tmp_path)
    body = Path(out.paths[0]).read_text()
    assert "[this request](https://github.com/octo-org/vllm/issues/12#issuecomment-2345678)" in body, body[:500]
    assert "](#12)" not in body
    # issue 41, item 11: a dry run does not look the comment up; it names no author ("from (not
    # looked up: dry run)" read as a login)
    assert "not looked up" not in body and "[this request](https://github.com/octo-org/vllm/issues/12" \
        "#issuecomment-2345678): " in body, body[:500]
    ghe = GitHubTarget(repo="o/r", labels=["x"], api_url="https://ghe.example.com/api/v3")
    body = Path(reply_with_result(make_result(), ghe, None, 3, 4, tmp_path).paths[0]).read_text()
    assert "(https://ghe.example.com/o/r/issues/3#issuecomment-4)" in body


@pytest.mark.docker
@pytest.mark.slow
def test_patches_check_image_names_the_missing_file_not_the_package(tmp_path, require_docker) -> None:
    """``patches check --image`` on a nightly whose vllm package lacks the patch's target file said
    "no vllm/ package directory"; the file is what is missing."""
    import uuid

    from tests.containers.baseimage import ensure_base_image
    from tests.containers.nightly_factory import NightlySpec, push_nightlies

    repo = f"bisectbot-test/wording-{uuid.uuid4().hex[:8]}"
    pushed = push_nightlies([NightlySpec("nightly_main_20260401")], repo, base=ensure_base_image())
    try:
        def check(image: str) -> str:
            p = subprocess.run([sys.executable, "-m", "bisectbot", "patches", "check", "--image", image,
                                "--ids", "vllm-sparse-mla-workspace", "--stack", str(ROOT / "patches" / "stack.yaml")],
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stderr
            return next(ln for ln in p.stdout.splitlines() if "vllm-sparse-mla-workspace" in ln)

        line = check(pushed[0].pinned)
        assert "file vllm/v1/attention/ops/rocm_aiter_mla_sparse.py absent from the image's installed package" in line, line
        assert "package directory" not in line
        line = check(ensure_base_image())  # no vLLM at all
        assert "no vllm package installed in the image" in line, line
    finally:
        subprocess.run(["docker", "rmi", "-f", pushed[0].ref, pushed[0].pinned], capture_output=True)


def test_running_a_finished_bisection_again_is_not_called_resuming(tmp_path) -> None:
    """Every later run of a finished bisection said "resuming session …" as if it had been
    interrupted; it is a finished session whose verdicts come from the ledger."""
    import os

    import yaml

    repo = tmp_path / "repo"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    shas = []
    for i in range(8):
        (repo / "bug").write_text("1\n" if i >= 5 else "0\n")
        (repo / "n").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", f"c{i}"], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "again", "source": {"kind": "git", "repo": str(repo)},
        "reproducer": {"kind": "command", "command": ["sh", "-c", "test $(cat bug) = 0"]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(recipe)],
                              capture_output=True, text=True, timeout=300)

    first = run()
    assert first.returncode == 0 and "resuming session" not in first.stderr, first.stderr
    again = run()
    assert again.returncode == 0, again.stderr
    assert "resuming session" not in again.stderr, again.stderr
    assert "finished before (culprit): its" in again.stderr and "probes come from the ledger" in again.stderr


PATCH_CHECK = """\
import sys
src = open("vllm/knob.py").read()
sys.exit(1 if "BUG = True" in src else 0)
"""

KNOB_PATCH = """\
--- a/knob.py
+++ b/knob.py
@@ -1,2 +1,3 @@
 # anchor
+PATCHED = True
 VERSION = 1
"""


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _patched_run(tmp_path: Path, spec: dict) -> tuple[list[str], dict]:
    """``bisectbot run`` over a 12-commit history (bug from commit 7) with the one-patch stack ``spec``
    (package vllm, diff KNOB_PATCH); its output lines (stdout and stderr as printed) and result.json."""
    import json

    import yaml

    repo = tmp_path / "repo"
    (repo / "vllm").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "check.py").write_text(PATCH_CHECK)
    shas = []
    for i in range(12):
        (repo / "vllm" / "knob.py").write_text(f"# anchor\nVERSION = 1\nBUG = {i >= 7}\n")
        (repo / "n.txt").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    pdir = tmp_path / "patches"
    (pdir / "knob").mkdir(parents=True)
    (pdir / "knob" / "v1.patch").write_text(KNOB_PATCH)
    (pdir / "stack.yaml").write_text(yaml.safe_dump({"version": 1, "patches": [{
        "id": "knob-fix", "package": "vllm", "required": True, "fuzz": 0,
        "variants": [{"id": "v1", "diff": "knob/v1.patch"}], **spec}]}))
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump({
        "name": "patched", "source": {"kind": "git", "repo": str(repo)}, "patches": ["knob-fix"],
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"]}, "regress": "command",
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    import os

    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "s"), "run", str(rec)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env={**os.environ, "BISECTBOT_PATCHES_DIR": str(pdir)})
    assert p.returncode == 0, p.stdout
    return p.stdout.splitlines(), json.loads((tmp_path / "out" / "result.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("spec,why", [
    ({"path": "moved/knob.py"}, "file vllm/moved/knob.py absent"),  # the target file is not in the range
    ({"path": "knob.py", "when": {"contains": "# never there"}}, "condition: file lacks"),  # next member: `when`
])
def test_a_required_patch_that_applies_to_no_candidate_is_said_during_the_run(tmp_path, spec, why) -> None:
    lines, res = _patched_run(tmp_path, spec)
    early = [i for i, ln in enumerate(lines) if "warning: required patch knob-fix applied to none of the 2 "
             "candidates of stage 1 probed so far" in ln]
    final = [i for i, ln in enumerate(lines) if "warning: required patch knob-fix applied to none of the" in ln
             and "every verdict is measured without it" in ln]
    probe_lines = [i for i, ln in enumerate(lines) if ln.startswith("[")]
    culprit = next(i for i, ln in enumerate(lines) if ln.startswith("culprit:"))
    assert len(early) == 1 and why in lines[early[0]], "\n".join(lines)
    # at the time: after the two ends of the range, before the search goes on without it
    assert probe_lines[1] < early[0] < probe_lines[2], "\n".join(lines)
    assert len(final) == 1 and early[0] < final[0] < culprit, "\n".join(lines)
    n = len({pr["candidate"]["ref"] for pr in res["stages"][-1]["probes"]})
    assert f"none of the {n} probed candidates of stage 1" in lines[final[0]]
    # the report's table says the same after the run
    assert all(pr["patches"][0]["state"] == "not-applicable" for pr in res["stages"][-1]["probes"])


@pytest.mark.slow
def test_a_required_patch_that_applies_is_not_warned_of(tmp_path) -> None:
    lines, res = _patched_run(tmp_path, {"path": "knob.py"})
    assert not [ln for ln in lines if "warning: required patch" in ln], "\n".join(lines)
    assert all(pr["patches"][0]["state"] == "applies" for pr in res["stages"][-1]["probes"])
