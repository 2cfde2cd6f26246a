"""Issue 12 through ``bisectbot run``: histories shaped like public bug reports, each on a real
git repository with a command reproducer, the local runner and the installed CLI.

1 fix bisection crossed by an unrelated failure; 2 a one-sided flaky bug; 3 a reproducer
that cannot run; 4 a bug from a topic branch (and from the main line); 5 threshold drift;
6 coupled components; 7 plausibility of build files and the blame exit code.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml

PY = sys.executable


def commit_files(kit, repo: Path, files: dict[str, str | None], msg: str, exe: tuple[str, ...] = ()) -> str:
    for rel, text in files.items():
        p = repo / rel
        if text is None:
            p.unlink(missing_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel in exe:
            p.chmod(p.stat().st_mode | stat.S_IXUSR)
    kit.git(repo, "add", "-A")
    kit.git(repo, "commit", "-q", "--allow-empty", "-m", msg)
    return kit.git(repo, "rev-parse", "HEAD")


def init_repo(kit, path: Path) -> Path:
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    return path


def write_recipe(tmp_path: Path, repo: Path, reproducer: dict, regress, **extra) -> Path:
    data = {
        "name": "honest",
        "source": {"kind": "git", "repo": str(repo)},
        "reproducer": {"kind": "command", "command_timeout_s": 30, **reproducer},
        "regress": regress,
        "report": {"dir": str(tmp_path / "out")},
        "env_passthrough": ["FLAKY_DIR", "FLAKY_SEED"],
    }
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k].update(v)
        else:
            data[k] = v
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def result(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "result.json").read_text())


# ----------------------------------------------------------------- 1: fix bisection, unrelated failure

FIX_REPRO = """\
import json, sys
size = int(sys.argv[1])
mode = json.load(open("state.json"))["mode"]
if mode == "other":
    print("ImportError: unrelated breakage", file=sys.stderr)
    sys.exit(3)
