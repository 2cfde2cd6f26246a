"""The first real night (issue 24): ``nightly.yml`` under ``act`` with the SHIPPED ``runners/mi355x.yaml``
and the SHIPPED ``recipes/glm51-fp8-sparse-mla-prefill.yaml``, set up as ``runners/README.md`` says.

What a new user has, and what stands in for what this machine lacks:

* The deployment is the checkout as it ships: no recipe added or edited, the workflows byte for byte
  (``make_deployment``). The night is the schedule's: ``all`` = every recipe with ``nightly: true``.
* The runner's environment is the ``.env`` ``runners/install-runner.sh`` writes (its ``--dry-run``
  prints it; run here with ``--state``/``--hf-home`` under the test's directory and
  ``--registry-mirror``, the documented way to fetch the nightlies from a local registry).
* The nightlies: ``rocm/vllm-dev:nightly_main_*`` images pushed under the mirror's prefix in the
  registry on 127.0.0.1 (``BISECTBOT_REGISTRY_PORT``); their server is the reference engine behind a
  stand-in ``vllm serve`` that refuses to start, as a ROCm vLLM would, without ``/dev/kfd``,
  ``/dev/dri``, the Hugging Face cache mount, ``VLLM_ROCM_USE_AITER=1`` and as many GPUs in
  ``HIP_VISIBLE_DEVICES`` as the recipe's ``-tp 4``: each comes from the runner profile. They carry
  the files the recipe's three patches apply to (vLLM 0.19's sparse-MLA indexer and aiter
  v0.1.10's ``pa_mqa_logits`` stage 1, as the lines the diffs touch), so every candidate is built with
  the shipped patch stack. N3 turns to garbage above 12,000 prompt tokens.
* What this host lacks, in the runner's overrides (``BISECTBOT_RUNNER_OVERRIDES``, runners/README.md),
  never in a copy of the profile: the device nodes (``kfd`` and ``dri``, symlinks to ``/dev/null``
  in a temporary directory, passed as ``/dev/kfd`` and ``/dev/dri``) and, when this host's hard
  limit cannot be raised (a sandboxed VM), memlock at that limit instead of unlimited. Every other
  field -- groups, ipc, shm, seccomp, SYS_PTRACE, GPU slots, ``HIP_VISIBLE_DEVICES``, env, the HF
  mount, ``pass_env`` -- is the shipped file's.
* vLLM's git history: the recipe's ``bisect.components.vllm`` is ``https://github.com/vllm-project/vllm.git``;
  the runner user's git config maps it to a local fake history (``url.<mirror>.insteadOf``, what a
  host with a git mirror sets), whose commits the nightlies' versions name (``+g<sha>``).
* GitHub: the recipe files into ``vllm-project/vllm`` on api.github.com, which this machine cannot
  reach; the repository has no ``BISECTBOT_GITHUB_TOKEN`` secret yet, so filing is the dry run
  (the would-be issue). Filing against a fake GitHub is ``test_nightly_act.py``'s.
* The repository variable ``BISECTBOT_SHARED_VENV=true``: the probing job reuses the runner's
  virtualenv instead of building its own (45 s here on 2 loaded cores); the default, a fresh one, is
  ``test_token_walk_act.py``'s.

Green: every job succeeds; the night names N3 as the first bad nightly and the vLLM commit that set
the threshold as the culprit, every candidate built with the three patches applied.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import time
import uuid
from pathlib import Path

import git
import pytest

from bisectbot.runner_profile import OVERRIDES_ENV
from tests.act.actkit import DEPLOY_REPO, ROOT, make_deployment, run_act
from tests.act.actnight import cleanup
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import NightlySpec, push_nightlies, vllm_sources
from tests.installed.test_installed import exe
from tests.patches.patches_fixtures import AITER_TAG_FORM

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RECIPE = "glm51-fp8-sparse-mla-prefill"
VLLM_URL = "https://github.com/vllm-project/vllm.git"  # the recipe's bisect.components.vllm.repo
MLA_SPARSE = "v1/attention/ops/rocm_aiter_mla_sparse.py"
AITER_STAGE1 = "ops/triton/attention/pa_mqa_logits.py"

MLA_SPARSE_0_19 = '''\
# Stand-in of vLLM 0.19.1's vllm/v1/attention/ops/rocm_aiter_mla_sparse.py: the lines the shipped
# patches (patches/vllm-sparse-mla-*/v0.19.patch) touch or use as context, in stub functions so the
# patched file compiles. Nothing imports it: the server is the reference engine.
import torch

from vllm import _custom_ops as ops
from vllm.platforms import current_platform


def rocm_fp8_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke):
    return q


def rocm_aiter_sparse_attn_indexer_fake(hidden_states, k_cache_prefix, *args):
    return hidden_states


def rocm_aiter_sparse_attn_indexer(hidden_states, k_cache_prefix, kv_cache, q_fp8, k, weights, head_dim,
                                   total_seq_lens, topk_indices_buffer, attn_metadata=None, has_prefill=True):
    fp8_dtype = current_platform.fp8_dtype()
    # assert isinstance(attn_metadata, dict)
    if not isinstance(attn_metadata, dict):
        return rocm_aiter_sparse_attn_indexer_fake(
            hidden_states,
            k_cache_prefix,
        )
    topk_indices_buffer[: hidden_states.shape[0]] = -1
    if has_prefill:
        prefill_metadata = attn_metadata.prefill
        for chunk in prefill_metadata.chunks:
            k_fp8 = torch.empty(
                [chunk.total_seq_lens, head_dim],
                device=k.device,
                dtype=fp8_dtype,
            )
            k_scale = torch.empty(
                [chunk.total_seq_lens, 4],
                device=k.device,
                dtype=torch.uint8,
            )

            ops.cp_gather_indexer_k_quant_cache(
                kv_cache,
                k_fp8,
                k_scale,
                chunk.block_table,
                chunk.cu_seq_lens,
            )

            logits = rocm_fp8_mqa_logits(
                q_fp8[chunk.token_start : chunk.token_end],
                (k_fp8, k_scale.view(torch.float32)),
                weights[chunk.token_start : chunk.token_end],
                chunk.cu_seqlen_ks,
                chunk.cu_seqlen_ke,
            )
            topk_indices_buffer[chunk.token_start : chunk.token_end] = logits
    return topk_indices_buffer
'''

#: what a ROCm vLLM needs of its container, all from runners/mi355x.yaml (NightlySpec.require)
ROCM_NEEDS = {"paths": ["/dev/kfd", "/dev/dri", "/root/.cache/huggingface"], "env": {"VLLM_ROCM_USE_AITER": "1"},
              "gpus_env": "HIP_VISIBLE_DEVICES"}


def vllm_history(path: Path) -> dict[str, str]:
    """A fake vLLM history: A (healthy) -> B (python-only) -> C (garbage above 12,000 prompt tokens).
    Returns ``{"A", "B", "C"}`` SHAs."""
    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")

    def commit(files: dict[str, str], message: str) -> str:
        for rel, text in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
            repo.index.add([rel])
        return repo.index.commit(message).hexsha

    a = commit({**{f"vllm/{k}": v for k, v in vllm_sources(1_000_000).items()}, f"vllm/{MLA_SPARSE}": MLA_SPARSE_0_19},
               "Initial fake vLLM (#1)")
    b = commit({"vllm/utils.py": "def helper():\n    return 1\n"}, "[Misc] add helper (#2)")
    c = commit({"vllm/engine_config.py": vllm_sources(12_000)["engine_config.py"]},
               "[ROCm] chunk the sparse indexer prefill (#3)")
    return {"A": a, "B": b, "C": c}


def nightly(n: int, sha: str, garbage_above: int, helper: bool) -> NightlySpec:
    files = {MLA_SPARSE: MLA_SPARSE_0_19, **({"utils.py": "def helper():\n    return 1\n"} if helper else {})}
    return NightlySpec(f"nightly_main_202605{n:02d}", vllm_version=f"0.19.1rc1.dev{n}+g{sha[:9]}",
                       garbage_above=garbage_above, vllm_files=files, aiter_files={AITER_STAGE1: AITER_TAG_FORM},
                       require=ROCM_NEEDS)


def runner_env(tmp: Path, mirror: str) -> dict[str, str]:
    """The ``.env`` ``runners/install-runner.sh`` writes (its dry run prints it), under ``tmp``."""
    p = subprocess.run(["bash", str(ROOT / "runners" / "install-runner.sh"), "--repo", DEPLOY_REPO,
                        "--labels", "linux,mi355x", "--dir", str(tmp / "runner"), "--state", str(tmp / "state"),
                        "--hf-home", str(tmp / "hf"), "--registry-mirror", mirror, "--dry-run"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    m = re.search(r"^\+ write .*/\.env:\n((?:[A-Z_]+=.*\n)+)", p.stdout, re.MULTILINE)
    assert m, p.stdout
    return dict(line.split("=", 1) for line in m.group(1).splitlines())


def host_overrides(tmp: Path) -> Path:
    """The runner's overrides of ``mi355x.yaml`` for what this host lacks (no GPU; maybe no unlimited memlock)."""
    dev = tmp / "dev"
    dev.mkdir()
    for name in ("kfd", "dri"):
        (dev / name).symlink_to("/dev/null")
    fields: dict = {"devices": [f"{dev}/kfd:/dev/kfd", f"{dev}/dri:/dev/dri"]}
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard != resource.RLIM_INFINITY:
        try:  # root may raise it (Docker does, for memlock: -1); a sandbox may refuse even root
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, resource.RLIM_INFINITY))
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
        except (OSError, ValueError):
            fields["ulimits"] = {"memlock": hard}
    path = tmp / "runner-overrides.yaml"
    path.write_text(json.dumps({"mi355x": fields}))  # JSON is YAML
    return path


