"""Coupled components inside nightly images (issue 12, input 6): the guilty vLLM commit needs
a new aiter API, so its commits are bisected with aiter pinned at the bad end, i.e. overlaid
onto the first-bad nightly.

Real git histories (vLLM v0..v7, aiter a0..a5), two nightlies built by the containers area's
factory and pushed to the local registry 127.0.0.1:5000, served by the reference engine
through the fake vLLM launcher, run through ``bisectbot run``:

* aiter a4 adds ``aiter.ops.fused`` (an API); vLLM v3 imports it in its launcher (so vLLM
  >= v3 with aiter < a4 cannot start: skip); vLLM v5 drops ``GARBAGE_ABOVE`` to 3000 prompt
  tokens (the regression, a few commits after the coupling);
* good nightly: vllm=v0, aiter=a0; bad nightly: vllm=v7, aiter=a5;
* attribution: "new vLLM + old aiter" is untestable (skip), "new aiter + old vLLM" is good,
  so vLLM's change is needed and vLLM is bisected with aiter at a5: culprit v5, last-good v4.

Pinning aiter at the last-good end (overlays onto the good nightly) would make v3..v7 skips
and leave no culprit; refusing the stage (the state before 507e875) leaves none either.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.containers.conftest import REGISTRY, base_image, registry  # noqa: F401
from tests.containers.nightly_factory import (
    SERVER_COMMAND,
    NightlySpec,
    aiter_sources,
    push_nightlies,
    vllm_sources,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FUSED_API = "def fused_op(x):\n    return x\n"
# vLLM's launcher from v3 on: imports the aiter API that exists from a4 on (before the engine starts)
SERVE_NEEDS_FUSED = vllm_sources()["serve.py"].replace(
    "from vllm.engine_config import GARBAGE_ABOVE\n",
    "from vllm.engine_config import GARBAGE_ABOVE\nfrom aiter.ops.fused import fused_op  # noqa: F401 (aiter >= a4)\n",
)


def _history(kit, path: Path, package: str, base: dict[str, str],
             changes: list[tuple[str, dict[str, str | None]]]) -> list[str]:
    """A git clone holding ``package/`` (the files an image installs): commit 0 is ``base``, then
    one commit per ``(subject, {package-relative path: text or None to delete})``. Returns SHAs."""
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    shas = []
    for subject, files in [("Initial import (#1)", dict(base)), *changes]:
        for rel, text in files.items():
            p = path / package / rel if not rel.startswith("/") else path / rel.lstrip("/")
            if text is None:
                p.unlink()
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "-m", subject)
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def _package_at(kit, repo: Path, sha: str, package: str) -> dict[str, str]:
    """The package's files at ``sha`` (package-relative path -> text): what a nightly built
    from that commit installs."""
    names = kit.git(repo, "ls-tree", "-r", "--name-only", sha, "--", f"{package}/").splitlines()
    return {n[len(package) + 1:]: subprocess.run(["git", "show", f"{sha}:{n}"], cwd=repo, check=True,
                                                 capture_output=True, text=True).stdout for n in names}


@pytest.fixture
def coupled(kit, tmp_path, registry, base_image):  # noqa: F811
    vllm = _history(kit, tmp_path / "vllm", "vllm", vllm_sources(1_000_000), [
        ("[Misc] add helper (#2)", {"utils.py": "def helper():\n    return 1\n"}),
        ("[Doc] readme (#3)", {"/README.md": "fake vllm\n"}),
        ("[ROCm] use aiter fused op (#4)", {"serve.py": SERVE_NEEDS_FUSED}),  # v3: needs aiter >= a4
        ("[Misc] helper 2 (#5)", {"utils.py": "def helper():\n    return 2\n"}),
        ("[ROCm] chunk the sparse indexer prefill (#6)",  # v5: the regression
         {"engine_config.py": vllm_sources(3000)["engine_config.py"]}),
        ("[Misc] drop helper (#7)", {"utils.py": None}),
        ("[Doc] readme 2 (#8)", {"/README.md": "fake vllm 2\n"}),
    ])
    aiter = _history(kit, tmp_path / "aiter", "aiter", aiter_sources(1_000_000), [
        (f"[Tune] rows {i} (#{10 + i})", {"tuned.csv": f"rows,{i}\n"}) for i in (1, 2, 3)
    ] + [
        ("[Feature] fused op API (#14)", {"ops/fused.py": FUSED_API}),  # a4
        ("[Tune] rows 5 (#15)", {"tuned.csv": "rows,5\n"}),
    ])
    assert len(vllm) == 8 and len(aiter) == 6
    repo = f"bisectbot-test/coupled-{uuid.uuid4().hex[:8]}"
    specs = [NightlySpec(tag, vllm_version=f"0.19.1rc1.dev{n}+g{v[:9]}", aiter_version=f"0.1.10.post3.dev{n}+g{a[:9]}",
                         vllm_files=_package_at(kit, tmp_path / "vllm", v, "vllm"),
                         aiter_files=_package_at(kit, tmp_path / "aiter", a, "aiter"))
             for tag, n, v, a in (("nightly_main_20260501", 1, vllm[0], aiter[0]),
                                  ("nightly_main_20260502", 2, vllm[-1], aiter[-1]))]
    pushed = push_nightlies(specs, repo, registry=registry, base=base_image)
    yield {"repository": repo, "vllm": vllm, "aiter": aiter, "good": pushed[0], "bad": pushed[1],
           "vllm_path": tmp_path / "vllm", "aiter_path": tmp_path / "aiter"}
    subprocess.run(["docker", "rmi", "-f", *[p.ref for p in pushed], *[p.pinned for p in pushed]],
                   capture_output=True)


def test_vllm_needing_new_aiter_is_bisected_on_the_first_bad_nightly(coupled, tmp_path, kit) -> None:
    v, a = coupled["vllm"], coupled["aiter"]
    cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
    rec = tmp_path / "recipe.yaml"
    rec.write_text(f"""\
