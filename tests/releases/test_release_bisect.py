"""``bisectbot run`` over releases with a patch question, against a real local index (offline).

The CLI runs in a subprocess; the index (see conftest.py) counts every sdist request,
which proves that only the releases the search visits are downloaded, each once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from release_fixtures import PATCH_ID, Index

from bisectbot.errors import BadInput
from bisectbot.models import Verdict
from bisectbot.recipe import PyPISource
from bisectbot.verdict import judge_patches

ROOT = Path(__file__).resolve().parents[2]


def _recipe(tmp: Path, index_url: str, regress: str, **source) -> Path:
    data = {"name": f"demo-{regress.split(':')[0]}", "source": {"kind": "pypi", "package": "vllm",
                                                                "index_url": index_url, **source},
            "patches": [PATCH_ID], "regress": {regress: PATCH_ID}, "report": {"dir": str(tmp / "unused")}}
    p = tmp / f"{data['name']}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _run(tmp: Path, patches_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BISECTBOT_PATCHES_DIR=str(patches_dir), BISECTBOT_CACHE=str(tmp / "cache"))
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp / "state"), *args],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)


def _probed(result: dict) -> list[str]:
    return [p["candidate"]["ref"] for st in result["stages"] for p in st["probes"]]


def _cached_sdists(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "cache" / "dists").rglob("*.tar.gz"))


def test_patch_upstream_finds_first_release_shipping_the_fix(index: Index, patches_dir: Path,
                                                             tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, index.url("json"), "patch-upstream", min_version="1.0", max_version="1.8")
    out = tmp_path / "out"
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "upstream since: vllm 1.6 (demo-workspace already upstream); last needed: vllm 1.5" in r.stdout
    res = json.loads((out / "result.json").read_text())
    st = res["stages"][0]
    assert res["status"] == "culprit" and st["first_bad"]["ref"] == "1.6" and st["last_good"]["ref"] == "1.5"
    cands = [c["ref"] for c in st["candidates"]]
    assert cands == ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8"]  # no rc, max honoured
    report = (out / "report.md").read_text()
    assert "**upstream since: vllm 1.6 (demo-workspace already upstream); last needed: vllm 1.5**" in report
    # a release that ships the patch upstream is no regression and blames nobody (newuser defect 5)
    title = (out / "issue.md").read_text().splitlines()[0]
    assert title == ("# [bisectbot] demo-patch-upstream: Patch demo-workspace upstream since vllm 1.6 "
                     "(last needed: vllm 1.5)"), title
    for text in (report, (out / "issue.md").read_text(), r.stdout):
        for wrong in ("Regression", "Culprit", "culprit", "First bad", "first-bad", "vllm vllm", " by —"):
            assert wrong not in text, (wrong, text)
    assert "**Patch retirement**" in report and "### Upstream since" in report
    assert "| vllm 1.5 | needed |" in report
    verdicts = {p["candidate"]["ref"]: p["verdict"] for p in st["probes"]}
    assert all(verdicts[v] == "good" for v in verdicts if v < "1.6")
    assert all(verdicts[v] == "bad" for v in verdicts if v >= "1.6")
    offset = next((p for p in st["probes"] if p["candidate"]["ref"] in ("1.3", "1.4", "1.5")), None)
    if offset is not None:
        assert "applies with offset 7" in offset["reason"]
    # only the visited releases were downloaded, each once, and fewer than all of them
    visited = set(_probed(res))
    dl = index.downloads()
    assert sorted(dl) == sorted(visited), (dl, visited)
    assert len(visited) < len(cands)
    assert _cached_sdists(tmp_path) == sorted(f"vllm-{v}.tar.gz" for v in visited)
    # a second run takes every verdict from the probe cache: no download, same answer
    r2 = _run(tmp_path, patches_dir, "run", str(recipe), "--out", str(tmp_path / "out2"))
    assert r2.returncode == 0, r2.stderr
    assert "every verdict came from the probe cache" in r2.stdout
    assert len(index.downloads()) == len(dl)


def test_patch_conflict_finds_first_release_where_patch_breaks(index: Index, patches_dir: Path,
                                                               tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, index.url("html"), "patch-conflict")  # whole range, PEP 503 HTML
    out = tmp_path / "out"
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    st = res["stages"][0]
    cands = [c["ref"] for c in st["candidates"]]
    assert cands[0] == "1.0" and cands[-1] == "2.0" and "1.8.post1" not in cands and "1.6rc1" not in cands
    assert (st["first_bad"]["ref"], st["last_good"]["ref"]) == ("1.9", "1.8")
    report = (out / "report.md").read_text()
    assert "first conflicting: vllm 1.9 (demo-workspace conflict: hunk #1" in report
    assert "Patch demo-workspace conflicts since vllm 1.9 (last applies: vllm 1.8)" in report
    assert "Regression" not in report and "Culprit" not in report
    bad = [p for p in st["probes"] if p["verdict"] == "bad"]
    assert bad and all(p["signature"] == "patch (conflict)" for p in bad)
    visited = set(_probed(res))
    assert sorted(index.downloads()) == sorted(visited) and len(visited) < len(cands)
    logs = sorted((tmp_path / "state" / "logs" / recipe.stem).glob("*.json"))
    assert sorted(p.stem for p in logs) == sorted(visited)
    log = json.loads((tmp_path / "state" / "logs" / recipe.stem / "1.9.json").read_text())
    assert log["file"] == "vllm-1.9.tar.gz" and log["patches"][0]["state"] == "conflict"


def test_explicit_ends_dry_run_and_bad_input(index: Index, patches_dir: Path, tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, index.url("json"), "patch-upstream", include_prereleases=True)
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--good", "1.2", "--bad", "1.7", "--out",
             str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["stages"][0]["first_bad"]["ref"] == "1.6rc1"  # pre-releases included on request
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "plan: 12 candidates from vllm 1.0 (good) to vllm 2.0 (bad)" in r.stdout, r.stdout  # rc in, yanked out
    n_dl = len(index.downloads())
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--good", "1.2", "--bad", "9.9")
    assert r.returncode == 2 and "vllm==9.9 is not on the index" in r.stderr
    r = _run(tmp_path, patches_dir, "run", str(recipe), "--good", "1.7", "--bad", "1.2")
    assert r.returncode == 2 and "must be an older release" in r.stderr
    (tmp_path / "u").mkdir()
    unknown = _recipe(tmp_path / "u", index.url("json"), "patch-conflict")
    unknown.write_text(unknown.read_text().replace(f"patch-conflict: {PATCH_ID}", "patch-conflict: nope"))
    r = _run(tmp_path, patches_dir, "run", str(unknown))
    assert r.returncode == 2 and "unknown patch id 'nope'" in r.stderr, r.stderr
    garbage = _recipe(tmp_path, index.url("json"), "patch-upstream")
    garbage.write_text(garbage.read_text().replace(f"regress:\n  patch-upstream: {PATCH_ID}", "regress: garbage"))
    r = _run(tmp_path, patches_dir, "run", str(garbage), "--runner", "release")
    assert r.returncode == 2 and "patches: a release from the package index runs as published" in r.stderr, r.stderr
    assert len(index.downloads()) == n_dl  # bad input downloads nothing
    (tmp_path / "d").mkdir()
    dead = _recipe(tmp_path / "d", "http://127.0.0.1:9/simple/", "patch-upstream")
    r = _run(tmp_path, patches_dir, "run", str(dead))
    assert r.returncode == 5 and "upstream unreachable" in r.stderr, r.stderr  # exit 5, never a verdict


def test_pypi_source_filters_and_ends(index: Index) -> None:
    from bisectbot.sources.pypi import PyPICandidates

    src = PyPICandidates(PyPISource(package="vllm", index_url=index.url("json"), min_version="1.3",
                                    max_version="1.9"))
    assert [r.version for r in src.releases()] == ["1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9"]
    assert src.default_ends() == ("1.3", "1.9")
    cands = src.candidates("1.4", "1.6")
    assert [(c.ref, c.label, c.component, c.kind.value) for c in cands] == [
        ("1.4", "vllm 1.4", "vllm", "release"), ("1.5", "vllm 1.5", "vllm", "release"),
        ("1.6", "vllm 1.6", "vllm", "release")]
    assert cands[0].meta["file"] == "vllm-1.4.tar.gz" and len(cands[0].meta["sha256"]) == 64
    assert "url" not in cands[0].meta
    with pytest.raises(BadInput, match="outside the recipe's vllm releases 1.3 .. 1.9"):
        src.candidates("1.0", "1.6")
    with pytest.raises(BadInput, match="not a PEP 440 version"):
        src.candidates("one", "1.6")
    pre = PyPICandidates(PyPISource(package="vllm", index_url=index.url("html"), include_prereleases=True))
    assert [r.version for r in pre.releases()][5:8] == ["1.5", "1.6rc1", "1.6"]
    assert "1.8.post1" not in [r.version for r in pre.releases()]  # yanked
    assert index.downloads() == []  # listing never downloads


def _st(state: str, label: str = "", pid: str = PATCH_ID) -> dict:
    return {"id": pid, "state": state, "label": label or state, "detail": ""}


@pytest.mark.parametrize("state,upstream,conflict", [
    ("applies", Verdict.GOOD, Verdict.GOOD),
    ("applies-with-offset", Verdict.GOOD, Verdict.GOOD),
    ("applies-with-fuzz", Verdict.GOOD, Verdict.GOOD),
    ("already-upstream", Verdict.BAD, Verdict.GOOD),
    ("conflict", Verdict.SKIP, Verdict.BAD),
    ("not-applicable", Verdict.SKIP, Verdict.SKIP),
])
def test_patch_judges(state: str, upstream: Verdict, conflict: Verdict) -> None:
    states = [_st("applies", pid="other"), _st(state)]
    ju = judge_patches(f"patch-upstream: {PATCH_ID}", states)
    jc = judge_patches(f"patch-conflict: {PATCH_ID}", states)
    assert (ju.verdict, jc.verdict) == (upstream, conflict)
    assert ju.reason.startswith(f"{PATCH_ID}: {state}")
    assert (str(ju.signature) if ju.signature else "") == ("patch (already-upstream)" if upstream is Verdict.BAD
                                                           else "")
    assert (str(jc.signature) if jc.signature else "") == ("patch (conflict)" if conflict is Verdict.BAD else "")
    with pytest.raises(BadInput, match="has no patch 'missing'"):
        judge_patches("patch-upstream: missing", states)
