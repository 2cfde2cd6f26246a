"""What a new user with a flaky regression hit (session 21, h3user walkthrough), each through
``bisectbot run`` / ``recipe validate`` on a real git history with a shell reproducer.

1. ``{size}`` in a command reproducer under the implied ``regress: command`` reached the
   command as the literal text ``{size}`` (``sh: [: Illegal number: {size}``): the run said
   "no-regression", and ``bisect.drift: true`` silently did nothing; now refused with
   ``FILE:LINE:COL: reproducer.command[i]`` (and ``bisect.drift``), exit 2.
2. ``repeats: 5`` without ``bisect.flake``: ``--dry-run`` and the first progress line called
   the search "exact, no budget needed" although it turns noisy at the bad end.
3. The report said "after 13 runs of the command" for 13 probes of up to 5 runs each, and
   "confidence 1.00" for a posterior of 0.998.
4. A reproducer that cannot run named the command but not the recipe file/line/field; a
   cross-field recipe error (``regress: diverges`` without a reference) was reported at
   ``1:1: (top level)``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from bisectbot.bisect import confidence_text


def make_history(kit, path: Path, n: int, bug_from: int) -> list[str]:
    """``n`` commits c0..c(n-1); the file ``bug`` holds 1 from commit ``bug_from`` on."""
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (path / "bug").write_text("1\n" if i >= bug_from else "0\n")
        (path / "code.txt").write_text(f"c{i}\n")
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "-m", f"c{i}: change {i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def recipe_text(repo: Path, out: Path, shas: list[str], command: list[str], **extra) -> str:
    data = {
        "name": "walkthrough",
        "source": {"kind": "git", "repo": str(repo), "component": "app"},
        "reproducer": {"kind": "command", "command": command, "command_timeout_s": 30},
        "bisect": {"good": shas[0], "bad": shas[-1]},
        "report": {"dir": str(out)},
    }
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k].update(v)
        else:
            data[k] = v
    return yaml.safe_dump(data, sort_keys=False)


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_size_placeholder_under_regress_command_is_refused_with_its_line(tmp_path, kit) -> None:
    repo = tmp_path / "repo"
    shas = make_history(kit, repo, 12, 3)
    sh = "t=$(cat bug); [ $t = 1 ] && [ {size} -ge 6000 ] && exit 1; exit 0"
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo, tmp_path / "out", shas, ["sh", "-c", sh],
                             reproducer={"min_size": 1000, "max_size": 40000}, bisect={"drift": True}))
    text = r.read_text()
    for args in (["run", str(r)], ["run", str(r), "--dry-run"]):
        p = kit.run_cli("--state", str(tmp_path / "s"), *args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert f"{r}:{line_of(text, '{size}')}:" in p.stderr and "reproducer.command[2]:" in p.stderr, p.stderr
        assert "literal text '{size}'" in p.stderr and "regress: garbage" in p.stderr, p.stderr
        assert f"{r}:{line_of(text, 'drift:')}:" in p.stderr and "bisect.drift:" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "out" / "result.json").exists()  # nothing probed, nothing reported
    p = kit.run_cli("recipe", "validate", str(r))  # probe --recipe may use it: a warning, not a failure
    assert p.returncode == 0 and "warning: bisectbot run refuses this" in p.stderr, p.stdout + p.stderr

    # the fix the message names: regress: garbage makes it a threshold search, {size} substituted
    r.write_text(recipe_text(repo, tmp_path / "out", shas, ["sh", "-c", sh], regress="garbage",
                             reproducer={"min_size": 1000, "max_size": 40000}))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    final = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[3]


def test_repeats_without_flake_rates_are_not_announced_as_an_exact_search(tmp_path, kit) -> None:
    repo = tmp_path / "repo"
    shas = make_history(kit, repo, 16, 11)
    # the bug shows in every run here; what matters is what the plan and progress say
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo, tmp_path / "out", shas, ["sh", "-c", "test $(cat bug) = 0"],
                             reproducer={"repeats": 4}))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--dry-run")
    assert p.returncode == 0, p.stdout + p.stderr
    search = next(ln for ln in p.stdout.splitlines() if ln.startswith("search:"))
    assert "search: exact," not in search and "no budget needed" not in search, search
    assert "each candidate's 4 runs a probe are weighed" in search and "noisy search" in search, search
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    first = next(ln for ln in p.stderr.splitlines() if ln.startswith("stage 1:"))
    assert "no budget needed" not in first and "each candidate's 4 runs a probe are weighed" in first, first
    rates = next(ln for ln in p.stderr.splitlines() if ln.startswith("no bisect.flake rates: the search weighs"))
    assert re.search(r"budget \d+ good/bad verdicts", rates), rates
    final = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert final["first_bad"]["ref"] == shas[11]


def test_report_counts_every_run_of_the_command_and_never_rounds_up_to_certainty(tmp_path, kit) -> None:
    repo = tmp_path / "repo"
    shas = make_history(kit, repo, 16, 9)
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo, tmp_path / "out", shas, ["sh", "-c", "test $(cat bug) = 0"],
                             reproducer={"repeats": 3},
                             bisect={"flake": {"false_positive": 0.01, "false_negative": 0.3}}))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    probes = [q for st in res["stages"] for q in st["probes"]]
    runs = sum(q["extra"]["runs"] for q in probes)
    assert runs > len(probes)  # good candidates ran their command 3 times, bad ones stopped at once
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"after {runs} runs of the command in {len(probes)} probes." in report, report[:600]
    conf = res["stages"][-1]["confidence"]
    assert 0.5 < conf < 1
    assert f"confidence {confidence_text(conf)}" in report and "confidence 1.00" not in report, report[:600]
    assert "confidence 100.0%" not in p.stdout, p.stdout


def test_confidence_text_never_rounds_a_probability_below_one_up_to_one() -> None:
    assert confidence_text(1.0) == "1.00" and confidence_text(1.0, percent=True) == "100.0%"
    assert confidence_text(0.97) == "0.97" and confidence_text(0.6666) == "0.67"
    assert confidence_text(0.998) == "0.998" and confidence_text(0.998, percent=True) == "99.8%"
    assert confidence_text(0.9996) == "0.9996" and confidence_text(0.99996, percent=True) == "99.996%"
    assert confidence_text(1 - 1e-9) == ">0.9999" and confidence_text(1 - 1e-9, percent=True) == ">99.999%"


def test_unrunnable_command_and_cross_field_errors_name_file_line_and_field(tmp_path, kit) -> None:
    repo = tmp_path / "repo"
    shas = make_history(kit, repo, 6, 3)
    (repo / "repro.sh").write_text("#!/bin/sh\ntest \"$(cat bug)\" = 0\n")  # not executable (mode 644)
    kit.git(repo, "add", "-A")
    kit.git(repo, "commit", "-q", "-m", "c6: add the reproducer")
    shas.append(kit.git(repo, "rev-parse", "HEAD"))
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo, tmp_path / "out", [shas[0], shas[-1]], ["./repro.sh"]))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 2, p.stdout + p.stderr
    assert re.search(rf"{re.escape(str(r))}:\d+:\d+: reproducer\.command: "
                     r"the reproducer command cannot run", p.stderr), p.stderr
    assert "Traceback" not in p.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: x\nsource:\n  kind: git\n  repo: {repo}\nregress: diverges\n"
                   "reproducer:\n  min_size: 9000\n  max_size: 100\n")
    p = kit.run_cli("recipe", "validate", str(bad))
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{bad}:7:" in p.stderr and "reproducer.min_size: min_size (9000) is larger" in p.stderr, p.stderr
    bad.write_text(f"name: x\nsource:\n  kind: git\n  repo: {repo}\nregress: diverges\n")
    p = kit.run_cli("recipe", "validate", str(bad))
    assert p.returncode == 2 and f"{bad}:5:10: regress: regress 'diverges' needs" in p.stderr, p.stderr


def test_inconclusive_search_reports_a_best_guess_not_a_culprit_and_its_reproduce_repeats_it(tmp_path, kit) -> None:
    """5 probes of a noisy search over 20 commits: the report said "No single culprit named" above
    a "### Culprit" table, the CLI "first bad is one of: <one sha>", and the Reproduce command
    bisected between the best guess's ends (never probed together) instead of repeating the search."""
    repo = tmp_path / "repo"
    shas = make_history(kit, repo, 20, 14)
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo, tmp_path / "out", shas, ["sh", "-c", "test $(cat bug) = 0"],
                             reproducer={"repeats": 2},
                             bisect={"max_probes": 5, "flake": {"false_positive": 0.01, "false_negative": 0.2}}))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert p.returncode == 3, p.stdout + p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    final = res["stages"][-1]
    assert final["status"] == "inconclusive" and final["culprits"], final
    assert "best guess (nobody blamed)" in p.stdout and " is one of: " not in p.stdout, p.stdout
    report = (tmp_path / "out" / "report.md").read_text()
    assert "### Culprit" not in report and "### Best guess (inconclusive: not a culprit)" in report, report[:1500]
    assert "first bad (best guess):" in report and ": inconclusive, best guess between " in report
    cmd = next(ln for ln in report.splitlines() if ln.startswith("bisectbot "))
    assert f"--good {shas[0]} --bad {shas[-1]} " in cmd, cmd
    argv = shlex.split(cmd)[1:]
    again = kit.run_cli(*argv)  # pasted as printed: the same search, from the ledger
    assert again.returncode == 3, again.stdout + again.stderr
    rep = json.loads((tmp_path / "out" / "reproduce" / "result.json").read_text())
    assert rep["stages"][-1]["status"] == "inconclusive"
    assert [c["ref"] for c in rep["stages"][-1]["culprits"]] == [c["ref"] for c in final["culprits"]]


