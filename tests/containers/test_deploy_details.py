"""Issue 24, input 6: the deployment details that stop a team, each through the real CLI/script.

* ``--recipe NAME`` (a bare name, looked up in ./recipes) works for ``nightlies record``,
  ``nightlies diff`` and ``build`` as it does for ``run``: the error is the registry's, not
  "file not found".
* ``patches check --image`` exits 5 for an unreachable registry, as ``build`` and ``nightlies
  show`` do.
* ``scripts/services.sh`` puts its logs under ``$TMPDIR`` when ``BISECTBOT_SERVICES_DIR`` is unset.
* The shipped GLM recipe is a nightly one (``nightly: true``: the nightly workflow's ``all``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bisectbot.errors import EXIT_UNREACHABLE
from bisectbot.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def bb(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "BISECTBOT_STATE": str(cwd / "state"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=e,
                          cwd=cwd, timeout=240)


def _offline(tmp_path: Path) -> Path:
    """recipes/offline.yaml (next to the cwd): the GLM recipe on a registry refusing connections."""
    data = yaml.safe_load((ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml").read_text())
    data["source"] = {"kind": "registry", "registry": "127.0.0.1:1", "repository": "rocm/vllm-dev",
                      "tag_pattern": "nightly_main_*", "insecure": True}
    data["patches"] = []
    (tmp_path / "recipes").mkdir()
    p = tmp_path / "recipes" / "offline.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.docker
def test_bare_recipe_names_and_unreachable_registry_exit_5(tmp_path, require_docker) -> None:
    _offline(tmp_path)
    for args in (["nightlies", "record", "--recipe", "offline"],
                 ["nightlies", "diff", "nightly_main_1", "nightly_main_2", "--recipe", "offline"],
                 ["build", "--recipe", "offline", "--base", "nightly_main_1"]):
        r = bb(tmp_path, *args)
        assert "cannot read" not in r.stderr and "No such file" not in r.stderr, (args, r.stderr)
        assert r.returncode == EXIT_UNREACHABLE, (args, r.returncode, r.stderr[-800:])
    r = bb(tmp_path, "patches", "check", "--image", "127.0.0.1:1/rocm/vllm-dev:nightly_main_1")
    assert r.returncode == EXIT_UNREACHABLE, (r.returncode, r.stderr[-800:])
    r = bb(tmp_path, "nightlies", "show", "127.0.0.1:1/rocm/vllm-dev:nightly_main_1")
    assert r.returncode == EXIT_UNREACHABLE, (r.returncode, r.stderr[-800:])


def test_services_script_honours_tmpdir(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BISECTBOT_SERVICES_DIR"}
    env["TMPDIR"] = str(tmp_path)
    subprocess.run(["bash", str(ROOT / "scripts" / "services.sh")], env=env, capture_output=True, text=True,
                   timeout=180)
    assert (tmp_path / "bisectbot-services").is_dir()


def test_the_glm_recipe_runs_nightly_and_leaves_the_hf_cache_to_the_profile() -> None:
    r = load_recipe(ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml")
    assert r.nightly is True and r.runner == "mi355x"
    assert not any(m.split(":")[1].rstrip("/") == "/root/.cache/huggingface" for m in r.server.mounts)