name: coupled-nightlies
model: demo
source: {{kind: registry, registry: "{REGISTRY}", repository: {coupled['repository']},
          tag_pattern: "nightly_main_*", insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {coupled['good'].spec.tag}
  bad: {coupled['bad'].spec.tag}
  components:
    vllm: {{repo: "{coupled['vllm_path']}", runtime_paths: [vllm/]}}
    aiter: {{repo: "{coupled['aiter_path']}", runtime_paths: [aiter/]}}
report: {{dir: "{tmp_path / 'out'}"}}
""")
    p = kit.run_cli("--state", str(tmp_path / "state"), "run", str(rec), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    names = [s["name"] for s in res["stages"]]
    assert names == ["stage 1", "attribution", "vllm commits"], (names, res["stages"][-1].get("message"))
    s1, att, st = res["stages"]
    assert s1["first_bad"]["label"] == coupled["bad"].spec.tag and s1["last_good"]["label"] == coupled["good"].spec.tag
    fb_image = s1["first_bad"]["meta"]["image"]

    # attribution: new vLLM on the good nightly cannot start (no aiter.ops.fused); new aiter there is good
    labels = {pr["candidate"]["label"]: pr for pr in att["probes"]}
    assert labels["new vllm + old aiter"]["verdict"] == "skip", labels["new vllm + old aiter"]
    assert "exited" in labels["new vllm + old aiter"]["reason"]
    assert labels["new aiter + old vllm"]["verdict"] == "good"
    assert "vllm's change is needed" in att["message"] and "aiter at the bad end" in att["message"]

    # the vLLM stage: overlays onto the first-bad nightly, aiter pinned at its bad-end commit
    assert st["component"] == "vllm" and st["status"] == "culprit", st.get("message")
    assert st["first_bad"]["ref"] == v[5] and st["last_good"]["ref"] == v[4]
    for pr in st["probes"]:
        meta = pr["candidate"]["meta"]
        assert meta["base"] == fb_image and meta["base_commit"] == v[-1], meta
        assert meta["commits"] == {"vllm": pr["candidate"]["ref"], "aiter": a[-1]}, meta
    verdicts = {v.index(pr["candidate"]["ref"]): pr["verdict"] for pr in st["probes"]}
    # every vLLM commit probed ran (rolled back from v7 on the first-bad image), none skipped
    assert set(verdicts.values()) <= {"good", "bad"}, verdicts
    assert all((verdicts[i] == "bad") == (i >= 5) for i in verdicts), verdicts
    # v4 (needs aiter >= a4) is the last-good: it only starts with aiter pinned at the bad end
    assert verdicts[4] == "good" and verdicts[5] == "bad"