FIX_FLAKY = ('f="$FLAKY_DIR/$(cat code.txt)"; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$f"; '
             'if [ "$(cat bug)" = 1 ] && [ $((n % 3)) = 0 ]; then exit 1; fi; exit 0')


def test_fix_bisection_repeats_combine_towards_still_broken(tmp_path, kit) -> None:
    """regress: success, repeats: 3, a bug that shows in 1 of 3 runs before the fix (c11 of 16).
    The one-sided side of a fix search is "the bug showed" (a fixed build never shows it), so one
    failing run makes a probe "still broken". Before: one passing run made it "fixed" -- the good
    end c0 read "fixed (2 of 3 runs bad)" and the run ended boundary-failed (exit 3)."""
    repo2 = tmp_path / "repo2"  # the bug is there until c11 fixes it
    repo2.mkdir()
    kit.git(repo2, "init", "-q", "-b", "main")
    shas = []
    for i in range(16):
        (repo2 / "bug").write_text("0\n" if i >= 11 else "1\n")
        (repo2 / "code.txt").write_text(f"c{i}\n")
        kit.git(repo2, "add", "-A")
        kit.git(repo2, "commit", "-q", "-m", f"c{i}")
        shas.append(kit.git(repo2, "rev-parse", "HEAD"))
    counters = tmp_path / "counters"
    counters.mkdir()
    r = tmp_path / "r.yaml"
    r.write_text(recipe_text(repo2, tmp_path / "out", shas, ["sh", "-c", FIX_FLAKY], regress="success",
                             reproducer={"repeats": 3}, env_passthrough=["FLAKY_DIR"]))
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), env={"FLAKY_DIR": str(counters)})
    assert p.returncode == 0, p.stdout + p.stderr
    final = json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[11], p.stderr
    assert final["last_good"]["ref"] == shas[10]
    assert re.search(r"c0: still broken; .*\(1 of 3 runs still broken\)", p.stderr), p.stderr
    assert "hit rate at the good end (still broken): 1 of 3 runs" in p.stderr, p.stderr
