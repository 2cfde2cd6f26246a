"""What an image holds (real containers), the diff of two images, aiter history mapping (real git)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from bisectbot.components import (
    CommitRef,
    changed_components,
    diff_images,
    enrich,
    image_info,
    map_commits,
    pr_number,
    resolve_in_history,
)
from bisectbot.errors import BisectbotError, BuildError
from bisectbot.ledger import Ledger


def info(vllm: str, aiter: str = "0.1.10.post3", torch: str = "2.10.0+git8514f05", hip: str = "7.2.53211",
         **vt: str) -> dict:
    return enrich({"python": "3.12.3", "hip": hip, "vllm": {"version": vllm}, "aiter": {"version": aiter},
                   "torch": {"version": torch}, "versions_txt": {"BASE_IMAGE": "rocm/dev:7.2", **vt}})


def test_diff_names_vllm_with_range():
    a = info("0.19.1rc1.dev296+gbcc2306ce.rocm721")
    b = info("0.19.1rc1.dev310+ge6ff3e9c8.rocm721")
    ch = diff_images(a, b)
    assert changed_components(ch) == ["vllm"]
    v = ch[0]
    assert v.range == ("bcc2306ce", "e6ff3e9c8") and v.details["commit"] == ["bcc2306ce", "e6ff3e9c8"]


def test_diff_aiter_by_versions_txt_branch_and_base():
    a = info("0.21.1.dev0+gad7125a43", aiter="0.1.12", AITER_BRANCH="v0.1.12")
    b = info("0.21.1.dev0+gad7125a43", aiter="0.1.13", torch="2.11.0+gitabcdef1", hip="7.2.60000",
             AITER_BRANCH="v0.1.13")
    ch = {c.component: c for c in diff_images(a, b)}
    assert changed_components(ch.values()) == ["aiter", "base"]
    assert ch["aiter"].range == ("v0.1.12", "v0.1.13")
    assert ch["base"].details["torch"] == ["2.10.0+git8514f05", "2.11.0+gitabcdef1"]
    assert ch["base"].details["hip"] == ["7.2.53211", "7.2.60000"]


def test_diff_no_commit_says_so():
    ch = diff_images(info("0.19.1rc1.dev210.rocm700"), info("0.19.1rc1.dev230.rocm700"))
    assert ch[0].changed and ch[0].range is None and "no commit" in ch[0].note


def test_diff_identical_images():
    a = info("0.23.0")
    assert changed_components(diff_images(a, dict(a))) == []


def test_pr_number():
    assert pr_number("[ROCm] fix indexer (#1234)") == 1234
    assert pr_number("Merge pull request #77 from x/y") == 77
    assert pr_number("no pr here") is None


def test_map_commits_pure():
    old = [CommitRef("aaa1111", "Fix ChunkQ (#101)"), CommitRef("bbb2222", "Tune fp8 gemm"),
           CommitRef("ccc3333", "Unmatched thing"), CommitRef("ddd4444", "same sha")]
    new = [CommitRef("fff9999", "Fix ChunkQ again (#101)"), CommitRef("eee8888", "tune  FP8 gemm"),
           CommitRef("ddd4444ffff", "same sha")]
    m = map_commits(old, new)
    assert (m["aaa1111"].new, m["aaa1111"].how) == ("fff9999", "pr")
    assert (m["bbb2222"].new, m["bbb2222"].how) == ("eee8888", "subject")
    assert m["ccc3333"].how == "unmapped" and m["ccc3333"].new is None and "matches no PR" in m["ccc3333"].note()
    assert m["ddd4444"].how == "identical"
    assert "rewritten" in m["aaa1111"].note()


def _commit(repo: git.Repo, name: str, text: str, msg: str) -> str:
    p = Path(repo.working_tree_dir) / name
    p.write_text(text)
    repo.index.add([name])
    return repo.index.commit(msg).hexsha


def test_resolve_in_history_two_roots(tmp_path):
    """aiter's rewrite: an old tag's history and main's history have different roots."""
    repo = git.Repo.init(tmp_path / "aiter")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "T")
        cw.set_value("user", "email", "t@example.com")
    _commit(repo, "a.py", "1", "Initial commit")
    old_fix = _commit(repo, "a.py", "2", "Clamp ChunkQ (#101)")
    old_tune = _commit(repo, "t.csv", "x", "Retune fp8 rows")
    repo.create_tag("v0.1.11.post1")
    # the rewritten history: a new root, the same changes as new commits
    repo.git.checkout("--orphan", "rewritten")
    repo.git.rm("-rf", ".")
    _commit(repo, "a.py", "1", "Initial import")
    new_fix = _commit(repo, "a.py", "2", "Clamp ChunkQ (#101)")
    new_tune = _commit(repo, "t.csv", "x", "Retune fp8 rows")
    head = _commit(repo, "b.py", "3", "New feature (#200)")
    repo.create_tag("v0.1.12")
    assert not repo.merge_base(old_fix, head)  # no common ancestor: two roots
    m = resolve_in_history(repo.working_tree_dir, old_fix, "v0.1.12")
    assert (m.new, m.how) == (new_fix, "pr") and m.rewritten
    m2 = resolve_in_history(repo.working_tree_dir, old_tune, "v0.1.12")
    assert (m2.new, m2.how) == (new_tune, "subject")
    m3 = resolve_in_history(repo.working_tree_dir, new_fix, "v0.1.12")
    assert m3.how == "identical" and m3.note() == ""
    with pytest.raises(BuildError, match="not in the clone"):
        resolve_in_history(repo.working_tree_dir, "deadbeef" * 5, "v0.1.12")


