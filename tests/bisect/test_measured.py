"""Issue 39, input 3: a performance regression bisected with the measured-value reproducer
(``regress: slower``) through ``bisectbot run``, the local runner and real git histories.

The kind: *a number that moves by less than its noise's spread between single runs, in one commit*.
What an input fixes, and the members tested: the noise's size (sigma 6 %, and 0 %: identical
samples), the step (an 18 % drop; a 2x slowdown; none), the metric's direction (throughput, higher
is better; latency, lower is better), the output form (a bare number; a JSON object with a named
key; text above the number), where the change sits (c10 of 21; the last commit; the first), the
ends (reversed: a good end that is slower, nothing to bisect), and a command that fails or prints
no number (a skip, never a verdict).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

PY = sys.executable

#: The benchmark: throughput (or latency) with Gaussian noise of relative sigma SPEED_SIGMA around
#: the commit's mean (src/mean). Draw n of commit i is random.Random(f"{seed}-{i}-{n}"), n counted in
#: SPEED_DIR across the run: the samples of a run are the seed's, re-probes draw new ones.
BENCH = """\
import json, os, random, sys
i = int(open("src/idx").read())
mean = float(open("src/mean").read())
d = os.environ["SPEED_DIR"]
n_file = os.path.join(d, f"draws-{i}")
n = int(open(n_file).read()) if os.path.exists(n_file) else 0
open(n_file, "w").write(str(n + 1))
rng = random.Random(f"{os.environ['SPEED_SEED']}-{i}-{n}")
v = mean * (1 + float(os.environ.get("SPEED_SIGMA", "0.06")) * rng.gauss(0, 1))
form = os.environ.get("SPEED_FORM", "bare")
print("warming up ... 3 requests")  # output above the last line is the command's own
if form == "json":
    print(json.dumps({"requests": 100, "tok_per_s": round(v, 3), "ttft_ms": 12.5}))
else:
    print(round(v, 4))
