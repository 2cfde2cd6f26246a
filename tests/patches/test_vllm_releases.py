"""Done-when checks on real vLLM sdists from the package index (network; cached under the bisectbot cache).

Each test downloads one sdist once (31 MB / 47 MB, cached by sha256) and extracts only
``vllm/v1/attention/ops/rocm_aiter_mla_sparse.py`` and PKG-INFO.
"""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from bisectbot.patches import State, apply_stack, check_stack
from bisectbot.sources import releases

pytestmark = pytest.mark.network

FILE = "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"
WS, SKIP = "vllm-sparse-mla-workspace", "vllm-sparse-mla-skip-kv-gather"


def _tree(version: str, dest: Path) -> Path:
    return releases.fetch_sdist_tree("vllm", version, [FILE], dest)


def test_vllm_0_19_1_both_patches_apply_and_compile(tmp_path: Path, repo_stack) -> None:
    root = _tree("0.19.1", tmp_path)
    src = (root / FILE).read_text()
    assert src.count("k_fp8 = torch.empty(") == 1 and "skip_kv_gather" not in src  # the buggy form ships
    sts = check_stack(repo_stack, [WS, SKIP], root)  # version read from the sdist's PKG-INFO
    assert [(s.state, s.variant) for s in sts] == [(State.APPLIES, "v0.19"), (State.APPLIES, "v0.19")]
    app = apply_stack(repo_stack, [WS, SKIP], root)
    assert app.versions["vllm"] == "0.19.1" and [s.state for s in app.statuses] == [State.APPLIES] * 2
    out = (root / FILE).read_text()
    assert "k_fp8 = torch.empty(" not in out and "k_fp8 = k_fp8_full[: chunk.total_seq_lens]" in out
    assert "if not chunk.skip_kv_gather:" in out and out.count("get_simultaneous(") == 2
    py_compile.compile(str(root / FILE), doraise=True)
    assert app.files[FILE]["after"] == app.statuses[1].sha256_after != app.files[FILE]["before"]


def test_vllm_0_33_0_workspace_upstream_skip_variant(tmp_path: Path, repo_stack) -> None:
    root = _tree("0.33.0", tmp_path)
    sts = check_stack(repo_stack, [WS, SKIP], root)
    assert sts[0].state is State.UPSTREAM and sts[0].label == "already upstream"
    assert sts[1].state is State.APPLIES and sts[1].variant == "v0.31"
    app = apply_stack(repo_stack, [WS, SKIP], root)
    assert "if not chunk.skip_kv_gather:" in (root / FILE).read_text()
    py_compile.compile(str(root / FILE), doraise=True)
    assert app.statuses[0].sha256_before == app.statuses[0].sha256_after


def test_cli_pypi_check_json() -> None:
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "patches", "check", "--pypi", "vllm==0.33.0",
                        "--ids", f"{WS},{SKIP}"], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [p["label"] for p in data["patches"]] == ["already upstream", "applies [variant v0.31]"]
