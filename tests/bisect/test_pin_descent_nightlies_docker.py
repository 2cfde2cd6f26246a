"""Descent through pins from the nightly stage (issue 26), through the container runner.

Two nightlies built by the containers area's factory and pushed to the local registry
127.0.0.1:5000 differ only in aiter: vLLM is the same commit, aiter is ``0.1.21.post2`` in the good
one and ``0.1.22`` in the bad one (``/app/versions.txt``: ``AITER_BRANCH: v0.1.21.post2`` ->
``v0.1.22``, as ``Dockerfile.rocm_base`` writes it). aiter's history was rewritten between the two
tags (the old tag's root is not the new tag's, as for aiter's v0.1.11.post1 / v0.1.12), and aiter
commit a6 lowers the prompt size above which the output is garbage to 3,000 tokens. The pin
descent reads both images' pins, maps the old tag onto the new history by PR number, and bisects
aiter with the rest of the image held at the first-bad nightly: a6, last good a5.
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
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _commit(kit, repo: Path, subject: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = repo / "aiter" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    kit.git(repo, "add", "-A")
    kit.git(repo, "commit", "-q", "-m", subject)
    return kit.git(repo, "rev-parse", "HEAD")


def _package_at(kit, repo: Path, sha: str) -> dict[str, str]:
    names = kit.git(repo, "ls-tree", "-r", "--name-only", sha, "--", "aiter/").splitlines()
    return {n[len("aiter/"):]: subprocess.run(["git", "show", f"{sha}:{n}"], cwd=repo, check=True,
                                              capture_output=True, text=True).stdout for n in names}


@pytest.fixture
def rewritten_aiter(kit, tmp_path, registry, base_image):  # noqa: F811
    repo = tmp_path / "aiter"
    repo.mkdir()
    kit.git(repo, "init", "-q", "-b", "main")
    base = aiter_sources(1_000_000)
    old = [_commit(kit, repo, "Initial import (#4000)", base)]
    old += [_commit(kit, repo, f"[Tune] rows {i} (#{4000 + i})", {"tuned.csv": f"rows,{i}\n"}) for i in (1, 2)]
    old.append(_commit(kit, repo, "Prepare v0.1.21.post2 release", {"version.txt": "0.1.21.post2\n"}))
    kit.git(repo, "tag", "v0.1.21.post2")
    kit.git(repo, "checkout", "-q", "--orphan", "rewritten")
    kit.git(repo, "rm", "-rqf", "--", ".")
    # the rewritten root: the same changes under other SHAs (a tree of its own, as after aiter's rewrite)
    new = [_commit(kit, repo, "Initial import (#4000)", {**base, "NOTICE": "history rewritten\n"})]
    for i in range(1, 10):
        files = {"tuned.csv": f"rows,{i}\n"}
        if i == 6:  # the regression
            files["engine_config.py"] = aiter_sources(3000)["engine_config.py"]
        new.append(_commit(kit, repo, f"[Tune] rows {i} (#{4000 + i})", files))
    kit.git(repo, "tag", "v0.1.22")
    image_repo = f"bisectbot-test/pins-{uuid.uuid4().hex[:8]}"
    specs = [NightlySpec(tag, aiter_version=version, versions_txt={"AITER_BRANCH": f"v{version}"},
                         aiter_files=_package_at(kit, repo, sha))
             for tag, version, sha in (("nightly_main_20260901", "0.1.21.post2", old[-1]),
                                       ("nightly_main_20260902", "0.1.22", new[-1]))]
    pushed = push_nightlies(specs, image_repo, registry=registry, base=base_image)
    yield {"repository": image_repo, "old": old, "new": new, "good": pushed[0], "bad": pushed[1], "path": repo}
    subprocess.run(["docker", "rmi", "-f", *[p.ref for p in pushed], *[p.pinned for p in pushed]],
                   capture_output=True)


def test_two_nightlies_differing_only_in_aiter_descend_into_aiter(rewritten_aiter, tmp_path, kit) -> None:
    a = rewritten_aiter["new"]
    cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
    rec = tmp_path / "recipe.yaml"
    rec.write_text(f"""\
name: pin-descent-nightlies
model: demo
source: {{kind: registry, registry: "{REGISTRY}", repository: {rewritten_aiter['repository']},
          tag_pattern: "nightly_main_*", insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {rewritten_aiter['good'].spec.tag}
  bad: {rewritten_aiter['bad'].spec.tag}
  components:
    aiter: {{repo: "{rewritten_aiter['path']}", runtime_paths: [aiter/]}}
report: {{dir: "{tmp_path / 'out'}"}}
""")
    p = kit.run_cli("--state", str(tmp_path / "state"), "run", str(rec), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [s["name"] for s in res["stages"]] == ["stage 1", "aiter commits"]
    s1, st = res["stages"]
    assert s1["first_bad"]["label"] == rewritten_aiter["bad"].spec.tag
    assert "bumps aiter v0.1.21.post2 → v0.1.22" in s1["message"]
    assert (st["first_bad"]["ref"], st["last_good"]["ref"]) == (a[6], a[5])
    fb_image = s1["first_bad"]["meta"]["image"]
    for pr in st["probes"]:  # the rest of the image held at the first-bad nightly
        assert pr["candidate"]["meta"]["base"] == fb_image and pr["candidate"]["meta"]["base_commit"] == a[-1]
    vehicle, culprit = res["chain"]
    assert vehicle["component"] == "image" and vehicle["first_bad"]["label"] == rewritten_aiter["bad"].spec.tag
    assert [(m["component"], m["old"], m["new"]) for m in vehicle["moves"]] == [
        ("aiter", "v0.1.21.post2", "v0.1.22")]
    assert culprit["component"] == "aiter" and culprit["range"] == [a[2], a[9]]
    no_base = subprocess.run(["git", "merge-base", "v0.1.21.post2", "v0.1.22"], cwd=rewritten_aiter["path"],
                             capture_output=True)
    assert no_base.returncode == 1  # two roots: no common history
    md = (tmp_path / "out" / "report.md").read_text()
    assert "maps by PR number" in md and f"the regression is aiter {a[6][:10]}" in md