@pytest.mark.docker
def test_introspect_nightly_and_cache(nightlies, tmp_path, vllm_repo):
    n3 = nightlies["N3"]
    with Ledger(tmp_path / "state") as led:
        i = image_info(n3.pinned, ledger=led)
        assert i["digest"] == n3.digest and i["cached"] is False
        assert i["vllm"]["version"] == n3.spec.vllm_version
        # read from vllm/_version.py (setuptools-scm form: __version__ = version = '...'), not only metadata
        assert i["vllm"]["file_version"] == n3.spec.vllm_version and i["vllm"]["dist_version"] == n3.spec.vllm_version
        assert i["torch"]["file_version"] == "2.10.0+git8514f05"
        assert i["vllm"]["commit"] == vllm_repo["C"][:9]
        assert i["vllm"]["dir"] == "/usr/local/lib/python3.11/dist-packages/vllm"
        assert i["aiter"]["version"] == "0.1.10.post3" and i["aiter"]["dist"] == "amd-aiter"
        assert i["aiter"]["ref"] == "v0.1.10.post3"  # no hash: AITER_BRANCH from /app/versions.txt
        assert i["torch"]["version"] == "2.10.0+git8514f05" and i["hip"] == "7.2.53211"
        assert i["python"].startswith("3.11")
        assert i["versions_txt"]["BASE_IMAGE"] == "rocm/dev-ubuntu-22.04:7.2-complete"
        # second call: from the ledger, no container
        again = image_info(n3.pinned, ledger=led)
        assert again["cached"] is True and again["vllm"] == i["vllm"]
        assert led.get_image_info(n3.digest)["vllm"]["commit"] == vllm_repo["C"][:9]
    # the tag resolves to the same digest
    assert image_info(n3.ref)["digest"] == n3.digest


@pytest.mark.docker
def test_introspect_errors_are_one_line(require_docker, base_image, tmp_path):
    from bisectbot.components import introspect

    with pytest.raises(BisectbotError, match="not present locally"):
        introspect("bisectbot-test/does-not-exist:0", pull=False)
    tag = "bisectbot-test/nopython:1"
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN rm -f /usr/bin/python3 /usr/bin/python3.11\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp_path)], check=True, capture_output=True)
    try:
        with pytest.raises(BisectbotError) as e:
            introspect(tag, pull=False)
        assert "introspection of bisectbot-test/nopython:1 failed" in str(e.value)
        assert "python3" in str(e.value) and "\n" not in str(e.value).strip()
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


