"""``bisectbot round plan|probe|import`` over a generated 300-commit history (issue 16)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest


def probe_round(kit, state: Path, recipe: Path, plan: dict, outdir: Path, env: dict | None = None) -> list[Path]:
    """Run every probe of ``plan`` as its own ``round probe`` process, all at once; the verdict files."""
    procs, files = [], []
    for n, p in enumerate(plan["probes"]):
        f = outdir / f"r{plan['round']}-{n}.json"
        procs.append(kit.cli_popen("--state", str(state), "round", "probe", str(recipe), "--session", plan["session"],
                                   "--ref", p["ref"], "--key", p["key"], "--round", str(plan["round"]),
                                   "--attempt", str(p["attempt"]), "--runner-name", f"slot-{n}",
                                   "--toggle", p["toggle"], "--out", str(f), env=env))
        files.append(f)
    for pr in procs:
        out, err = pr.communicate(timeout=300)
        assert pr.returncode == 0, err
    return files


def test_done_when_four_parallel_probes_per_round_find_the_planted_culprit(tmp_path, kit) -> None:
    n, culprit = 300, 137
    hist = kit.make_history(tmp_path / "repo", n, culprit)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", "4")
    session = plan["session"]
    rounds = 0
    while not plan["done"]:
        assert 1 <= len(plan["probes"]) <= 4 and plan["session"] == session
        rounds += 1
        assert plan["round"] == rounds
        files = probe_round(kit, state, recipe, plan, tmp_path / "verdicts")
        doc = json.loads(files[0].read_text())
        assert {"key", "verdict", "table", "evidence", "runner", "timings"} <= set(doc)
        assert doc["runner"] == "slot-0" and doc["timings"]["duration_s"] >= 0
        p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", session, *map(str, files))
        assert p.returncode == 0, p.stderr
        assert [ln.split(":", 1)[0] for ln in p.stdout.splitlines()] == ["recorded"] * len(files)
        plan = kit.plan(state, recipe, "--session", session)
    print(f"rounds: {rounds} (bound {math.ceil(math.log(n, 5)) + 2})")
    assert rounds <= math.ceil(math.log(n, 5)) + 2
    res = json.loads(Path(plan["result"]).read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit"
    assert final["first_bad"]["ref"] == hist.shas[culprit]
    assert final["last_good"]["ref"] == hist.shas[culprit - 1]
    assert (tmp_path / "out" / "report.md").exists()
    # the plan of a finished session is stable and plans nothing
    again = kit.plan(state, recipe, "--session", session)
    assert again["done"] and again["probes"] == [] and again["round"] == plan["round"]


def test_import_is_idempotent_refuses_stale_and_foreign_files_and_replans_lost_probes(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 60, 41)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    plan1 = kit.plan(state, recipe, "--slots", "4")
    s = plan1["session"]
    files = probe_round(kit, state, recipe, plan1, tmp_path / "v")

    # one probe never comes back: the next plan is the same round with just that probe
    p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", s, *map(str, files[:3]))
    assert p.returncode == 0, p.stderr
    again = kit.plan(state, recipe, "--session", s)
    assert again["round"] == 1 and [x["key"] for x in again["probes"]] == [plan1["probes"][3]["key"]]

    # idempotent: importing the same files again records nothing new
    p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", s, *map(str, files))
    assert p.returncode == 0, p.stderr
    actions = [ln.split(":", 1)[0] for ln in p.stdout.splitlines()]
    assert actions.count("already recorded") == 3 and actions.count("recorded") == 1
    plan2 = kit.plan(state, recipe, "--session", s)
    assert plan2["round"] == 2

    # a file of round 1 for a probe that is not planned: stale round, refused
    stale = json.loads(files[0].read_text())
    stale["key"] = stale["probe"]["cache_key"] = "0" * 32  # both keys of the file agree (else refused as such)
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    # a file probed under another recipe hash (the reproducer changed): refused
    other = json.loads(files[0].read_text())
    other["key"], other["round"], other["recipe_hash"] = plan2["probes"][0]["key"], 2, "deadbeefdeadbeef"
    other["probe"]["cache_key"] = other["key"]
    (tmp_path / "other.json").write_text(json.dumps(other))
    (tmp_path / "junk.json").write_text("{not json")
    p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", s,
                str(tmp_path / "stale.json"), str(tmp_path / "other.json"), str(tmp_path / "junk.json"))
    assert p.returncode == 2
    assert "round 1 is stale (the session is at round 2)" in p.stderr
    assert "recipe hash deadbeefdeadbeef" in p.stderr and "probe again" in p.stderr
    assert "junk.json: not a JSON verdict file" in p.stderr
    assert "Traceback" not in p.stderr
    assert kit.plan(state, recipe, "--session", s)["probes"] == plan2["probes"]

    # a session id that does not exist, and a changed slot count, are clear errors
    p = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", "nope")
    assert p.returncode == 2 and "no round session 'nope'" in p.stderr
    p = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s, "--slots", "2")
    assert p.returncode == 2 and "plans rounds of 4 probes" in p.stderr


@pytest.mark.parametrize("slots", [1, 3])
def test_round_session_agrees_with_run(tmp_path, kit, slots) -> None:
    """The same recipe driven by rounds and by 'bisectbot run' names the same culprit."""
    hist = kit.make_history(tmp_path / "repo", 40, 9)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", str(slots))
    while not plan["done"]:
        files = probe_round(kit, state, recipe, plan, tmp_path / "v")
        p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", plan["session"],
                    *map(str, files))
        assert p.returncode == 0, p.stderr
        plan = kit.plan(state, recipe, "--session", plan["session"])
    rounds_res = json.loads(Path(plan["result"]).read_text())
    p = kit.cli("--state", str(tmp_path / "state2"), "run", str(recipe), "--parallel", str(slots))
    assert p.returncode == 0, p.stderr
    run_res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert rounds_res["stages"][-1]["first_bad"]["ref"] == run_res["stages"][-1]["first_bad"]["ref"] == hist.shas[9]


def test_triage_toggles_are_one_round(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 20, 13)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out",
                              triage=[{"name": "workaround", "args": ["--workaround"]},
                                      {"name": "noop", "args": ["--noop"]}])
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", "4")
    toggled = []
    while not plan["done"]:
        if any(p["toggle"] for p in plan["probes"]):
            toggled.append(plan["probes"])
        files = probe_round(kit, state, recipe, plan, tmp_path / "v")
        p = kit.cli("--state", str(state), "round", "import", str(recipe), "--session", plan["session"],
                    *map(str, files))
        assert p.returncode == 0, p.stderr
        plan = kit.plan(state, recipe, "--session", plan["session"])
    assert len(toggled) == 1 and sorted(p["toggle"] for p in toggled[0]) == ["noop", "workaround"]
    assert {p["ref"] for p in toggled[0]} == {hist.shas[13]}
    res = json.loads(Path(plan["result"]).read_text())
    assert res["stages"][-1]["first_bad"]["ref"] == hist.shas[13]
    assert res["triage"] == {"workaround": "good (problem disappears)", "noop": "bad"}