sys.exit(1 if mode == "bug" and size > 8000 else 0)
"""


def test_fix_bisection_is_not_misled_by_an_unrelated_failure(tmp_path, kit) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = []
    for i in range(12):
        mode = "bug" if i < 4 else "other" if 5 <= i <= 8 else "fixed"
        shas.append(commit_files(kit, repo, {"repro.py": FIX_REPRO, "state.json": json.dumps({"mode": mode})},
                                 f"c{i}"))
    r = write_recipe(tmp_path, repo, {"command": [PY, "repro.py", "{size}"], "min_size": 2000, "max_size": 16000,
                                      "sizes": [2000, 4000, 8000, 16000]},
                     "success", bisect={"good": shas[0], "bad": shas[11]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[4], p.stderr
    assert final["last_good"]["ref"] == shas[3]
    assert "still broken -> skip" in p.stderr, p.stderr  # c5..c8 were used as skip, not as "still broken"


def test_fix_bisection_with_a_sizeless_command_speaks_of_fixed_and_exit_codes(tmp_path, kit) -> None:
    """newuser defect 6: 'grep -q fixed state' over 12 commits, fixed at commit 7. Fixed commits
    read 'fixed', broken ones 'still broken'; a 'Fix' table; exit codes, no invented token sizes."""
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"state": "fixed\n" if i >= 6 else "broken\n", "n": str(i)}, f"c{i + 1}")
            for i in range(12)]
    r = write_recipe(tmp_path, repo, {"command": ["sh", "-c", "grep -q fixed state"]}, "success",
                     bisect={"good": shas[0], "bad": shas[11]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["first_bad"]["ref"] == shas[6] and final["last_good"]["ref"] == shas[5]
    assert ": fixed; command exit 0" in p.stderr and ": still broken; command exit 1" in p.stderr, p.stderr
    assert ": bad" not in p.stderr and ": good" not in p.stderr and "tokens" not in p.stderr, p.stderr
    md = (tmp_path / "out" / "report.md").read_text()
    assert "### Fix\n" in md and "Culprit" not in md, md
    assert "| exit code |" in md and "| fixed | 0 |" in md and "| still broken | 1 |" in md, md
    for wrong in ("tokens", "garbage", "| bad |", "| good |", "32000"):
        assert wrong not in md, (wrong, md)


# ----------------------------------------------------------------- 2: one-sided flaky bug

FLAKY = """\
import os, random, sys
idx = int(open("src/idx").read())
d = os.environ["FLAKY_DIR"]
n_file = os.path.join(d, f"runs-{idx}")
n = int(open(n_file).read()) if os.path.exists(n_file) else 0
open(n_file, "w").write(str(n + 1))
rng = random.Random(f"{os.environ['FLAKY_SEED']}-{idx}-{n}")
bug = idx >= 14 and rng.random() < 0.30
sys.exit(1 if bug else 0)
"""


def flaky_history(kit, tmp_path: Path) -> list[str]:
    repo = init_repo(kit, tmp_path / "repo")
    return [commit_files(kit, repo, {"flaky.py": FLAKY, "src/idx": str(i)}, f"c{i}") for i in range(20)]


@pytest.mark.slow
def test_one_sided_flaky_bug_names_no_wrong_culprit_over_6_seeds(tmp_path, kit) -> None:
    """Seeds 0..5 of the one-sided flake (false negatives 0.45). Over seeds 0..19 this named c14 in at
    least 18 and nothing else (measured before the suite's budget cut it to 6, 179 s on CI's 2 cores);
    the statistics of flaky worlds at scale are the worlds benchmark's (``benchmarks/worlds.py``,
    shapes ``noise`` and ``flaky``). So of any 6 seeds at least 4 name it."""
    shas = flaky_history(kit, tmp_path)
    named, wrong = 0, []
    for seed in range(6):
        d = tmp_path / f"seed{seed}"
        d.mkdir()
        r = write_recipe(d, tmp_path / "repo", {"command": [PY, "flaky.py"], "repeats": 5}, "command",
                         bisect={"good": shas[0], "bad": shas[19],
                                 "flake": {"false_positive": 0.01, "false_negative": 0.45}})
        p = kit.run_cli("--state", str(d / "s"), "run", str(r), env={"FLAKY_DIR": str(d), "FLAKY_SEED": str(seed)})
        assert p.returncode in (0, 3), p.stderr
        final = result(d)["stages"][-1]
        if final["status"] == "culprit":
            if final["first_bad"]["ref"] == shas[14]:
                named += 1
                assert p.returncode == 0
            else:
                wrong.append((seed, final["first_bad"]["ref"]))
        else:  # inconclusive: says how far it got
            assert "confidence" in json.dumps(final) and final["confidence"] >= 0
    assert not wrong
    assert named >= 4


def test_flaky_bug_without_rates_estimates_them_from_the_bad_end(tmp_path, kit) -> None:
    shas = flaky_history(kit, tmp_path)
    r = write_recipe(tmp_path, tmp_path / "repo", {"command": [PY, "flaky.py"], "repeats": 5}, "command",
                     bisect={"good": shas[0], "bad": shas[19]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    env={"FLAKY_DIR": str(tmp_path), "FLAKY_SEED": "1"})  # 2 of 5 runs bad at the bad end
    assert p.returncode in (0, 3), p.stderr
    assert "hit rate" in p.stderr and "of 5 runs" in p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "culprit" or final["first_bad"]["ref"] == shas[14]
    # a noisy search's confidence is its posterior, not an assumption of determinism
    assert "exact search" not in (tmp_path / "out" / "report.md").read_text()


FLAKY_THRESHOLD = """\
import os, random, sys
size = int(sys.argv[1])
idx = int(open("src/idx").read())
d = os.environ["FLAKY_DIR"]
n_file = os.path.join(d, f"runs-{idx}")
n = int(open(n_file).read()) if os.path.exists(n_file) else 0
open(n_file, "w").write(str(n + 1))
rng = random.Random(f"{os.environ['FLAKY_SEED']}-{idx}-{n}")
bug = idx >= 14 and size > 8000 and rng.random() < 0.40
sys.exit(1 if bug else 0)
"""


def test_flaky_threshold_bug_without_rates_estimates_them_from_the_bad_ends_replies(tmp_path, kit) -> None:
    # the same estimate for a threshold search (not only 'regress: command'): the garbage-side
    # runs of the bad end's search give the per-run hit rate
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"flaky.py": FLAKY_THRESHOLD, "src/idx": str(i)}, f"c{i}") for i in range(20)]
    r = write_recipe(tmp_path, repo, {"command": [PY, "flaky.py", "{size}"], "repeats": 5, "min_size": 1000,
                                      "max_size": 32000}, "garbage", bisect={"good": shas[0], "bad": shas[19]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    env={"FLAKY_DIR": str(tmp_path), "FLAKY_SEED": "3"})
    assert p.returncode in (0, 3), p.stdout + p.stderr
    # issue 35: the runs are weighed per candidate (the bug's one rate, each bad candidate's own, or either) from the bad
    # end's counted replies on; the bad end's own runs are in its probe line
    line = next(ln for ln in p.stderr.splitlines() if "the search weighs every candidate's runs" in ln)
    assert "(5 a probe)" in line and "each bad candidate's own, either, or one rate up to a step" in line, line
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "culprit" or final["first_bad"]["ref"] == shas[14]


@pytest.mark.slow
def test_flaky_threshold_bug_without_repeats_or_rates_names_no_wrong_culprit(tmp_path, kit) -> None:
    # the next member of input 2's kind: no repeats, no flake rates (an exact search, as git
    # bisect run), a bug seen in 60 % of runs above 8000 tokens from c14. Before: seed 0 named
    # c17, "verified" at 100 % (c16 read good twice; c17's two probes found garbage from
    # 10187 and from 22279 tokens). A deterministic reproducer finds the same threshold on a
    # re-probe: one that moved fails the verification (inconclusive, says why).
    repo = init_repo(kit, tmp_path / "repo")
    script = FLAKY_THRESHOLD.replace("rng.random() < 0.40", "rng.random() < 0.60")
    shas = [commit_files(kit, repo, {"flaky.py": script, "src/idx": str(i)}, f"c{i}") for i in range(20)]
    outcomes = []
    for seed in range(8):
        d = tmp_path / f"seed{seed}"
        d.mkdir()
        r = write_recipe(d, repo, {"command": [PY, "flaky.py", "{size}"], "min_size": 1000, "max_size": 32000},
                         "garbage", bisect={"good": shas[0], "bad": shas[19]})
        p = kit.run_cli("--state", str(d / "s"), "run", str(r), env={"FLAKY_DIR": str(d), "FLAKY_SEED": str(seed)})
        assert p.returncode in (0, 3), p.stdout + p.stderr
        final = result(d)["stages"][-1]
        named = final["status"] == "culprit" and shas.index(final["first_bad"]["ref"])
        outcomes.append((seed, final["status"], named, final.get("message", "")))
    assert all(named in (False, 14) for _, _, named, _ in outcomes), outcomes
    seed0 = outcomes[0]
    assert seed0[1] == "inconclusive" and "not deterministic" in seed0[3], seed0


# ----------------------------------------------------------------- 3: a reproducer that cannot run


@pytest.mark.parametrize("how", ["not-executable", "misspelled"])
def test_unrunnable_command_is_a_clear_error_exit_2_and_no_issue(tmp_path, kit, how) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"repro.sh": "#!/bin/sh\nexit 0\n", "src/n": str(i)}, f"c{i}") for i in range(6)]
    argv = ["./repro.sh"] if how == "not-executable" else ["./repo.sh"]
    r = write_recipe(tmp_path, repo, {"command": argv}, "command", bisect={"good": shas[0], "bad": shas[5]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 2, p.stdout + p.stderr
    code = 126 if how == "not-executable" else 127
    assert "cannot run" in p.stderr and argv[0] in p.stderr and f"exit {code}" in p.stderr
    assert "good end" in p.stderr
    assert not (tmp_path / "out" / "issue.md").exists()


def test_candidate_that_lacks_the_script_is_a_skip(tmp_path, kit) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    ok = "#!/bin/sh\nexit $(cat src/code)\n"
    shas = []
    for i in range(10):  # c4 lacks the script
        files: dict[str, str | None] = {"src/code": "1" if i >= 7 else "0", "repro.sh": None if i == 4 else ok}
        shas.append(commit_files(kit, repo, files, f"c{i}", exe=("repro.sh",)))
    r = write_recipe(tmp_path, repo, {"command": ["./repro.sh"]}, "command", bisect={"good": shas[0], "bad": shas[9]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["first_bad"]["ref"] == shas[7] and final["last_good"]["ref"] == shas[6]
    assert "cannot run" in p.stderr  # c4 was probed and used as skip


# ----------------------------------------------------------------- 4: non-linear history

BUG_CHECK = "import os, sys\nsys.exit(1 if os.path.exists('BUG') else 0)\n"


def topic_history(kit, tmp_path: Path, bug_on_topic: bool) -> dict[str, str]:
    repo = init_repo(kit, tmp_path / "repo")
    s = {"base": commit_files(kit, repo, {"check.py": BUG_CHECK, "main.txt": "0"}, "base")}
    kit.git(repo, "checkout", "-q", "-b", "topic")
    s["t1"] = commit_files(kit, repo, {"topic.txt": "1", **({"BUG": "x"} if bug_on_topic else {})}, "topic 1")
    s["t2"] = commit_files(kit, repo, {"topic.txt": "2"}, "topic 2")
    s["t3"] = commit_files(kit, repo, {"topic.txt": "3"}, "topic 3")
    kit.git(repo, "checkout", "-q", "main")
    s["m0"] = commit_files(kit, repo, {"main.txt": "m0"}, "main 0")  # the good end: after the fork
    s["m1"] = commit_files(kit, repo, {"main.txt": "m1", **({} if bug_on_topic else {"BUG": "x"})}, "main 1")
    s["m2"] = commit_files(kit, repo, {"main.txt": "m2"}, "main 2")
    kit.git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    s["merge"] = kit.git(repo, "rev-parse", "HEAD")
    s["m3"] = commit_files(kit, repo, {"main.txt": "m3"}, "main 3")
    s["m4"] = commit_files(kit, repo, {"main.txt": "m4"}, "main 4")
    return s


def test_bug_from_a_topic_branch_names_the_branch_commit_and_its_merge(tmp_path, kit) -> None:
    s = topic_history(kit, tmp_path, bug_on_topic=True)
    r = write_recipe(tmp_path, tmp_path / "repo", {"command": [PY, "check.py"]}, "command",
                     source={"first_parent": False}, bisect={"good": s["m0"], "bad": s["m4"]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    res = result(tmp_path)
    final = res["stages"][-1]
    assert final["first_bad"]["ref"] == s["t1"]
    assert final["last_good"]["ref"] == s["base"]  # a parent of the culprit
    assert s["merge"] in final["message"]  # reported together with the merge that brought it in
    assert res["stages"][0]["first_bad"]["ref"] == s["merge"]
    # the printed Reproduce command works: last good is an ancestor (parent) of first bad
    assert f"--good {s['base']} --bad {s['t1']}" in res["reproduce"]
    again = kit.run_cli("--state", str(tmp_path / "s2"), "run", str(r), "--good", s["base"], "--bad", s["t1"],
                        "--out", str(tmp_path / "out2"))
    assert again.returncode == 0, again.stderr


def test_bug_from_a_main_line_commit_names_that_commit_not_the_merge(tmp_path, kit) -> None:
    s = topic_history(kit, tmp_path, bug_on_topic=False)
    r = write_recipe(tmp_path, tmp_path / "repo", {"command": [PY, "check.py"]}, "command",
                     source={"first_parent": False}, bisect={"good": s["m0"], "bad": s["m4"]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["first_bad"]["ref"] == s["m1"] and final["last_good"]["ref"] == s["m0"]


# ----------------------------------------------------------------- 5: threshold drift

DRIFT_REPRO = """\
import json, sys
size = int(sys.argv[1])
thr = json.load(open("state.json"))["threshold"]
sys.exit(1 if thr is not None and size > thr else 0)
"""


def test_threshold_drift_names_the_regression_and_reports_where_it_moved(tmp_path, kit) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = []
    for i in range(12):
        thr = None if i < 3 else 20000 if i < 8 else 6000
        shas.append(commit_files(kit, repo, {"repro.py": DRIFT_REPRO, "state.json": json.dumps({"threshold": thr})},
                                 f"c{i}"))
    r = write_recipe(tmp_path, repo, {"command": [PY, "repro.py", "{size}"], "min_size": 2000, "max_size": 32000},
                     "garbage", bisect={"good": shas[0], "bad": shas[11], "drift": True})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    res = result(tmp_path)
    final = res["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[3]
    (drift,) = res["findings"]
    assert drift["status"] == "culprit" and drift["first_bad"]["ref"] == shas[8]
    assert "threshold moved from ~20" in drift["message"] and "~6" in drift["message"]
    assert shas[8][:10] in (tmp_path / "out" / "report.md").read_text()


# ----------------------------------------------------------------- 6: coupled components

COUPLED = """\
import os, sys
vllm, aiter = sys.argv[1], sys.argv[2]
v = int(open(os.path.join(vllm, "src", "n")).read())
a = int(open(os.path.join(aiter, "src", "n")).read())
if v >= 9 and a < 4:
    print("vllm needs aiter.new_api (aiter >= a4)", file=sys.stderr)
    sys.exit(125)
