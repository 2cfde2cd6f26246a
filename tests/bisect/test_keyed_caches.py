"""Issue 40: compile and JIT caches shared by the candidates of one key, and by no other
(:mod:`bisectbot.run.caches`), through the installed CLI, the local runner and its sandbox.

Kind: *a start that compiles what an earlier start of the same code already compiled*, bounded by
*a cache entry written only by a candidate of its own key*. Members: the same build started again (the
verification's re-probes: the whole-build caches are warm), another commit (the whole-build caches are
cold: a different key), the component-keyed cache (aiter's JIT modules: every commit of a stage whose
aiter is the same shares it), a candidate that writes into another key's directory (refused), a recipe
that sets the variable itself (its value wins), and ``server.keyed_caches: false`` (none given).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CHECK = """\
import json, os, sys, time
v = open("version.txt").read().strip()
rec = {"v": v, "planted": None}
for var in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "AITER_JIT_DIR"):
    d = os.environ.get(var)
    rec[var] = d
    rec[var + "_seen"] = sorted(os.listdir(d)) if d and os.path.isdir(d) else None
    if d and os.path.isdir(d):
        with open(os.path.join(d, v + "-" + str(time.time_ns())), "w") as fh:
            fh.write(v)
d = os.environ.get("VLLM_CACHE_ROOT")
rec["siblings"] = sorted(os.listdir(os.path.dirname(d))) if d and os.path.isdir(os.path.dirname(d)) else None
if d:  # another key's directory: a sibling of this key's
    other = os.path.join(os.path.dirname(d), "0" * 24)
    try:
        os.makedirs(other, exist_ok=True)
        open(os.path.join(other, "planted"), "w").write("poison")
        rec["planted"] = True
    except OSError as e:
        rec["planted"] = False
with open(os.path.join(os.environ["RECORDS"], "%d.json" % time.time_ns()), "w") as fh:
    json.dump(rec, fh)
sys.exit(1 if int(v.split("-")[1]) >= int(os.environ["FIRST_BAD"]) else 0)
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _night(tmp: Path, n: int, k: int, component: str = "", **server) -> tuple[list[dict], list[str],
                                                                             subprocess.CompletedProcess]:
    repo = tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "check.py").write_text(CHECK)
    shas = []
    for i in range(n):
        (repo / "version.txt").write_text(f"c-{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    records = tmp / "records"
    records.mkdir()
    recipe = {"name": "keyed", "source": {"kind": "git", "repo": str(repo), **({"component": component}
                                                                               if component else {})},
              "server": server,
              "reproducer": {"kind": "command", "command": [sys.executable, "check.py"], "command_timeout_s": 60},
              "regress": "command", "bisect": {"good": shas[0], "bad": shas[-1]},
              "report": {"dir": str(tmp / "out")}, "env_passthrough": ["RECORDS", "FIRST_BAD"]}
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    env = dict(os.environ, BISECTBOT_CACHE=str(tmp / "cache"), RECORDS=str(records), FIRST_BAD=str(k),
               BISECTBOT_SANDBOX_WRITABLE=str(records))
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp / "state"), "run", str(tmp / "r.yaml")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    recs = [json.loads(f.read_text()) for f in sorted(records.glob("*.json"), key=lambda f: int(f.stem))]
    return recs, shas, p


def _owner(entry: str) -> str:
    return entry.rsplit("-", 1)[0]


def test_a_build_started_again_finds_its_own_compile_cache_and_no_other_builds(tmp_path: Path) -> None:
    recs, _, _ = _night(tmp_path, 12, 7)
    by_version: dict[str, list[dict]] = {}
    for r in recs:
        by_version.setdefault(r["v"], []).append(r)
    assert any(len(v) > 1 for v in by_version.values()), "the verification re-probes start a build twice"
    for v, rs in by_version.items():
        for var in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            first, *later = rs
            assert first[var + "_seen"] == [], (v, var, first)  # cold: nothing written under this key before
            for r in later:  # warm: every earlier start of the same build left its entry
                assert r[var + "_seen"] and {_owner(e) for e in r[var + "_seen"]} == {v}, (v, var, r)
    # the whole-build caches of two commits are two directories
    assert len({r["VLLM_CACHE_ROOT"] for r in recs}) == len(by_version)
    # aiter's JIT cache is shared only across commits of a component known not to write it (vLLM): this
    # history's component ("repo") is not known, so each commit has its own (an unknown name never shares)
    assert len({r["AITER_JIT_DIR"] for r in recs}) == len(by_version)
    # another key's directory cannot be written, nor seen: the candidate sees only its own keys
    assert all(r["planted"] is False for r in recs), recs
    assert all(r["siblings"] == [os.path.basename(r["VLLM_CACHE_ROOT"])] for r in recs), [r["siblings"] for r in recs]
    assert not list((tmp_path / "cache").rglob("planted"))


