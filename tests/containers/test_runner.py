"""Server containers: healthy run, fail fast on exit, timeout, Ctrl-C, cleanup; GPU-slot locks; profiles."""

from __future__ import annotations

import grp
import multiprocessing
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from bisectbot.errors import BadInput, ServerError
from bisectbot.run.container import server_container
from bisectbot.runner_profile import docker_run_kwargs, expand, load_profile, parse_profile
from bisectbot.slots import LockTimeout, file_lock, gpu_slot, slot_gpus
from tests.containers import proc_helpers
from tests.containers.conftest import our_containers
from tests.containers.nightly_factory import SERVER_COMMAND

REPO = Path(__file__).resolve().parents[2]


def _cmd(port: int = 8000) -> list[str]:
    return [a.format(port=port, model="demo") for a in SERVER_COMMAND]


def _ours(name: str) -> list[str]:
    p = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}"], capture_output=True, text=True)
    return p.stdout.split()


def _servers() -> list[str]:
    return our_containers("label=bisectbot=server")


def chat(base_url: str, words: int) -> str:
    prompt = " ".join(["word"] * words)
    r = requests.post(f"{base_url}/v1/chat/completions", timeout=30, json={
        "model": "demo", "messages": [{"role": "user", "content": prompt + " What is 2+2?"}], "max_tokens": 50})
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


# ---------------------------------------------------------------------- docker


@pytest.mark.docker
def test_server_healthy_logs_and_removed(nightlies, tmp_path):
    log = tmp_path / "server.log"
    with server_container(nightlies["N1"].pinned, _cmd(), load_profile("cpu"), log_path=log,
                          health_timeout_s=60, env={"HF_TOKEN": "hf_secret"}) as srv:
        assert srv.base_url.startswith("http://127.0.0.1:")
        assert requests.get(srv.base_url + "/health", timeout=5).status_code == 200
        assert chat(srv.base_url, 50)
        name = srv.meta["container"]
        assert _ours(name)
        insp = subprocess.run(["docker", "inspect", "-f", "{{json .HostConfig.PortBindings}}", name],
                              capture_output=True, text=True).stdout
        assert '"HostIp":"127.0.0.1"' in insp  # published on loopback only
    assert _ours(name) == []
    text = log.read_text()
    assert "vllm.serve: starting engine" in text and "hf_secret" not in text


@pytest.mark.docker
def test_exits_early_fails_fast_with_log_tail(nightlies, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(ServerError) as e:
        with server_container(nightlies["N1"].pinned,
                              ["python3", "-c", "import sys\nfor i in range(80): print('line', i)\nsys.exit(3)"],
                              load_profile("cpu"), health_timeout_s=120, log_path=tmp_path / "s.log"):
            pytest.fail("must not become healthy")
    assert time.monotonic() - t0 < 30  # not the 120 s timeout
    msg = str(e.value)
    assert "exited with code 3" in msg and "line 79" in msg and "line 29" not in msg.split("\n", 1)[1]
    assert len(e.value.log_tail) == 50
    assert _servers() == []


@pytest.mark.docker
def test_health_timeout_removes_container(nightlies):
    with pytest.raises(ServerError, match="not healthy after 3 s"):
        with server_container(nightlies["N1"].pinned, ["sleep", "600"], load_profile("cpu"), health_timeout_s=3):
            pass
    assert _servers() == []


@pytest.mark.docker
def test_failure_inside_the_block_still_removes(nightlies):
    name = None
    with pytest.raises(KeyboardInterrupt):
        with server_container(nightlies["N1"].pinned, _cmd(), load_profile("cpu"), health_timeout_s=60) as srv:
            name = srv.meta["container"]
            raise KeyboardInterrupt  # Ctrl-C while the probe runs
    assert name and _ours(name) == []


@pytest.mark.docker
def test_sigterm_removes_container(nightlies):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=proc_helpers.run_and_get_killed, args=(nightlies["N1"].pinned, _cmd(), q))
    p.start()
    name = q.get(timeout=60)
    assert _ours(name)
    p.terminate()  # SIGTERM
    p.join(timeout=30)
    assert _ours(name) == []


@pytest.mark.docker
def test_bad_image_is_server_error(require_docker):
    with pytest.raises(ServerError, match="not found|cannot start"):
        with server_container("bisectbot-test/no-such-image:0", ["true"], load_profile("cpu"), health_timeout_s=5):
            pass


# ---------------------------------------------------------------------- slots and profiles


def test_slot_gpus():
    assert slot_gpus("0-3") == [0, 1, 2, 3] and slot_gpus("4,6") == [4, 6] and slot_gpus("") == []
    with pytest.raises(ValueError):
        slot_gpus("3-1")
    with pytest.raises(ValueError):
        slot_gpus("gpu0")


