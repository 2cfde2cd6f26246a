"""Derived images: overlay at a commit, full-source-build refusal, patch stack at build time, reuse."""

from __future__ import annotations

import subprocess

import pytest

from bisectbot.build import BuildRequest, FullSourceBuildRequired, Overlay, _default_patch_fn, build_image
from bisectbot.errors import BuildError, PatchError
from bisectbot.run.container import run_in_container, stack_hash
from bisectbot.runner_profile import load_profile

pytestmark = pytest.mark.docker


def _read_in(image: str, code: str) -> str:
    r = run_in_container(image, ["python3", "-c", code], load_profile("cpu"), timeout_s=60)
    assert r.returncode == 0, r.stderr_tail
    return r.stdout_tail.strip()


THRESHOLD = "from vllm.engine_config import GARBAGE_ABOVE; print(GARBAGE_ABOVE)"


@pytest.fixture(scope="module")
def built_images():
    made: list[str] = []
    yield made
    if made:
        subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)


def test_overlay_python_only(nightlies, vllm_repo, tmp_path, built_images):
    n2 = nightlies["N2"]  # built from commit B
    req = BuildRequest(base=n2.pinned, recipe="t-overlay", overlay=Overlay("vllm", vllm_repo["path"], vllm_repo["C"]),
                       log_dir=tmp_path / "logs")
    res = build_image(req)
    built_images.append(res.tag)
    assert not res.reused and res.tag.startswith("bisectbot/t-overlay:")
    assert res.changed_files == ["/usr/local/lib/python3.11/dist-packages/vllm/engine_config.py"]
    assert res.labels["org.bisectbot.overlay"] == f"vllm@{vllm_repo['C']}"
    assert res.labels["org.bisectbot.base-digest"] == n2.digest
    assert (tmp_path / "logs" / f"build-{res.key}.log").read_text()
    assert _read_in(res.tag, THRESHOLD) == "3000"  # the overlay changed the behaviour
    again = build_image(req)
    assert again.reused and again.tag == res.tag  # content-addressed


def test_overlay_with_compiled_change_requires_full_build(nightlies, vllm_repo):
    req = BuildRequest(base=nightlies["N2"].pinned, recipe="t-overlay",
                       overlay=Overlay("vllm", vllm_repo["path"], vllm_repo["D"]))
    with pytest.raises(FullSourceBuildRequired) as e:
        build_image(req)
    assert "full source build required" in str(e.value) and "csrc/attention.cu" in str(e.value)


def test_overlay_unknown_commit(nightlies, vllm_repo):
    req = BuildRequest(base=nightlies["N2"].pinned, recipe="t-overlay",
                       overlay=Overlay("vllm", vllm_repo["path"], "0" * 40))
    with pytest.raises(BuildError, match="not found"):
        build_image(req)


def test_full_source_build_with_build_command(nightlies, vllm_repo, built_images):
    """With a build command the whole tree at the target commit goes into the image and the command
    runs at build time (here it installs the python package over the base's)."""
    cmd = ["sh", "-c", "cp -r vllm/. /usr/local/lib/python3.11/dist-packages/vllm/"]
    req = BuildRequest(base=nightlies["N2"].pinned, recipe="t-full",
                       overlay=Overlay("vllm", vllm_repo["path"], vllm_repo["D"]), build_command=cmd)
    res = build_image(req)
    built_images.append(res.tag)
    assert _read_in(res.tag, "from vllm.utils import helper; print(helper())") == "2"


def test_patch_stack_applied_at_build_time(nightlies, stack_dir, tmp_path, built_images):
    n3 = nightlies["N3"]
    ids = ["vllm-threshold-fix"]
    req = BuildRequest(base=n3.pinned, recipe="t-patch", patch_ids=ids, stack_hash=stack_hash(stack_dir, ids),
                       patch_fn=_default_patch_fn(stack_dir, ids), log_dir=tmp_path)
    res = build_image(req)
    built_images.append(res.tag)
    assert _read_in(res.tag, THRESHOLD) == "1000000"
    assert _read_in(n3.pinned, THRESHOLD) == "3000"  # the base is untouched
    assert [p["id"] for p in res.patches] == ids and res.patches[0]["state"] == "applies"
    assert res.labels["org.bisectbot.stack-hash"] == req.stack_hash and req.stack_hash
    assert res.labels["org.bisectbot.patches"] == "vllm-threshold-fix"


def test_patch_already_upstream_changes_nothing(nightlies, stack_dir):
    """N1 already has GARBAGE_ABOVE = 1000000: the stack's upstream detector says so and the
    derived image carries no changed file."""
    n1 = nightlies["N1"]
    ids = ["vllm-threshold-fix"]
    req = BuildRequest(base=n1.pinned, recipe="t-patch", patch_ids=ids, stack_hash=stack_hash(stack_dir, ids),
                       patch_fn=_default_patch_fn(stack_dir, ids))
    res = build_image(req)
    subprocess.run(["docker", "rmi", "-f", res.tag], capture_output=True)
    assert res.patches[0]["state"] == "already-upstream"
    assert res.changed_files == []


def test_required_patch_conflict_raises(nightlies, tmp_path):
    """A required patch whose context is absent fails the build with the patch error."""
    d = tmp_path / "stack"
    (d / "p").mkdir(parents=True)
    (d / "stack.yaml").write_text(
        "version: 1\npatches:\n  - id: bad\n    package: vllm\n    path: engine_config.py\n    required: true\n"
        "    variants:\n      - id: v1\n        diff: p/v1.patch\n")
    (d / "p" / "v1.patch").write_text(
        "--- a/vllm/engine_config.py\n+++ b/vllm/engine_config.py\n@@ -1,2 +1,2 @@\n"
        " # something else entirely\n-NOT_THERE = 1\n+NOT_THERE = 2\n")
    req = BuildRequest(base=nightlies["N3"].pinned, recipe="t-patch", patch_ids=["bad"],
                       stack_hash=stack_hash(d, ["bad"]), patch_fn=_default_patch_fn(d, ["bad"]))
    with pytest.raises(PatchError) as e:
        build_image(req)
    assert "bad" in str(e.value)


def test_runner_prepare_commit_candidates(nightlies, vllm_repo, tmp_path, recipe_file, stack_dir):
    """The CandidateRunner view: a python-only commit builds; a compiled change is ``skip`` with the reason."""
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import load_recipe
    from bisectbot.run.base import Prepared, PrepareFailed
    from bisectbot.run.container import ContainerRunner

    recipe_file.write_text(recipe_file.read_text()
                           + f"bisect:\n  components:\n    vllm:\n      repo: {vllm_repo['path']}\n")
    recipe = load_recipe(recipe_file)
    runner = ContainerRunner(recipe, load_profile("cpu"), log_dir=tmp_path, stack_dir=stack_dir)
    base = nightlies["N2"].pinned
    skip = runner.prepare(Candidate(CandidateKind.COMMIT, vllm_repo["D"], "D", "vllm", {"base": base}))
    assert isinstance(skip, PrepareFailed) and "full source build required" in skip.reason
    ok = runner.prepare(Candidate(CandidateKind.COMMIT, vllm_repo["C"], "C", "vllm", {"base": base}))
    assert isinstance(ok, Prepared), getattr(ok, "reason", "")
    try:
        # overlay C (threshold 3000) then the stack's fix (back to 1000000)
        assert _read_in(ok.image, THRESHOLD) == "1000000"
        assert ok.patches[0]["state"] == "applies" and ok.build_key.startswith(nightlies["N2"].digest)
    finally:
        subprocess.run(["docker", "rmi", "-f", ok.image], capture_output=True)
