"""Issue 42: ``bisectbot run --minimize`` names the smallest part of a big culprit that still fails --
through the CLI, the reference engine and real server starts.

Kind: *a culprit commit of many parts of which a few cause the failure*. Parameters an input fixes,
each varied here: the number of parts (24 hunks in 5 files; one file of 9 hunks), where the bad
hunk sits (first, middle, last hunk of its file), how many causes the culprit holds (one; two, of
which one is named and the other said to be in the rest), a binary file (searched around, never
split), a culprit that cannot be searched (a nightly image), and the budget (the recipe's, too small:
said, never a subset that passes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

SERVE = """\
import os, sys
with open(os.environ["ENGINE_STARTS"], "a") as fh:
    fh.write(os.environ.get("RUN_ID", "0") + " " + open("version.txt").read().strip() + "\\n")
sys.path.insert(0, ".")
import tuning
from bisectbot.demo.engine import main
sys.exit(main(["--config", "engine.json", "--threshold", str(tuning.threshold())] + sys.argv[1:]))
"""

BUILD = """\
import sys
sys.path.insert(0, ".")
import tuning  # a syntax error or a missing name fails the build
print("built", tuning.threshold())
"""


def _tuning(values: dict[str, int], rule: str) -> str:
    """``tuning.py``: 9 constants 12 lines apart (each change is its own hunk) and ``threshold()``: 4000
    prompt tokens when ``rule`` holds (the same text in every commit), else 30000."""
    lines = ["# tuning constants of the reference engine", ""]
    for name, v in values.items():
        lines += [f"{name} = {v}"] + [f"# padding {name} {i}" for i in range(11)]
    lines += ["", "def threshold():", f"    return 4000 if ({rule}) else 30000", ""]
    return "\n".join(lines)


ANY = "any(v == 1 for v in (K0, K1, K2, K3, K4, K5, K6, K7, K8))"


NAMES = [f"K{i}" for i in range(9)]


def _history(kit, path: Path, *, bad: tuple[str, ...] = ("K4",), other_files: int = 4, per_file: int = 4,
             binary_only: bool = False, rule: str = ANY):
    """Commits: c0 (good), c1 (harmless), c2 = the culprit (every constant of tuning.py changed, ``other_files``
    docs of ``per_file`` hunks each changed; the constants in ``bad`` set to 1), c3 (harmless)."""
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    (path / "serve.py").write_text(SERVE)
    (path / "build.py").write_text(BUILD)
    (path / "engine.json").write_text(json.dumps({"seed": 0}))
    base = {n: 10 + i for i, n in enumerate(NAMES)}
    (path / "tuning.py").write_text(_tuning(base, rule))
    for f in range(other_files):
        (path / f"doc{f}.md").write_text("\n".join(f"line {i}" for i in range(12 * per_file)) + "\n")
    shas = []

    def commit(i: int) -> None:
        (path / "version.txt").write_text(f"engine-{i}\n")
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "-m", f"change {i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))

    commit(0)
    (path / "NOTES").write_text("a harmless change\n")
    commit(1)
    if binary_only:
        (path / "blob.bin").write_bytes(bytes(range(256)) * 4)
        (path / "tuning.py").write_text(_tuning({**base, NAMES[0]: 1}, rule))
    else:
        new = {n: (1 if n in bad else 100 + i) for i, n in enumerate(NAMES)}
        (path / "tuning.py").write_text(_tuning(new, rule))
        for f in range(other_files):
            lines = (path / f"doc{f}.md").read_text().splitlines()
            for h in range(per_file):
                lines[12 * h + 5] = f"changed {f}/{h}"
            (path / f"doc{f}.md").write_text("\n".join(lines) + "\n")
    commit(2)
    (path / "NOTES").write_text("another harmless change\n")
    commit(3)
    return type("R", (), {"path": path, "shas": shas})()


def _run(kit, tmp_path: Path, repo, *extra: str, bisect: dict | None = None):
    recipe = kit.write_recipe(tmp_path / "recipe.yaml", repo, tmp_path / "out", bisect=bisect or {})
    p = kit.run_cli("--state", str(tmp_path / "state"), "--json", "run", str(recipe), "--out", str(tmp_path / "out"),
                    *extra, timeout=900)
    assert p.returncode in (0, 1, 3), p.stderr[-3000:]
    return json.loads(p.stdout), p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["K0", "K4", "K8"])
def test_one_bad_hunk_of_24_is_named_within_the_budget(kit, tmp_path: Path, starts_file, bad: str) -> None:
    repo = _history(kit, tmp_path / "repo", bad=(bad,))
    result, err = _run(kit, tmp_path, repo, "--minimize")
    final = result["stages"][-1]
    assert final["first_bad"]["ref"] == repo.shas[2], err[-2000:]
    m = result["minimized"]
    assert m["searchable"] and m["level"] == "hunks", m
    # 6 files (tuning.py, 4 docs of 4 hunks, version.txt): 26 hunks; the hunk level searches tuning.py's 9
    assert m["files"] == 6 and m["parts"] == 9, m
    assert len(m["subset"]) == 1 and m["subset"][0].startswith("tuning.py hunk"), m
    assert f"-{bad} = " in m["diff"] and f"+{bad} = 1" in m["diff"], m["diff"]
    assert m["minimal"] == {"files": True, "hunks": True} and m["verified"] == "bad" and m["rest"] == "good", m
    # its probe showed the bad end's failure on two prompts (flake_unit start, issue 40): no second start
    assert m["verified_by"].startswith("its probe: GARBAGE on"), m
    budget = m["budget"]["files"] + m["budget"]["hunks"] + 2
    assert m["probes"] <= budget, (m["probes"], budget)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Smallest failing part" in report and "tuning.py hunk" in report and f"+{bad} = 1" in report


@pytest.mark.slow
def test_of_two_causes_one_is_named_and_the_second_is_said_to_be_in_the_rest(kit, tmp_path: Path, starts_file) -> None:
    # K2 and K6 are each a cause (either one makes the engine fail): the rest without the subset still fails
    repo = _history(kit, tmp_path / "repo", bad=("K2", "K6"))
    result, err = _run(kit, tmp_path, repo, "--minimize")
    m = result["minimized"]
    assert m["searchable"] and len(m["subset"]) == 1 and m["rest"] == "bad", m
    assert "a second cause is in the rest" in " ".join(result.get("notes") or []) + (tmp_path / "out" /
                                                                                   "report.md").read_text()


@pytest.mark.slow
def test_two_hunks_needed_together_are_both_kept(kit, tmp_path: Path, starts_file) -> None:
    # ddmin pays more than the default budget (one cause) for parts that fail only together: the recipe sets it
    repo = _history(kit, tmp_path / "repo", bad=("K2", "K6"), rule="K2 == 1 and K6 == 1")
    result, err = _run(kit, tmp_path, repo, bisect={"minimize": {"max_probes": 30}})
    m = result["minimized"]
    assert m["searchable"] and len(m["subset"]) == 2 and m["rest"] == "good" and m["verified"] == "bad", m
    assert "+K2 = 1" in m["diff"] and "+K6 = 1" in m["diff"], m["diff"]
    assert sorted(m["subset"]) == sorted(["tuning.py hunk 3 (line 27: -K2 = 12)", "tuning.py hunk 7 (line 75: -K6 = 16)"])


@pytest.mark.slow
def test_a_too_small_budget_says_not_minimal_and_still_fails(kit, tmp_path: Path, starts_file) -> None:
    repo = _history(kit, tmp_path / "repo", bad=("K4",))
    result, err = _run(kit, tmp_path, repo, bisect={"minimize": {"max_probes": 1}})
    m = result["minimized"]
    assert m["searchable"] and not all(m["minimal"].values()), m
    assert m["verified"] == "bad", m  # whatever it kept still fails: never a wrong subset
    assert "not known to be minimal" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_a_culprit_with_a_binary_file_is_searched_around_it(kit, tmp_path: Path, starts_file) -> None:
    repo = _history(kit, tmp_path / "repo", binary_only=True)
    result, err = _run(kit, tmp_path, repo, "--minimize")
    m = result["minimized"]
    assert "blob.bin: binary" in m["unsplittable"] and m["binary_left_out"] == ["blob.bin"], m
    # the culprit without its binary file was probed first (it fails: searchable), then searched
    assert m["tests"][0]["parts"] == ["the culprit without its binary files"] and m["tests"][0]["verdict"] == "bad", m
    assert m["searchable"] and m["subset"] == ["tuning.py"] and m["rest"] == "good", m  # the rest: version.txt


def test_a_nightly_culprit_is_not_searchable_and_says_why(tmp_path: Path) -> None:
    from bisectbot.models import Candidate, CandidateKind, StageResult, Status
    from bisectbot.recipe import parse_recipe
    from bisectbot.session.stages.minimize import MinimizeStage, words

    recipe = parse_recipe(yaml.safe_dump({"name": "x", "source": {"kind": "registry", "registry": "127.0.0.1:5000",
                                                                  "repository": "a/b"}}))
    a = Candidate(CandidateKind.NIGHTLY, "sha256:" + "a" * 64, "n1")
    b = Candidate(CandidateKind.NIGHTLY, "sha256:" + "b" * 64, "n2")
    st = StageResult("stage 1", "image", Status.CULPRIT, [a, b], last_good=a, first_bad=b, culprits=[b])
    said: list[str] = []
    prober = type("P", (), {"runner": object()})()
    m = MinimizeStage(prober, recipe, echo=said.append).run(st)  # type: ignore[arg-type]
    assert not m["searchable"] and "is a nightly, not a commit" in m["why"], m
    assert "could not be searched" in words(m) and said



@pytest.mark.slow
def test_an_aiter_culprit_of_the_component_stage_is_searched_in_aiter(kit, tmp_path: Path, starts_file) -> None:
    from tests.bisect.test_components import make_repo, recipe

    v = make_repo(kit, tmp_path / "vllm", "v", 3, None)
    a = make_repo(kit, tmp_path / "aiter", "a", 10, bug_at=6)  # a6 changes v.txt, bug.txt and src/mod.py
    r = recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter")
    p = kit.run_cli("--state", str(tmp_path / "s"), "--json", "run", str(r), "--good", f"vllm={v[0]},aiter={a[0]}",
                    "--bad", f"vllm={v[2]},aiter={a[9]}", "--minimize", timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert result["stages"][-1]["component"] == "aiter" and result["stages"][-1]["first_bad"]["ref"] == a[6]
    m = result["minimized"]
    assert m["component"] == "aiter" and m["culprit"] == a[6] and m["predecessor"] == a[5], m
    assert m["subset"] == ["bug.txt"] and m["verified"] == "bad" and m["rest"] == "good", m
    assert m["verified_by"] == "a second start", m  # a size-less command: no failure signature to agree on