def test_first_night_of_the_glm_recipe_on_the_mi355x_profile(registry, base_image, tmp_path) -> None:  # noqa: F811
    t0 = time.monotonic()
    prefix = f"bisectbot-test/night-{uuid.uuid4().hex[:8]}"
    shas = vllm_history(tmp_path / "vllm-mirror")
    specs = [nightly(1, shas["A"], 1_000_000, False), nightly(2, shas["B"], 1_000_000, True),
             nightly(3, shas["C"], 12_000, True)]
    pushed = push_nightlies(specs, f"{prefix}/rocm/vllm-dev", registry=registry, base=base_image)
    try:
        env = runner_env(tmp_path, f"http://{registry}/{prefix}")
        assert set(env) == {"BISECTBOT_STATE", "HF_HOME", "XDG_CACHE_HOME", "BISECTBOT_REGISTRY_MIRROR"}, env
        env["XDG_CACHE_HOME"] = str(tmp_path / "home" / ".cache")  # the runner user's home (/home/bisectbot)
        # the runner user's git config: vLLM's repository from the host's git mirror
        gitconfig = tmp_path / "home" / ".gitconfig"
        gitconfig.parent.mkdir(parents=True)
        subprocess.run(["git", "config", "--file", str(gitconfig), f"url.{(tmp_path / 'vllm-mirror').as_uri()}.insteadOf",
                        VLLM_URL], check=True)
        env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
        env[OVERRIDES_ENV] = str(host_overrides(tmp_path))
        deploy = make_deployment(tmp_path / "deploy", {})  # the shipped recipes, none added
        assert (deploy / "recipes" / f"{RECIPE}.yaml").read_bytes() == (ROOT / "recipes" / f"{RECIPE}.yaml").read_bytes()
        assert (deploy / "runners" / "mi355x.yaml").read_bytes() == (ROOT / "runners" / "mi355x.yaml").read_bytes()

        # runners/README.md, before the first night: `bisectbot runner check --recipe ...` (the device checks pass;
        # this host has no amd-smi and 8 GPUs to count) and `bisectbot recipe validate recipes/*.yaml`
        check = subprocess.run([exe(), "--json", "runner", "check", "--recipe",
                                f"recipes/{RECIPE}.yaml"], cwd=deploy, env={**os.environ, **env},
                               capture_output=True, text=True, timeout=120)
        checks = {c["name"]: c for c in json.loads(check.stdout)} if check.stdout.startswith("[") else {}
        if not checks:  # a failed required check: the error document names them
            msg = json.loads(check.stdout)["error"]["message"]
            assert "device" not in msg and "mounts" not in msg, msg
        else:
            assert all(checks[f"device {tmp_path}/dev/{n}"]["ok"] for n in ("kfd", "dri")), checks

        validate = subprocess.run([exe(), "recipe", "validate", *sorted(str(p.relative_to(deploy)) for p in
                                                                     (deploy / "recipes").glob("*.yaml"))],
                                  cwd=deploy, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        assert validate.returncode == 0 and "warning" not in validate.stdout + validate.stderr, validate

        art = tmp_path / "artifacts"
        art.mkdir()
        run = run_act(deploy, "nightly.yml", "schedule", {}, tmp=tmp_path, token=None, state=Path(env["BISECTBOT_STATE"]),
                      artifacts=art, bot_login="bisectbot-app",
                      env={k: v for k, v in env.items() if k != "BISECTBOT_STATE"},
                      # a deployment that publishes its dashboard (the pages job runs only then: issue 41 item 4)
                      variables={"BISECTBOT_PAGES_URL": "https://bisectbot-test.github.io/deploy"})
        print(f"act nightly.yml schedule: rc {run.returncode} in {run.seconds:.0f} s; steps {run.step_seconds()}")
        (tmp_path / "act-output.log").write_text(run.output)
        assert run.returncode == 0, run.tail(12000)
        started = run.jobs_started()
        for job in ("nightly/recipes", "nightly/commands", "nightly/nightly", "nightly/file", "nightly/dashboard"):
            assert any(s.startswith(job) for s in started), (job, started)
        assert f"tonight: {RECIPE}" in run.output

        (uploaded,) = [p for p in art.iterdir() if p.name.startswith(f"bisectbot-{RECIPE}-")]
        res = json.loads((uploaded / "result.json").read_text())
        nightlies = res["stages"][0]
        assert nightlies["first_bad"]["label"] == specs[2].tag and nightlies["last_good"]["label"] == specs[1].tag, res
        final = res["stages"][-1]
        assert final["first_bad"]["ref"] == shas["C"] and res["status"] == "culprit", json.dumps(res)[:4000]
        probes = [p for st in res["stages"] for p in st["probes"]]
        assert probes and all({x["id"]: x["state"].startswith("applies") for x in p["patches"]} ==
                              {"aiter-chunkq-clamp": True, "vllm-sparse-mla-workspace": True,
                               "vllm-sparse-mla-skip-kv-gather": True} for p in probes), probes[0]["patches"]
        issue = (uploaded / "issue.md").read_text()  # the would-be issue: no token, a dry run
        assert shas["C"] in issue and specs[2].tag.replace("_", "\\_") in issue, issue[:2000]
    finally:
        cleanup(pushed)
        print(f"test wall time {time.monotonic() - t0:.0f} s")
