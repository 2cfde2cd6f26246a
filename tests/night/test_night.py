"""A night in containers (issue 8): the whole nightly flow through ``bisectbot run``.

Real dockerd, the local registry on 127.0.0.1:5000, real git clones of two components, the
contract-following fake GitHub (tests/report/fake_github.py) in a real HTTP server:

* six nightlies of the reference engine (tests/containers/nightly_factory.py) whose vLLM and
  aiter version strings point at commits of two local clones; the regression appears at the
  fourth, and between the third and the fourth both vLLM and aiter changed (aiter is guilty:
  its commit A4 drops the garbage threshold to 3000 prompt tokens);
* every image's aiter runs ``stage1(heads=16)`` at import, which divides by zero unless the
  patch stack's ``aiter-chunkq-clamp`` is applied: the recipe's stack is what makes any
  nightly serve at all;
* night 1: ``bisectbot run --file-issue`` finds the first-bad nightly, probes the mixed
  pairs (new vLLM + old aiter, old vLLM + new aiter), bisects aiter's commits as overlay builds
  on the last-good nightly, verifies A4 and files exactly one issue;
* night 2: a seventh nightly (still bad) is pushed; the same command comments on that issue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import git
import pytest

from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import (
    SERVER_COMMAND,
    NightlySpec,
    aiter_sources,
    push_nightlies,
    vllm_sources,
)
from tests.night.conftest import GH_REPO, TOKEN

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STACK = Path(__file__).parent / "data" / "stack"
RECIPE_NAME = "night-e2e"
# aiter's serving path runs stage 1 at import with 16 heads per rank: ZeroDivisionError unless patched.
AITER_INIT = ("from .ops.triton.attention.pa_mqa_logits import stage1\n\n"
              "stage1(heads=16)  # 16 heads per rank: divides by zero without aiter-chunkq-clamp\n")


def _repo(path: Path) -> git.Repo:
    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")
    return repo


def _commit(repo: git.Repo, files: dict[str, str], message: str) -> str:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message).hexsha


def _package_at(repo: git.Repo, sha: str, pkg: str) -> dict[str, str]:
    """The files of ``pkg/`` at ``sha`` (package-relative path -> text): what a nightly built from it installs."""
    tree = repo.commit(sha).tree / pkg
    return {b.path[len(pkg) + 1:]: b.data_stream.read().decode() for b in tree.traverse() if b.type == "blob"}


def _make_clones(tmp: Path) -> tuple[git.Repo, list[str], git.Repo, list[str]]:
    """vLLM V1..V7 (python-only changes, none guilty); aiter A1..A6 (A4: threshold 3000, the culprit)."""
    vr = _repo(tmp / "vllm")
    v = [_commit(vr, {**{f"vllm/{k}": t for k, t in vllm_sources(1_000_000).items()},
                      "csrc/attention.cu": "// kernel v1\n"}, "Initial fake vLLM (#1)")]
    for i in range(2, 8):
        v.append(_commit(vr, {"vllm/utils.py": f"def helper():\n    return {i}\n"}, f"[Misc] helper v{i} (#{i})"))
    ar = _repo(tmp / "aiter")
    a = [_commit(ar, {**{f"aiter/{k}": t for k, t in aiter_sources(1_000_000).items()},
                      "aiter/__init__.py": AITER_INIT}, "Initial fake aiter (#1)")]
    for i in range(2, 7):
        files = {"aiter/utils.py": f"VERSION = {i}\n"}
        if i == 4:
            files = {"aiter/engine_config.py": aiter_sources(3000)["engine_config.py"]}
        a.append(_commit(ar, files, f"[Triton] {'chunk the MQA logits' if i == 4 else f'tidy v{i}'} (#{i})"))
    return vr, v, ar, a


def _spec(n: int, vr: git.Repo, vsha: str, ar: git.Repo, asha: str) -> NightlySpec:
    return NightlySpec(f"nightly_main_202604{n:02d}", vllm_version=f"0.19.1rc1.dev{n}+g{vsha[:9]}",
                       aiter_version=f"0.1.10.post3.dev{n}+g{asha[:9]}",
                       vllm_files=_package_at(vr, vsha, "vllm"), aiter_files=_package_at(ar, asha, "aiter"))


def _run(state: Path, recipe: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "BISECTBOT_PATCHES_DIR": str(STACK), "GITHUB_TOKEN": TOKEN}
    env.pop("BISECTBOT_GITHUB_TOKEN", None)
    env.pop("GH_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(recipe),
                           "--out", str(out), "--file-issue"], capture_output=True, text=True, env=env, timeout=300)




def test_two_nights_file_one_issue_then_comment(registry, base_image, fake_github, tmp_path) -> None:  # noqa: F811
    vr, v, ar, a = _make_clones(tmp_path)
    pins = [(v[0], a[0]), (v[1], a[0]), (v[2], a[1]), (v[4], a[4]), (v[4], a[5]), (v[5], a[5])]
    specs = [_spec(n, vr, vs, ar, s) for n, (vs, s) in enumerate(pins, start=1)]
    repository = f"bisectbot-test/night-{uuid.uuid4().hex[:8]}"
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    night7 = None
    try:
        # Without the patch stack no nightly serves: aiter's stage 1 divides by zero at import.
        p = subprocess.run(["docker", "run", "--rm", "--network", "none", pushed[0].pinned, "python3", "-c",
                            "import aiter"], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "ZeroDivisionError" in p.stderr, p.stderr

        cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(f"""\