@pytest.mark.docker
def test_copy_from_image_feeds_patches_check(nightlies, tmp_path, stack_dir):
    from bisectbot.components import copy_from_image

    root = copy_from_image(nightlies["N3"].pinned, ["vllm/engine_config.py", "vllm/missing.py", "torch/x.py"],
                           tmp_path / "root")
    assert (root / "vllm" / "engine_config.py").read_text().endswith("GARBAGE_ABOVE = 3000\n")
    assert not (root / "vllm" / "missing.py").exists()
    import json
    import os
    import sys

    r = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "patches", "check", "--image",
                        nightlies["N3"].pinned, "--stack", str(stack_dir / "stack.yaml")],
                       capture_output=True, text=True, env={**os.environ, "BISECTBOT_STATE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["patches"][0]["state"] == "applies"


def test_diff_cli_maps_rewritten_aiter_commit(tmp_path):
    """``nightlies diff --aiter-repo``: an old image's aiter commit from before the history rewrite is
    mapped onto the new history by PR number, and the output says so (infos cached in the ledger,
    so no container runs)."""
    import json
    import os
    import sys

    repo = git.Repo.init(tmp_path / "aiter")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "T")
        cw.set_value("user", "email", "t@example.com")
    _commit(repo, "a.py", "1", "Initial commit")
    old = _commit(repo, "a.py", "2", "Clamp ChunkQ (#101)")
    repo.git.checkout("--orphan", "main2")
    repo.git.rm("-rf", ".")
    _commit(repo, "a.py", "1", "Initial import")
    new_fix = _commit(repo, "a.py", "2", "Clamp ChunkQ (#101)")
    head = _commit(repo, "b.py", "3", "Feature (#200)")
    da, db = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    with Ledger(tmp_path / "state") as led:
        for dig, ver in ((da, f"0.1.11.post1.dev3+g{old[:9]}"), (db, f"0.1.13.dev5+g{head[:9]}")):
            i = info("0.23.0", aiter=ver)
            i.update(image=f"r/x@{dig}", digest=dig)
            led.put_image_info(dig, i)
    env = {**os.environ, "BISECTBOT_STATE": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "nightlies", "diff", f"r/x@{da}", f"r/x@{db}",
                        "--aiter-repo", str(repo.working_tree_dir)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["changed"] == ["aiter"]
    aiter = out["components"][1]
    assert aiter["range"] == [new_fix, head[:9]] and "rewritten" in aiter["note"] and "PR number" in aiter["note"]


@pytest.mark.parametrize("form", [
    "__version__ = version = '{v}'\n__version_tuple__ = version_tuple = (0, 23)\n",  # setuptools-scm >= 7
    "version: str\n__version__: str\n__version__ = version = '{v}'\n",
    "__version__: str = \"{v}\"\n",
])
def test_snippet_reads_version_forms(tmp_path, form):
    """The in-image snippet, run here on a fake site-packages: version files of several shapes,
    ``amd-aiter`` found by its distribution name (nightly wheel: date, no hash)."""
    import json
    import os
    import sys

    from bisectbot.components import SNIPPET

    v = "0.23.1rc1.dev1120+g0f0f28b53.rocm723"
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "_version.py").write_text(form.format(v=v))
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "aiter").mkdir()
    (tmp_path / "aiter" / "__init__.py").write_text("")
    di = tmp_path / "amd_aiter-0.1.20.post1+20260820.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: amd-aiter\nVersion: 0.1.20.post1+20260820\n")
    r = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    out = enrich(json.loads(r.stdout.split("BISECTBOT-INFO ", 1)[1]))
    assert out["vllm"]["version"] == v and out["vllm"]["commit"] == "0f0f28b53"
    assert out["aiter"]["dist"] == "amd-aiter" and out["aiter"]["version"] == "0.1.20.post1+20260820"
    assert out["aiter"]["commit"] is None and out["aiter"]["parsed"]["build_date"] == "20260820"