"""


def history(kit, repo: Path, means: list[float]) -> list[str]:
    repo.mkdir(parents=True)
    kit.git(repo, "init", "-q", "-b", "main")
    shas = []
    for i, m in enumerate(means):
        (repo / "src").mkdir(exist_ok=True)
        (repo / "bench.py").write_text(BENCH)
        (repo / "src" / "idx").write_text(str(i))
        (repo / "src" / "mean").write_text(str(m))
        kit.git(repo, "add", "-A")
        kit.git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(kit.git(repo, "rev-parse", "HEAD"))
    return shas


def recipe(d: Path, repo: Path, good: str, bad: str, **measure) -> Path:
    data = {
        "name": "speed",
        "source": {"kind": "git", "repo": str(repo)},
        "reproducer": {"kind": "command", "command": [PY, "bench.py"], "command_timeout_s": 30,
                       **({"measure": measure} if measure else {})},
        "regress": "slower",
        "bisect": {"good": good, "bad": bad},
        "report": {"dir": str(d / "out")},
        "env_passthrough": ["SPEED_DIR", "SPEED_SEED", "SPEED_SIGMA", "SPEED_FORM"],
    }
    d.mkdir(parents=True, exist_ok=True)
    p = d / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def run(kit, d: Path, r: Path, seed: int, **env: str):
    d.mkdir(parents=True, exist_ok=True)
    p = kit.run_cli("--state", str(d / "s"), "run", str(r),
                    env={"SPEED_DIR": str(d), "SPEED_SEED": str(seed), **env})
    res = json.loads((d / "out" / "result.json").read_text()) if (d / "out" / "result.json").is_file() else None
    return p, res


@pytest.mark.slow
def test_an_18_percent_drop_at_sigma_6_is_named_without_a_wrong_commit(tmp_path, kit) -> None:
    """Input 3 over 3 seeds (each ~30 s on CI's 2 cores); the done-when's 20 seeds (c10 named in >= 95 %,
    never a wrong commit) are ``benchmarks/measured.py``, which runs this world through the CLI."""
    means = [100.0] * 10 + [82.0] * 11
    shas = history(kit, tmp_path / "repo", means)
    named = 0
    for seed in range(3):
        d = tmp_path / f"seed{seed}"
        p, res = run(kit, d, recipe(d, tmp_path / "repo", shas[0], shas[-1]), seed)
        assert p.returncode in (0, 3), p.stderr[-2000:]
        final = res["stages"][-1]
        if final["status"] == "culprit":
            assert final["first_bad"]["ref"] == shas[10], (seed, final["first_bad"], p.stdout[-3000:])
            named += 1
    assert named >= 2, named  # each seed names it with probability ~0.99 (a simulation of the rule: 992 of 1,000)


def test_every_verdict_says_what_was_measured_and_keeps_the_samples(tmp_path, kit) -> None:
    means = [100.0] * 10 + [82.0] * 11
    shas = history(kit, tmp_path / "repo", means)
    p, res = run(kit, tmp_path / "a", recipe(tmp_path / "a", tmp_path / "repo", shas[0], shas[-1]), 3)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    final = res["stages"][-1]
    assert final["first_bad"]["ref"] == shas[10]
    for pr in final["probes"]:
        m = pr["extra"]["measure"]
        assert m["metric"] == "value" and m["better"] == "higher"
        assert len(m["samples"]) >= 10 and all(isinstance(v, float) for v in m["samples"])
        # the world's noise is real inside the sandbox: its draw counters persist (SPEED_DIR is a writable
        # path of the sandbox, tests/conftest.py); a dropped write made every sample of a probe one number
        assert len(set(m["samples"])) == len(m["samples"]), m["samples"]
        assert str(len(m["samples"])) in pr["reason"] or "measured first" in pr["reason"]
    culprit = next(pr for pr in final["probes"] if pr["candidate"]["ref"] == shas[10])
    assert culprit["verdict"] == "bad" and "slower than the good end" in culprit["reason"]
    assert culprit["extra"]["measure"]["vs_good"]["p"] < 0.01
    # the samples of the ends: the bad end first, then the good end judged against it
    first_two = [pr["candidate"]["ref"] for pr in final["probes"][:2]]
    assert first_two == [shas[-1], shas[0]]


@pytest.mark.parametrize("where", [1, 20])
def test_a_change_at_either_edge_of_the_range(tmp_path, kit, where: int) -> None:
    means = [100.0] * where + [82.0] * (21 - where)
    shas = history(kit, tmp_path / "repo", means)
    p, res = run(kit, tmp_path / "a", recipe(tmp_path / "a", tmp_path / "repo", shas[0], shas[-1]), 7)
    assert p.returncode == 0, p.stdout[-3000:]
    assert res["stages"][-1]["first_bad"]["ref"] == shas[where]


def test_latency_lower_is_better_from_a_json_key_with_a_2x_slowdown(tmp_path, kit) -> None:
    means = [50.0] * 6 + [100.0] * 6  # latency doubles at c6
    shas = history(kit, tmp_path / "repo", means)
    d = tmp_path / "a"
    r = recipe(d, tmp_path / "repo", shas[0], shas[-1], metric="tok_per_s", better="lower", samples=5)
    p, res = run(kit, d, r, 1, SPEED_FORM="json")
    assert p.returncode == 0, p.stdout[-3000:]
    final = res["stages"][-1]
    assert final["first_bad"]["ref"] == shas[6]
    assert all(pr["extra"]["measure"]["metric"] == "tok_per_s" for pr in final["probes"])


@pytest.mark.parametrize("means, why", [
    ([100.0] * 12, "nothing to bisect"),  # no change at all
    ([82.0] * 6 + [100.0] * 6, "the wrong way"),  # the "bad" end is faster: reversed ends
])
def test_no_culprit_without_a_slowdown_between_the_ends(tmp_path, kit, means, why) -> None:
    shas = history(kit, tmp_path / "repo", means)
    p, res = run(kit, tmp_path / "a", recipe(tmp_path / "a", tmp_path / "repo", shas[0], shas[-1], samples=5,
                                            max_samples=15), 2)
    assert p.returncode == 3, p.stdout[-3000:]
    final = res["stages"][-1]
    assert final["status"] != "culprit" and final.get("first_bad") is None
    good_end = next(pr for pr in final["probes"] if pr["candidate"]["ref"] == shas[0])
    assert why in good_end["reason"], good_end["reason"]
    # the run's message says what was measured, not "the regression is older than the range"
    assert "cannot be told apart as a slowdown" in final["message"] and "older than the range" not in final["message"]


def test_identical_samples_are_no_difference(tmp_path, kit) -> None:
    """sigma 0: every sample equal; a rank test of equal values has no information (p = 1), and a
    clean step (all of one side below all of the other) is p < 0.01 from 10 samples each."""
    means = [100.0] * 8 + [90.0] * 8
    shas = history(kit, tmp_path / "repo", means)
    p, res = run(kit, tmp_path / "a", recipe(tmp_path / "a", tmp_path / "repo", shas[0], shas[-1]), 0,
                 SPEED_SIGMA="0")
    assert p.returncode == 0, p.stdout[-3000:]
    assert res["stages"][-1]["first_bad"]["ref"] == shas[8]


@pytest.mark.parametrize("metric, form, field", [
    ("no_such_key", "json", "reproducer.measure.metric"),  # a key the output does not have
    (None, "json", "reproducer.command"),  # three numeric keys and none named
])
def test_output_without_a_number_on_both_ends_is_the_recipes_fault(tmp_path, kit, metric, form, field) -> None:
    """Not a verdict and not "choose another bad end": both ends printed no measurement, so the run
    stops with exit 2 naming the field (as a command that cannot run on either end does)."""
    means = [100.0] * 8 + [82.0] * 8
    shas = history(kit, tmp_path / "repo", means)
    d = tmp_path / "a"
    r = recipe(d, tmp_path / "repo", shas[0], shas[-1], **({"metric": metric} if metric else {}))
    p, res = run(kit, d, r, 0, SPEED_FORM=form)
    assert p.returncode == 2, p.stdout[-3000:] + p.stderr[-2000:]
    lines = r.read_text().splitlines()
    key = next(i for i, ln in enumerate(lines, 1) if ln.strip().startswith("metric:" if metric else "command:"))
    import re

    m = re.search(r"r\.yaml:(\d+):\d+: " + re.escape(field) + ": ", p.stderr)
    assert m and int(m[1]) in (key, key + 1) and "on either end" in p.stderr, p.stderr  # the key, or its list
    assert "--retry-errors" not in p.stderr


def test_no_number_on_the_bad_end_only_is_an_untestable_end(tmp_path, kit) -> None:
    means = [100.0] * 8 + [82.0] * 8
    shas = history(kit, tmp_path / "repo", means)
    (tmp_path / "repo" / "bench.py").write_text(BENCH.replace('print(round(v, 4))', 'print("it broke")'))
    kit.git(tmp_path / "repo", "commit", "-qam", "the bench prints no number")
    bad = kit.git(tmp_path / "repo", "rev-parse", "HEAD")
    d = tmp_path / "a"
    p, res = run(kit, d, recipe(d, tmp_path / "repo", shas[0], bad), 0)
    assert p.returncode == 3, p.stdout[-3000:] + p.stderr[-2000:]
    assert res["stages"][-1]["status"] == "boundary-failed" and "neither a number" in p.stdout


def test_the_report_shows_the_metric_per_candidate_with_its_spread(tmp_path, kit) -> None:
    means = [100.0] * 6 + [70.0] * 6
    shas = history(kit, tmp_path / "repo", means)
    d = tmp_path / "a"
    p, res = run(kit, d, recipe(d, tmp_path / "repo", shas[0], shas[-1], samples=5), 4)
    assert p.returncode == 0, p.stdout[-3000:]
    report = (d / "out" / "report.md").read_text()
    assert "| value median (IQR), samples |" in report
    import re

    rows = re.findall(r"^\| \d+ \| .* \| (?:good|bad|skip) \| ([0-9.]+) \(([0-9.]+)-([0-9.]+)\), n=(\d+) \|", report, re.M)
    assert len(rows) == len(res["stages"][-1]["probes"])
    for med, lo, hi, n in rows:
        assert float(lo) <= float(med) <= float(hi) and int(n) >= 5
    # what was measured: the ends and the culprit with its predecessor, each against the good end
    assert "### What was measured: value (higher is better)" in report
    for role in ("good end", "last good", "first bad", "bad end"):
        assert re.search(rf"^\| {role} \| .* \| [0-9.]+ \([0-9.-]+\), n=\d+ \| ", report, re.M), role
    first_bad = re.search(r"^\| first bad \| .* \| ([+-][0-9.]+) % \| ([0-9.e-]+) \|$", report, re.M)
    assert first_bad and float(first_bad[1]) < -15 and float(first_bad[2]) < 0.01, report
    assert "measured search: each verdict from 5 to 30 samples" in report
    assert "set reproducer.repeats or bisect.flake" not in report  # repeats do not apply to a measured value
    # Reproduce without bisectbot: no server to start, the command to run and what to compare
    assert "1. Get the first bad candidate:" in report and "candidate's server" not in report
    assert ("2. Run the reproducer there, 5 times or more on each candidate, and compare the medians of the number "
            "on its last stdout line (higher is better):") in report
    assert "bench.py\n```" in report


def test_a_second_run_answers_from_the_ledger_and_parallel_probes_share_the_ends(tmp_path, kit) -> None:
    """Resume: the same run again draws no sample (every probe, the ends' samples with it, comes from
    the ledger) and names the same culprit; with bisect.parallel 2 the ends are still measured one
    after the other and the probes after them judged against both."""
    means = [100.0] * 9 + [80.0] * 9
    shas = history(kit, tmp_path / "repo", means)
    d = tmp_path / "a"
    r = recipe(d, tmp_path / "repo", shas[0], shas[-1], samples=6)
    data = yaml.safe_load(r.read_text())
    data["bisect"]["parallel"] = 2
    r.write_text(yaml.safe_dump(data))
    p, res = run(kit, d, r, 11)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert res["stages"][-1]["first_bad"]["ref"] == shas[9]
    probes = res["stages"][-1]["probes"]
    assert [pr["candidate"]["ref"] for pr in probes[:2]] == [shas[-1], shas[0]]
    draws = {f.name: f.read_text() for f in d.glob("draws-*")}
    p2, res2 = run(kit, d, r, 11)
    assert p2.returncode == 0, p2.stdout[-3000:]
    assert res2["stages"][-1]["first_bad"]["ref"] == shas[9]
    assert {f.name: f.read_text() for f in d.glob("draws-*")} == draws  # nothing measured again


def test_planned_rounds_refuse_a_measured_recipe(tmp_path, kit) -> None:
    shas = history(kit, tmp_path / "repo", [100.0, 80.0])
    r = recipe(tmp_path, tmp_path / "repo", shas[0], shas[-1])
    p = kit.run_cli("--state", str(tmp_path / "s"), "round", "plan", str(r))
    assert p.returncode == 2 and "r.yaml:" in p.stderr and "'slower' judges each candidate" in p.stderr, p.stderr


def test_the_plan_and_the_first_line_say_a_probe_is_samples(tmp_path, kit) -> None:
    shas = history(kit, tmp_path / "repo", [100.0] * 4 + [80.0] * 4)
    r = recipe(tmp_path, tmp_path / "repo", shas[0], shas[-1], samples=6, max_samples=18)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "measured: 6-18 samples (command runs) of the command's number per probe" in p.stdout, p.stdout
    assert "round" not in p.stderr  # no warning about planned rounds the user does not use
    v = kit.run_cli("recipe", "validate", str(r))
    assert v.returncode == 0 and not v.stderr.strip(), v.stderr


def test_samples_of_another_metric_are_never_compared(tmp_path, kit) -> None:
    """Hostile pass: with measure.metric unset, the only key of the benchmark's JSON changed at c5
    (tok_per_s -> ttft_ms) and the samples of two metrics were compared, naming c5. Kind: *samples
    that are not of one quantity*. Now no verdict crosses the change."""
    one_key = BENCH.replace('"requests": 100, ', "").replace(', "ttft_ms": 12.5', "")
    assert one_key != BENCH
    # c0..c4 print {"tok_per_s": v}, c5..c9 print {"ttft_ms": v}
    repo2 = tmp_path / "repo2"
    repo2.mkdir()
    kit.git(repo2, "init", "-q", "-b", "main")
    shas = []
    for i in range(10):
        (repo2 / "src").mkdir(exist_ok=True)
        (repo2 / "bench.py").write_text(one_key if i < 5 else one_key.replace("tok_per_s", "ttft_ms"))
        (repo2 / "src" / "idx").write_text(str(i))
        (repo2 / "src" / "mean").write_text("100.0")
        kit.git(repo2, "add", "-A")
        kit.git(repo2, "commit", "-qm", f"c{i}")
        shas.append(kit.git(repo2, "rev-parse", "HEAD"))
    d = tmp_path / "a"
    p, res = run(kit, d, recipe(d, repo2, shas[0], shas[-1], samples=5), 0, SPEED_FORM="json")
    final = res["stages"][-1] if res else {}
    assert p.returncode != 0 and final.get("status") != "culprit", p.stdout[-3000:]
    assert "not one metric" in p.stdout + p.stderr + json.dumps(final), p.stdout[-3000:]