name: {RECIPE_NAME}
model: demo
source: {{kind: registry, registry: "{registry}", repository: {repository}, tag_pattern: "nightly_main_*",
          insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
patches: [aiter-chunkq-clamp]
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {specs[0].tag}
  components:
    vllm: {{repo: "{vr.working_tree_dir}", runtime_paths: [vllm/]}}
    aiter: {{repo: "{ar.working_tree_dir}", runtime_paths: [aiter/]}}
report:
  dir: "{tmp_path / 'out'}"
  github: {{repo: {GH_REPO}, labels: [bisectbot, rocm], api_url: "{fake_github.base_url}", bot_login: bisectbot-app}}
""")
        state = tmp_path / "state"

        # ---- night 1: bisect up to the newest nightly (N6), file one issue
        r1 = _run(state, recipe, tmp_path / "out1")
        assert r1.returncode == 0, r1.stdout + r1.stderr[-6000:]
        res = json.loads((tmp_path / "out1" / "result.json").read_text())
        s1, att, s2 = res["stages"]
        assert [c["label"] for c in s1["candidates"]] == [s.tag for s in specs]
        assert s1["last_good"]["label"] == specs[2].tag and s1["first_bad"]["label"] == specs[3].tag
        # the patch stack was applied to every probed nightly
        assert all(any(x["id"] == "aiter-chunkq-clamp" and x["state"] == "applies" for x in pr["patches"])
                   for pr in s1["probes"]), [pr["patches"] for pr in s1["probes"]]
        # mixed pairs: new vLLM + old aiter is good, old vLLM + new aiter is bad
        pairs = {pr["candidate"]["label"]: pr["verdict"] for pr in att["probes"]}
        assert pairs == {"new vllm + old aiter": "good", "new aiter + old vllm": "bad"}, pairs
        assert att["status"] == "culprit" and "aiter" in att["message"]
        # aiter's commits A2..A5 as overlay builds on the last-good nightly: A4 is the culprit, verified
        assert s2["component"] == "aiter" and s2["status"] == "culprit", s2
        assert [c["ref"] for c in s2["candidates"]] == a[1:5]
        assert s2["first_bad"]["ref"] == a[3] and s2["last_good"]["ref"] == a[2]
        assert all(c["meta"]["base"] == pushed[2].pinned for c in s2["candidates"])
        # a verdict taken from the cache (A5 = the "new aiter" pair) carries this stage's label
        labels = {c["ref"]: c["label"] for c in s2["candidates"]}
        assert all(pr["candidate"]["label"] == labels[pr["candidate"]["ref"]] for pr in s2["probes"])
        (ps,) = res["patch_stack"]
        assert ps["id"] == "aiter-chunkq-clamp" and ps["state"].startswith("applies"), ps
        assert res["status"] == "culprit" and f"culprit: aiter {a[3]}" in r1.stdout and "verified" in r1.stdout
        assert "github: created:" in r1.stdout, r1.stdout
        issues = fake_github.repos[GH_REPO].issues
        assert len(issues) == 1, issues
        (number, issue), = issues.items()
        assert a[3][:9] in issue["body"] and "bisectbot:fingerprint=" in issue["body"]
        assert TOKEN not in issue["body"]

        # ---- night 2: a seventh nightly, still bad: comment on the same issue, file nothing new
        night7 = push_nightlies([_spec(7, vr, v[6], ar, a[5])], repository, registry=registry, base=base_image)
        r2 = _run(state, recipe, tmp_path / "out2")
        assert r2.returncode == 0, r2.stdout + r2.stderr[-6000:]
        res2 = json.loads((tmp_path / "out2" / "result.json").read_text())
        s1b = res2["stages"][0]
        assert s1b["candidates"][-1]["label"] == night7[0].spec.tag
        assert s1b["first_bad"]["label"] == specs[3].tag and res2["stages"][-1]["first_bad"]["ref"] == a[3]
        assert any(pr["candidate"]["label"] == night7[0].spec.tag and pr["verdict"] == "bad" for pr in s1b["probes"])
        assert f"github: commented: commented on #{number}" in r2.stdout, r2.stdout
        assert len(fake_github.repos[GH_REPO].issues) == 1
        comments = fake_github.repos[GH_REPO].comments.get(number, [])
        assert len(comments) == 1 and TOKEN not in comments[0]["body"], comments
    finally:
        # the nightlies and the derived images built on them (by base digest: only this run's)
        ours = pushed + (night7 or [])
        built = [i for p in ours for i in subprocess.run(
            ["docker", "images", "-q", "--filter", f"label=org.bisectbot.base-digest={p.digest}"],
            capture_output=True, text=True).stdout.split()]
        subprocess.run(["docker", "rmi", "-f", *sorted(set(built)), *[x for p in ours for x in (p.ref, p.pinned)]],
                       capture_output=True)