sys.exit(1 if v >= 9 else 0)
"""


def test_coupled_components_bisect_vllm_with_aiter_pinned_at_the_bad_end(tmp_path, kit) -> None:
    v = init_repo(kit, tmp_path / "vllm")
    a = init_repo(kit, tmp_path / "aiter")
    vs = [commit_files(kit, v, {"src/n": str(i)}, f"v{i}") for i in range(16)]
    as_ = [commit_files(kit, a, {"src/n": str(i)}, f"a{i}") for i in range(10)]
    (tmp_path / "check.py").write_text(COUPLED)
    r = write_recipe(tmp_path, v, {"command": [PY, str(tmp_path / "check.py"), "{source:vllm}", "{source:aiter}"]},
                     "command", source={"component": "vllm"},
                     bisect={"components": {"vllm": {"repo": str(v)}, "aiter": {"repo": str(a)}}})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    "--good", f"vllm={vs[0]},aiter={as_[0]}", "--bad", f"vllm={vs[15]},aiter={as_[9]}")
    assert p.returncode == 0, p.stdout + p.stderr
    res = result(tmp_path)
    att, st = res["stages"]
    assert "needed" in att["message"]
    assert st["component"] == "vllm" and st["first_bad"]["ref"] == vs[9] and st["last_good"]["ref"] == vs[8]
    assert all(c["meta"]["commits"]["aiter"] == as_[9] for c in st["candidates"])


# ----------------------------------------------------------------- 7: plausibility and the exit code

MARK_CHECK = "import sys\nsys.exit(1 if 'BROKEN' in open(sys.argv[1]).read() else 0)\n"


@pytest.mark.parametrize("path", ["CMakeLists.txt", "requirements/rocm.txt"])
def test_build_file_culprit_in_runtime_paths_is_blamed(tmp_path, kit, path) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"check.py": MARK_CHECK, path: "ok\n", "src/a.py": "0"}, "c0")]
    for i in range(1, 10):
        files = {"src/a.py": str(i)} if i != 6 else {path: "BROKEN\n"}
        shas.append(commit_files(kit, repo, files, f"c{i}"))
    rt = ["vllm/", "csrc/", "CMakeLists.txt", "setup.py", "requirements/"]  # the GLM recipe's
    r = write_recipe(tmp_path, repo, {"command": [PY, "check.py", path]}, "command",
                     source={"runtime_paths": rt}, bisect={"good": shas[0], "bad": shas[9]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    res = result(tmp_path)
    assert res["stages"][-1]["first_bad"]["ref"] == shas[6] and res["stages"][-1]["flags"] == []
    assert any(n.startswith("may blame") for n in res["notes"])


def test_culprit_that_will_not_be_blamed_exits_3_and_the_report_says_why(tmp_path, kit) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"check.py": MARK_CHECK, "docs/notes.md": "ok\n", "src/a.py": "0"}, "c0")]
    for i in range(1, 8):
        files = {"src/a.py": str(i)} if i != 4 else {"docs/notes.md": "BROKEN\n"}
        shas.append(commit_files(kit, repo, files, f"c{i}"))
    r = write_recipe(tmp_path, repo, {"command": [PY, "check.py", "docs/notes.md"]}, "command",
                     source={"runtime_paths": ["src/"]}, bisect={"good": shas[0], "bad": shas[7]})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 3, p.stdout + p.stderr
    res = result(tmp_path)
    assert res["status"] == "culprit" and res["stages"][-1]["flags"] == ["docs-tests-only"]
    assert any(n.startswith("will not blame") for n in res["notes"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "### Culprit\n" in md and "no single culprit" not in md.lower() and "not blamed" in md


# ----------------------------------------------------------------- issue 15: budget in the plan


def test_plan_prints_the_budget_derived_from_the_information_bound(tmp_path, kit) -> None:
    repo = init_repo(kit, tmp_path / "repo")
    shas = [commit_files(kit, repo, {"check.py": BUG_CHECK, "src/n": str(i)}, f"c{i}") for i in range(40)]
    r = write_recipe(tmp_path, repo, {"command": [PY, "check.py"]}, "command",
                     bisect={"good": shas[0], "bad": shas[39], "flake": {"false_positive": 0.2, "false_negative": 0.2}})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "3 x information bound" in p.stdout
    r2 = write_recipe(tmp_path, repo, {"command": [PY, "check.py"]}, "command",
                      bisect={"good": shas[0], "bad": shas[39], "max_probes": 30,
                              "flake": {"false_positive": 0.2, "false_negative": 0.2}})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r2), "--dry-run")
    assert "budget 30 probes (max_probes)" in p.stdout