def test_gpu_slots_exclusive_across_processes(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=proc_helpers.hold_slot, args=(str(tmp_path), ["0-3", "4-7"], ready, release))
    p.start()
    try:
        assert ready.get(timeout=30) == "0-3"
        with gpu_slot(["0-3", "4-7"], lock_dir=tmp_path) as s:
            assert s == "4-7"  # the other process holds 0-3
            with pytest.raises(LockTimeout):
                with gpu_slot(["0-3", "4-7"], lock_dir=tmp_path, timeout_s=0.5, poll_s=0.1):
                    pass
            with pytest.raises(LockTimeout):  # overlapping slot shares GPU 3
                with gpu_slot(["2-3"], lock_dir=tmp_path, timeout_s=0.3, poll_s=0.1):
                    pass
    finally:
        release.put(1)
        p.join(timeout=30)
    with gpu_slot(["0-3"], lock_dir=tmp_path, timeout_s=1) as s:
        assert s == "0-3"  # freed when the holder exited
    with gpu_slot([], lock_dir=tmp_path) as s:
        assert s is None


def test_file_lock_timeout(tmp_path):
    with file_lock("build", lock_dir=tmp_path):
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=proc_helpers.try_lock, args=(str(tmp_path),))
        p.start()
        p.join(timeout=30)
        assert p.exitcode == 7


