"""``bisectbot patches list/check/apply`` through the real CLI (subprocess and CliRunner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from patches_fixtures import AITER_REL, AITER_TAG_FORM, tree_bytes

from bisectbot.cli import cli

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_list_json_and_text() -> None:
    r = _run("--json", "patches", "list")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    ids = [p["id"] for p in data["patches"]]
    assert ids == ["aiter-chunkq-clamp", "vllm-sparse-mla-workspace", "vllm-sparse-mla-skip-kv-gather"]
    assert len(data["stack_hash"]) == 64
    r = _run("patches", "list")
    assert "variant v0.31: vllm-sparse-mla-skip-kv-gather/v0.31.patch" in r.stdout


def test_check_and_apply_source(aiter_tree: Path) -> None:
    runner = CliRunner()
    before = tree_bytes(aiter_tree)
    res = runner.invoke(cli, ["patches", "check", "--source", str(aiter_tree)])
    assert res.exit_code == 0, res.output
    assert "aiter-chunkq-clamp" in res.output and "applies with offset 192 [variant v0.1.10]" in res.output
    assert "not applicable (no vllm/ package directory in this tree)" in res.output
    assert tree_bytes(aiter_tree) == before
    res = runner.invoke(cli, ["--json", "patches", "apply", "--source", str(aiter_tree), "--ids", "aiter-chunkq-clamp"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["applied"] and data["patches"][0]["state"] == "applies-with-offset"
    f = data["files"][AITER_REL]
    assert f["before"] != f["after"]
    assert "if heads < ChunkQ:" in (aiter_tree / AITER_REL).read_text()
    res = runner.invoke(cli, ["--json", "patches", "check", "--source", str(aiter_tree), "--ids", "aiter-chunkq-clamp"])
    assert json.loads(res.output)["patches"][0]["state"] == "already-upstream"


def test_conflict_exit_2_tree_untouched(aiter_tree: Path) -> None:
    f = aiter_tree / AITER_REL
    f.write_text(AITER_TAG_FORM.replace("(heads // ChunkQ)\n", "heads // ChunkQ\n"))
    before = tree_bytes(aiter_tree)
    r = _run("patches", "check", "--source", str(aiter_tree))
    assert r.returncode == 2
    assert "conflict: hunk #1" in r.stdout and "expected:" in r.stdout
    assert "    TileQCount = batch_size * next_n * (heads // ChunkQ)" in r.stdout
    r = _run("patches", "apply", "--source", str(aiter_tree))
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert err[0].startswith("bisectbot: error: patch aiter-chunkq-clamp (required) does not apply")
    assert "hunk #1" in r.stderr
    assert tree_bytes(aiter_tree) == before


def test_bad_usage_and_image_needs_containers(tmp_path: Path) -> None:
    r = _run("patches", "check")
    assert r.returncode == 2 and "exactly one of" in r.stderr
    r = _run("patches", "check", "--pypi", "vllm-0.19.1")
    assert r.returncode == 2 and "PACKAGE==VERSION" in r.stderr
    r = _run("patches", "check", "--image", "rocm/vllm-dev:nightly")
    assert r.returncode != 0 and "containers area" in r.stderr
    r = _run("patches", "check", "--source", str(tmp_path), "--ids", "nope")
    assert r.returncode == 2 and "unknown patch id 'nope'" in r.stderr
    (tmp_path / "stack.yaml").write_text("patches: [1]\n")
    r = _run("patches", "list", "--stack", str(tmp_path / "stack.yaml"))
    assert r.returncode == 2 and "stack.yaml:1:" in r.stderr