def test_a_variable_the_recipe_sets_wins_and_keyed_caches_can_be_turned_off(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    recs, _, _ = _night(tmp_path / "a", 6, 3, env={"VLLM_CACHE_ROOT": "/nonexistent/recipe-cache"})
    assert {r["VLLM_CACHE_ROOT"] for r in recs} == {"/nonexistent/recipe-cache"}
    assert all(r["TRITON_CACHE_DIR"] for r in recs)
    (tmp_path / "b").mkdir()
    recs, _, _ = _night(tmp_path / "b", 6, 3, keyed_caches=False)
    assert all(r["VLLM_CACHE_ROOT"] is None and r["AITER_JIT_DIR"] is None for r in recs), recs


@pytest.mark.parametrize("shared,commits,same", [
    ((), ({"vllm": "a"}, {"vllm": "b"}), False),
    (("vllm",), ({"vllm": "a"}, {"vllm": "b"}), True),  # vLLM commits on one nightly share aiter's JIT
    (("vllm",), ({"aiter": "a"}, {"aiter": "b"}), False),
    (("vllm",), ({"aiter-src": "a"}, {"aiter-src": "b"}), False),  # an unknown name keys it (hostile pass)
    (("vllm",), ({"amd-aiter": "a"}, {"amd-aiter": "b"}), False),
    (("vllm",), ({"vllm": "a", "aiter": "x"}, {"vllm": "b", "aiter": "y"}), False),
])
def test_cache_keys_are_shared_only_across_known_non_writers(shared, commits, same) -> None:
    from bisectbot.run.caches import KeyedCache, cache_key

    c = KeyedCache("x", "X_DIR", shared)
    k1 = cache_key(c, f"build-{commits[0]}", "sha256:base", commits[0])
    k2 = cache_key(c, f"build-{commits[1]}", "sha256:base", commits[1])
    assert (k1 == k2) is same
    if shared:
        assert cache_key(c, "b", "sha256:base", commits[0]) != cache_key(c, "b", "sha256:other", commits[0])


def test_vllm_commits_share_aiters_jit_cache_and_nothing_else(tmp_path: Path) -> None:
    """The history's component is vLLM, known not to build aiter's modules: every commit of the stage shares
    the aiter JIT directory (one compile for the night), while vLLM's own caches stay per build."""
    recs, _, _ = _night(tmp_path, 10, 6, component="vllm")
    assert len({r["AITER_JIT_DIR"] for r in recs}) == 1
    assert {_owner(e) for e in recs[-1]["AITER_JIT_DIR_seen"]} >= {r["v"] for r in recs[:-1]}
    assert len({r["VLLM_CACHE_ROOT"] for r in recs}) == len({r["v"] for r in recs})


@pytest.mark.parametrize("patches_a,patches_b,same", [
    ([], [], True),  # two vLLM commits overlaid on one nightly: aiter's modules shared
    ([], ["aiter-chunkq-clamp"], False),  # the clamp patches the image's aiter: its modules are another build's
    (["aiter-chunkq-clamp"], ["aiter-chunkq-clamp"], True),  # one stack on both: shared again
])
def test_a_container_candidates_aiter_cache_is_keyed_by_everything_its_build_adds_to_the_nightly(
        tmp_path: Path, monkeypatch, patches_a: list, patches_b: list, same: bool) -> None:
    """Kind: *a component-keyed cache whose base leaves out part of what builds the component* (hostile pass:
    the container runner keyed aiter's JIT directory by the nightly's digest alone, so a patch bisection's
    subsets with and without the aiter clamp shared compiled modules). The base is the digest and what the
    build key adds to it (patch stack, runner profile, change under test); vLLM commits on one nightly and
    stack still share (no Docker: the keys are computed, the directories made on the host)."""
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import parse_recipe
    from bisectbot.run.base import Prepared
    from bisectbot.run.container import ContainerRunner
    from bisectbot.runner_profile import load_profile

    monkeypatch.setenv("BISECTBOT_CACHE", str(tmp_path / "cache"))
    digest = "sha256:" + "1" * 64

    def aiter_dir(patches: list, commit: str) -> str:
        recipe = parse_recipe("name: kc\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                              f"server: {{command: [serve]}}\nrunner: cpu\npatches: {json.dumps(patches)}\n")
        runner = ContainerRunner(recipe, load_profile("cpu"), tmp_path / "logs")
        c = Candidate(CandidateKind.COMMIT, commit, commit[:8], "vllm", {"base": f"r/x@{digest}"})
        p = Prepared(c, build_key=runner.build_key(c), image="img", meta={"base_digest": digest})
        _, mounts = runner.keyed_caches(p)
        return next(m.split(":")[0] for m in mounts if m.split(":")[1].endswith("/aiter"))

    assert (aiter_dir(patches_a, "a" * 40) == aiter_dir(patches_b, "b" * 40)) is same
