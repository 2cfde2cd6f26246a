"""Issue 24, input 1: a runner profile and a recipe that mount one container path.

The shipped MI355X profile mounts ``${HF_HOME:-~/.cache/huggingface}:/root/.cache/huggingface``
and ``runners/install-runner.sh`` sets ``HF_HOME`` in the runner's ``.env``; a recipe mounting
``~/.cache/huggingface:/root/.cache/huggingface`` too made Docker answer ``400 Duplicate mount
point`` for every candidate. Merged by container path, the recipe wins at the runner (the mechanism),
but ``recipe validate`` and ``run`` refuse such a recipe (issue 41, item 1: the recipe's mount silently
replaced the runner's shared cache) and ``runner check --recipe`` warns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import load_recipe
from bisectbot.run.base import Prepared
from bisectbot.run.container import ContainerRunner
from bisectbot.runner_profile import load_profile, merge_mounts
from tests.containers.conftest import REGISTRY
from tests.containers.nightly_factory import SERVER_COMMAND

TARGET = "/root/.cache/huggingface"


def _layout(tmp_path: Path, repository: str, recipe_target: str = TARGET) -> tuple[Path, dict[str, str]]:
    """A deployment as the README sets it up: ``runners/hfbox.yaml`` (the MI355X profile's mount),
    ``HF_HOME`` as install-runner.sh writes it, and a recipe that mounts ``~/.cache/huggingface``."""
    home = tmp_path / "home"
    runner_hf = tmp_path / "var-lib-bisectbot-hf"
    recipe_hf = home / ".cache" / "huggingface"
    for d, who in ((runner_hf, "profile"), (recipe_hf, "recipe")):
        d.mkdir(parents=True)
        (d / "whose").write_text(who)
    (tmp_path / "runners").mkdir()
    (tmp_path / "runners" / "hfbox.yaml").write_text(
        "name: hfbox\nshm_size: 1g\nmounts:\n  - ${HF_HOME:-~/.cache/huggingface}:/root/.cache/huggingface\n"
        "pass_env: [HF_TOKEN]\n")
    # the server starts only when the recipe's cache is the one mounted at the container path
    check = f"test \"$(cat {TARGET}/whose)\" = recipe || exit 3; exec " + " ".join(SERVER_COMMAND)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"""\
name: hf-mounts
model: demo
source: {{kind: registry, registry: "{REGISTRY}", repository: "{repository}", tag_pattern: "nightly_main_*", insecure: true}}
server:
  command: [sh, -c, {json.dumps(check)}]
  port: 8000
  health_timeout_s: 60
  mounts: ["~/.cache/huggingface:{recipe_target}"]
runner: hfbox
""")
    env = {"HOME": str(home), "HF_HOME": str(runner_hf), "BISECTBOT_RUNNERS": str(tmp_path / "runners")}
    return recipe, env


def bb(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env, "BISECTBOT_STATE": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=full,
                          timeout=180, cwd=tmp_path)


def test_merge_by_container_path_recipe_wins(tmp_path, monkeypatch):
    recipe, env = _layout(tmp_path, "x/y", recipe_target=TARGET + "/")  # /a/b/ is /a/b to Docker
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = load_recipe(recipe)
    plan = merge_mounts(load_profile("hfbox", recipe), list(r.server.mounts))
    assert [(b.host, b.container, b.origin) for b in plan.binds] == [(env["HOME"] + "/.cache/huggingface", TARGET,
                                                                      "recipe")]
    assert len(plan.replaced) == 1 and env["HF_HOME"] in plan.replaced[0] and "recipe" in plan.replaced[0]


@pytest.mark.docker
def test_clash_runs_with_the_recipe_mount_and_is_reported(nightlies, tmp_path, monkeypatch):
    recipe, env = _layout(tmp_path, nightlies["repository"])
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = load_recipe(recipe)
    n1 = nightlies["N1"]
    runner = ContainerRunner(r, load_profile(r.runner, recipe), log_dir=tmp_path / "logs")
    prepared = Prepared(Candidate(CandidateKind.NIGHTLY, n1.digest, n1.spec.tag, "image"), build_key=n1.digest,
                        image=n1.pinned)
    from bisectbot import progress

    lines: list[str] = []
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    progress.enable(lines.append)  # issue 24, input 7: the server start's phase and heartbeat
    try:
        with progress.probe("N1"), runner.server(prepared) as srv:  # before: ServerError "Duplicate mount point"
            assert requests.get(srv.base_url + "/health", timeout=5).status_code == 200
            mounts = json.loads(subprocess.run(["docker", "inspect", "-f", "{{json .Mounts}}",
                                                srv.meta["container"]],
                                               capture_output=True, text=True, check=True).stdout)
    finally:
        progress.enable(None)
    assert any(ln.startswith("probe N1 [") and "server start" in ln and " done in " in ln for ln in lines), lines
    assert any("waiting for /health" in ln for ln in lines), lines
    # the recipe's mount wins the clash; beside it only the candidate's keyed compile caches (issue 40)
    assert [(m["Source"], m["Destination"]) for m in mounts
            if not m["Destination"].startswith("/var/cache/bisectbot/")] == [(env["HOME"] + "/.cache/huggingface", TARGET)]
    assert sorted(m["Destination"] for m in mounts if m["Destination"].startswith("/var/cache/bisectbot/")) == [
        "/var/cache/bisectbot/aiter", "/var/cache/bisectbot/inductor", "/var/cache/bisectbot/triton",
        "/var/cache/bisectbot/vllm"]

    # recipe validate: a problem naming both mounts and what to do, exit 2 (issue 41 item 1: the recipe's
    # mount silently replaced the runner's shared $HF_HOME; `run` refuses it the same way, below)
    v = bb(env, tmp_path, "--json", "recipe", "validate", str(recipe))
    doc = json.loads(v.stdout)
    assert v.returncode == 2, v.stdout + v.stderr
    w = doc["error"]["message"]
    assert w.startswith(f"{recipe}:") and "server.mounts[0]" in w and env["HF_HOME"] in w and TARGET in w, w
    assert "mount clash" in w and "remove this mount" in w, w

    # runner check --recipe: the profile comes from the recipe; the clash is a warn row
    c = bb(env, tmp_path, "runner", "check", "--recipe", str(recipe))
    assert "profile" in c.stdout and "hfbox" in c.stdout
    [row] = [ln for ln in c.stdout.splitlines() if " mounts " in f" {ln} "]
    assert row.startswith("warn") and env["HF_HOME"] in row and "replaces" in row

    # run (and its plan) refuse it with the same line, before anything is pulled
    p = bb(env, tmp_path, "run", str(recipe), "--good", n1.spec.tag, "--bad", nightlies["N3"].spec.tag, "--dry-run")
    assert p.returncode == 2 and "server.mounts[0]" in p.stderr and "mount clash" in p.stderr, p.stdout + p.stderr

    # the same bind as the profile's (HF_HOME is the recipe's host path) is no clash: one bind, a plan
    same = {**env, "HF_HOME": env["HOME"] + "/.cache/huggingface"}
    assert bb(same, tmp_path, "recipe", "validate", str(recipe)).returncode == 0
    p = bb(same, tmp_path, "run", str(recipe), "--good", n1.spec.tag, "--bad", nightlies["N3"].spec.tag, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(f":{TARGET}:rw") == 1 and "mount clash" not in p.stdout, p.stdout


def test_two_recipe_mounts_on_one_path_are_refused(tmp_path):
    recipe, env = _layout(tmp_path, "x/y")
    text = recipe.read_text().replace(f'mounts: ["~/.cache/huggingface:{TARGET}"]',
                                      f'mounts: ["~/.cache/huggingface:{TARGET}", "/srv/hf:{TARGET}/:ro"]')
    recipe.write_text(text)
    v = bb(env, tmp_path, "--json", "recipe", "validate", str(recipe))
    doc = json.loads(v.stdout)
    assert v.returncode == 2 and doc == {"error": doc["error"], "exit_code": 2}  # the --json failure contract
    assert "server.mounts" in doc["error"]["message"] and "both mount the container path" in doc["error"]["message"]


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="needs a host without the AMD GPU driver")
def test_runner_check_json_failure_has_the_documented_shape(tmp_path):
    """Issue 24, input 6: a failed ``runner check --json`` is ``{"error": {...}, "exit_code": 1}``."""
    r = bb({}, tmp_path, "--json", "runner", "check", "--profile", "mi355x")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc == {"error": doc["error"], "exit_code": 1}
    assert doc["error"]["kind"] == "runner check" and "device /dev/kfd: missing" in doc["error"]["message"]


def test_runner_check_disk_uses_the_profile_min_free_gb(tmp_path):
    """Deployment finding 8: one disk figure. ``runner check`` fails the Docker data root below the
    profile's ``min_free_gb`` and names it; the shipped mi355x profile and install-runner.sh's default
    are the same figure."""
    import shutil

    (tmp_path / "runners").mkdir()
    for name, gb in (("roomy", 0), ("greedy", 10 ** 9)):
        (tmp_path / "runners" / f"{name}.yaml").write_text(f"name: {name}\nshm_size: 1g\nmin_free_gb: {gb}\n")
    env = {"BISECTBOT_RUNNERS": str(tmp_path / "runners")}
    ok = bb(env, tmp_path, "--json", "runner", "check", "--profile", "roomy")
    disk = {c["name"]: c for c in json.loads(ok.stdout)}["disk docker"]
    assert ok.returncode == 0 and disk["ok"] and "profile roomy needs 0 GB: min_free_gb" in disk["detail"], disk
    bad = bb(env, tmp_path, "--json", "runner", "check", "--profile", "greedy")
    msg = json.loads(bad.stdout)["error"]["message"]
    assert bad.returncode == 1 and "disk docker" in msg and "needs 1e+09 GB: min_free_gb" in msg, msg
    # the shipped figure, and the installer's default read from it
    root = Path(__file__).resolve().parents[2]
    gb = int(load_profile("mi355x").min_free_gb)
    assert gb == 2000
    dry = subprocess.run(["bash", str(root / "runners" / "install-runner.sh"), "--repo", "o/r", "--dry-run",
                          "--dir", str(tmp_path / "runner")], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    free = shutil.disk_usage(tmp_path).free // 10 ** 9
    assert dry.returncode == 0 and (free >= gb or f"< {gb} GB: min_free_gb of runners/mi355x.yaml" in dry.stderr)
    assert f"{gb}" in (root / "runners" / "README.md").read_text().split("## Register")[0]
