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
from bisectbot.report.render import render_markdown
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