def test_profiles_load_and_map_to_docker(monkeypatch):
    monkeypatch.setenv("HF_HOME", "/data/hf")
    mi = load_profile("mi355x")
    assert mi.gpu_slots == ["0-3", "4-7"] and mi.slot_env("4-7") == {"HIP_VISIBLE_DEVICES": "4,5,6,7"}
    kw = docker_run_kwargs(mi, "0-3")
    assert kw["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    # the host's GIDs of video/render (they own the device nodes), names only where the host lacks the group
    assert kw["group_add"] == [str(grp.getgrnam(g).gr_gid) if g in {x.gr_name for x in grp.getgrall()} else g
                               for g in ("video", "render")]
    assert kw["ipc_mode"] == "host" and kw["shm_size"] == "16g"
    assert kw["security_opt"] == ["seccomp=unconfined"] and kw["cap_add"] == ["SYS_PTRACE"]
    assert kw["volumes"] == ["/data/hf:/root/.cache/huggingface:rw"]
    assert kw["ulimits"][0]["Name"] == "memlock"
    cpu = load_profile(REPO / "runners" / "cpu.yaml")
    assert cpu.gpu_slots == [] and docker_run_kwargs(cpu) == {"init": True, "shm_size": "1g"}


def test_profile_errors_are_located():
    with pytest.raises(BadInput) as e:
        parse_profile("name: x\ngpu_slots: ['0-3', 'seven']\ndevics: []\n", "p.yaml")
    lines = str(e.value).splitlines()
    assert any(ln.startswith("p.yaml:2:") and "gpu_slots" in ln and "seven" in ln for ln in lines)
    assert any(ln.startswith("p.yaml:3:1: devics: unknown field") for ln in lines)
    with pytest.raises(BadInput, match="not found"):
        load_profile("no-such-profile")


def test_expand():
    env = {"HOME_X": "/h"}
    assert expand("${HF_HOME:-/d/hf}:/c", env) == "/d/hf:/c"
    assert expand("${HOME_X}/a", env) == "/h/a" and expand("$HOME_X/b", env) == "/h/b"


def test_overlay_probe_key_names_the_base_nightly(tmp_path):
    """One vLLM commit overlaid onto the last-good nightly (attribution) and onto the first-bad
    one (the others pinned at the bad end) are two builds: their build keys, hence probe keys,
    differ (they were one cached verdict). A nightly's own key stays empty (its ref is the digest)."""
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import parse_recipe
    from bisectbot.run.container import ContainerRunner

    recipe = parse_recipe("name: k\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                          "server: {command: [serve]}\nrunner: cpu\n")
    runner = ContainerRunner(recipe, load_profile("cpu"), tmp_path)
    lg, fb, sha = "r/x@sha256:" + "1" * 64, "r/x@sha256:" + "2" * 64, "c" * 40
    on_lg = Candidate(CandidateKind.COMMIT, sha, "", "vllm", {"base": lg, "base_commit": "a" * 40})
    on_fb = Candidate(CandidateKind.COMMIT, sha, "", "vllm", {"base": fb, "base_commit": sha})
    assert runner.build_key(on_lg) != runner.build_key(on_fb)
    assert lg in runner.build_key(on_lg) and runner.build_key(on_lg) == runner.build_key(
        Candidate(CandidateKind.COMMIT, sha, "other label", "vllm", dict(on_lg.meta)))
    n1 = runner.build_key(Candidate(CandidateKind.NIGHTLY, "sha256:" + "1" * 64, "n1", "", {"image": lg}))
    n2 = runner.build_key(Candidate(CandidateKind.NIGHTLY, "sha256:" + "2" * 64, "n2", "", {"image": fb}))
    assert n1 == n2 and n1.startswith("image|profile:")  # the ref (digest) names the nightly


@pytest.mark.docker
def test_aiter_can_break_a_nightly(require_docker, base_image):
    """The factory's aiter axis: a lower aiter threshold makes the engine garbage at 3000 tokens."""
    from tests.containers.nightly_factory import NightlySpec, build_nightly

    ref = "bisectbot-test/aiter-broken:1"
    build_nightly(NightlySpec("x", aiter_version="0.1.23.dev88+gb3eed3fd4", aiter_garbage_above=2000), ref,
                  base_image)
    try:
        with server_container(ref, _cmd(), load_profile("cpu"), health_timeout_s=60) as srv:
            assert "the answer is 4" in chat(srv.base_url, 1000)
            assert "the answer is 4" not in chat(srv.base_url, 3000)
    finally:
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True)


def test_container_probe_key_follows_the_patch_stack_content(tmp_path):
    """Editing a carried diff changes what a patched nightly runs, so it must change the probe
    key: the recipe's verdict hash names the patch ids only (a patched nightly's key was ``""``
    and an edited patch reused the old patch's cached verdicts)."""
    import shutil

    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import parse_recipe
    from bisectbot.run.container import ContainerRunner

    stack = tmp_path / "stack"
    shutil.copytree(Path(__file__).resolve().parents[2] / "patches", stack)
    recipe = parse_recipe("name: k\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                          "server: {command: [serve]}\nrunner: cpu\npatches: [aiter-chunkq-clamp]\n")
    nightly = Candidate(CandidateKind.NIGHTLY, "sha256:" + "1" * 64, "n1", "", {"image": "r/x:n1"})
    overlay = Candidate(CandidateKind.COMMIT, "c" * 40, "", "aiter",
                        {"base": "r/x@sha256:" + "1" * 64, "base_commit": "a" * 40})

    def keys() -> tuple[str, str]:
        runner = ContainerRunner(recipe, load_profile("cpu"), tmp_path / "logs", stack_dir=stack)
        return runner.build_key(nightly), runner.build_key(overlay)

    before = keys()
    assert all("|patches:" in k for k in before)
    assert keys() == before  # stable for the same stack
    diff = stack / "aiter-chunkq-clamp" / "v0.1.10.patch"
    diff.write_text(diff.read_text() + "\n")
    after = keys()
    assert after[0] != before[0] and after[1] != before[1]
    unpatched = parse_recipe("name: k\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                             "server: {command: [serve]}\nrunner: cpu\n")
    assert "patches" not in ContainerRunner(unpatched, load_profile("cpu"), tmp_path / "l",
                                            stack_dir=stack).build_key(nightly)


def test_container_probe_key_follows_the_runner_profile_verdict_fields(tmp_path):
    """The recipe names its runner profile; the profile's env and docker options can change a
    verdict (e.g. ``VLLM_ROCM_USE_AITER``), so they are in the probe key. GPU slots only say
    where a probe runs, and ``pass_env`` contributes names, never the host's values."""
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import parse_recipe
    from bisectbot.run.container import ContainerRunner
    from bisectbot.runner_profile import parse_profile

    recipe = parse_recipe("name: k\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                          "server: {command: [serve]}\nrunner: gpu\n")
    nightly = Candidate(CandidateKind.NIGHTLY, "sha256:" + "1" * 64, "n1", "", {"image": "r/x:n1"})
    base = "name: gpu\ndevices: [/dev/kfd]\ngpu_slots: ['0-3', '4-7']\npass_env: [HF_TOKEN]\n"

    def key(text: str) -> str:
        return ContainerRunner(recipe, parse_profile(text, "gpu.yaml"), tmp_path).build_key(nightly)

    k0 = key(base)
    assert key(base.replace("['0-3', '4-7']", "['0-1']")) == k0
    assert key(base + "env: {VLLM_ROCM_USE_AITER: '1'}\n") != k0
    assert key(base.replace("/dev/kfd", "/dev/dri")) != k0
    monkey = dict(os.environ)
    try:
        os.environ["HF_TOKEN"] = "hf_secret_value"
        assert key(base) == k0 and "hf_secret" not in key(base)
    finally:
        os.environ.clear()
        os.environ.update(monkey)
