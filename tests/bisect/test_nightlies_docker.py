"""Two stages through Docker: nightlies in a local registry (stage 1), then the changed
component's commits as overlay builds on the last-good nightly (stage 2).

Uses the containers area's nightly factory: N1 (vLLM commit A), N2 (B), N3 (C: garbage
above 3000 prompt tokens)."""

from __future__ import annotations

import json

import pytest

from tests.containers.conftest import REGISTRY, base_image, nightlies, registry, vllm_repo  # noqa: F401
from tests.containers.nightly_factory import SERVER_COMMAND

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_nightlies_then_vllm_commits_find_commit_c(nightlies, vllm_repo, tmp_path, kit) -> None:  # noqa: F811
    cmd = ", ".join(f'"{a}"' for a in SERVER_COMMAND)
    rec = tmp_path / "recipe.yaml"
    rec.write_text(f"""\
name: two-stage
model: demo
source: {{kind: registry, registry: "{REGISTRY}", repository: {nightlies['repository']},
          tag_pattern: "nightly_main_*", insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {nightlies['N1'].spec.tag}
  bad: {nightlies['N3'].spec.tag}
  components: {{vllm: {{repo: "{vllm_repo['path']}", runtime_paths: [vllm/]}}}}
report: {{dir: "{tmp_path / 'out'}"}}
""")
    p = kit.run_cli("--state", str(tmp_path / "state"), "run", str(rec), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    s1, s2 = res["stages"][0], res["stages"][-1]
    assert s1["first_bad"]["label"] == nightlies["N3"].spec.tag and s1["last_good"]["label"] == nightlies["N2"].spec.tag
    assert s2["component"] == "vllm" and s2["status"] == "culprit"
    assert s2["first_bad"]["ref"] == vllm_repo["C"] and s2["last_good"]["ref"] == vllm_repo["B"]
    env = res["environment"]
    assert env["vllm (first bad)"].endswith(vllm_repo["C"][:9]) and env["vllm (last good)"].endswith(vllm_repo["B"][:9])
    assert env["aiter (first bad)"] == env["aiter (last good)"]  # only vLLM changed: no mixed pairs
