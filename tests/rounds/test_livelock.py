"""Issue 24, input 4: a chain of rounds never re-plans one round forever (through the CLI).

Progress is recorded verdicts. The shapes that looped: a probe key that always answers
transiently (a server answering 500), verdict files refused for a recipe mismatch (reduce ran
``round import ... || true``), and a hand-run ``round probe`` without the plan's key/attempt.
Each now ends: the transient key becomes a recorded skip after two answers; an import that
moves nothing fails ``--require-progress`` naming why and stops the session; ``round probe
--session S --ref R`` takes key, attempt and round from the plan. Plus: a hard cap on rounds
(``bisect.max_rounds``), one chain per session (``--chain``), ``round cancel``/``resume``.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def _probe(kit, state: Path, recipe: Path, s: str, ref: str, out: Path, *extra: str):
    r = kit.cli("--json", "--state", str(state), "round", "probe", str(recipe), "--session", s, "--ref", ref,
                "--out", str(out), *extra)
    return r


def _import(kit, state: Path, recipe: Path, s: str, *files: Path, progress: bool = True):
    return kit.cli("--json", "--state", str(state), "round", "import", str(recipe), "--session", s,
                   *(["--require-progress"] if progress else []), *map(str, files))


def test_each_livelock_shape_stops_or_progresses(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 60, 41)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out", max_rounds=4)
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", "2", "--chain", "101")
    s = plan["session"]
    (p0, p1) = plan["probes"]

    # a hand-run probe without --key/--round: the plan's key, attempt and round
    ends = []
    for i, p in enumerate((p0, p1)):
        r = _probe(kit, state, recipe, s, p["ref"], tmp_path / f"end{i}.json")
        assert r.returncode == 0, r.stderr
        doc = json.loads((tmp_path / f"end{i}.json").read_text())
        assert doc["key"] == p["key"] and doc["attempt"] == p["attempt"] and doc["round"] == plan["round"]
        ends.append(tmp_path / f"end{i}.json")
    r = _probe(kit, state, recipe, s, hist.shas[2], tmp_path / "x.json")  # not in this round's plan
    assert r.returncode == 2 and "does not plan" in r.stderr and p0["ref"][:40] in r.stderr
    assert _import(kit, state, recipe, s, *ends).returncode == 0
    r2 = kit.plan(state, recipe, "--session", s, "--chain", "101")
    assert r2["round"] == 2
    (q0, q1) = r2["probes"]

    # shape 1: a probe key that answers transiently (server 500): counted, then a recorded skip
    assert _probe(kit, state, recipe, s, q0["ref"], tmp_path / "a.json").returncode == 0
    r = _probe(kit, state, recipe, s, q1["ref"], tmp_path / "b.json")
    assert r.returncode == 0, r.stderr
    t1 = json.loads((tmp_path / "b.json").read_text())
    t1["probe"]["extra"]["transient"] = True
    # a transient answer measured nothing: no search status, no table (else the recorded skip
    # contradicts its own evidence and is dropped, verdict/record.contradiction)
    for k in ("status", "returncode", "hits"):
        t1["probe"]["extra"].pop(k, None)
    t1["probe"]["table"], t1["probe"]["threshold"] = [], None
    t1["probe"]["verdict"] = t1["verdict"] = "skip"
    t1["probe"]["reason"] = "HTTP 500 from /v1/chat/completions after 2 retries"
    (tmp_path / "t1.json").write_text(json.dumps(t1))
    t2 = {**t1, "runner": "gpu-2", "timings": {**t1["timings"], "finished": "2026-01-01T00:00:00Z"}}
    (tmp_path / "t2.json").write_text(json.dumps(t2))
    r = _import(kit, state, recipe, s, tmp_path / "a.json", tmp_path / "t1.json")
    assert r.returncode == 0, r.stderr
    acts = {Path(o["path"]).name: o for o in json.loads(r.stdout)}
    assert acts["a.json"]["action"] == "recorded" and acts["t1.json"]["action"] == "not recorded"
    assert "transient error 1 of 2" in acts["t1.json"]["message"]
    again = kit.plan(state, recipe, "--session", s, "--chain", "101")
    assert [p["key"] for p in again["probes"]] == [q1["key"]]  # only the transient one is planned again
    r = _import(kit, state, recipe, s, tmp_path / "t2.json")  # a second transient answer: recorded skip
    assert r.returncode == 0, r.stderr
    (o,) = json.loads(r.stdout)
    assert o["action"] == "recorded" and "2 transient errors, recorded as a skip" in o["message"]
    nxt = kit.plan(state, recipe, "--session", s, "--chain", "101")
    assert q1["key"] not in [p["key"] for p in nxt["probes"]] and nxt["probes"]

    # one chain per session: another chain's plan is refused
    r = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s, "--chain", "202")
    assert r.returncode == 1 and "driven by chain 101" in r.stderr

    # shape 2: files refused for a recipe mismatch: the import moves nothing -> exit 1, session stopped
    (q,) = nxt["probes"][:1]
    r = _probe(kit, state, recipe, s, q["ref"], tmp_path / "c.json")
    assert r.returncode == 0, r.stderr
    c = json.loads((tmp_path / "c.json").read_text())
    c["recipe_hash"] = "deadbeefdeadbeef"
    (tmp_path / "c.json").write_text(json.dumps(c))
    r = _import(kit, state, recipe, s, tmp_path / "c.json", tmp_path / "a.json")
    assert r.returncode == 1, r.stderr
    assert f"round session {s} stopped: round {nxt['round']} made no progress" in r.stderr
    assert "c.json: refused" in r.stderr and "recipe hash deadbeefdeadbeef" in r.stderr
    assert "a.json: already recorded" in r.stderr
    r = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s, "--chain", "101")
    assert r.returncode == 1 and f"stopped: round {nxt['round']} made no progress" in r.stderr

    # resume after the fix; cancel stops it again; resume once more
    r = kit.cli("--state", str(state), "round", "resume", str(recipe), "--session", s)
    assert r.returncode == 0, r.stderr
    assert kit.plan(state, recipe, "--session", s, "--chain", "303")["round"] == nxt["round"]
    r = kit.cli("--state", str(state), "round", "cancel", str(recipe), "--session", s)
    assert r.returncode == 0 and "stopped: cancelled by hand" in r.stderr
    r = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s)
    assert r.returncode == 1 and "cancelled by hand" in r.stderr
    kit.cli("--state", str(state), "round", "resume", str(recipe), "--session", s)

    # the hard cap: rounds past bisect.max_rounds (4) fail 'round plan'
    for _ in range(6):
        cur = kit.plan(state, recipe, "--session", s)
        if cur["done"]:
            break
        files = []
        for i, p in enumerate(cur["probes"]):
            f = tmp_path / f"r{cur['round']}-{i}.json"
            assert _probe(kit, state, recipe, s, p["ref"], f).returncode == 0
            files.append(f)
        assert _import(kit, state, recipe, s, *files).returncode == 0
        r = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s)
        if r.returncode:
            assert r.returncode == 1 and "past bisect.max_rounds 4" in r.stderr, r.stderr
            assert cur["round"] == 4
            break
    else:
        raise AssertionError("the cap never hit")
    assert yaml.safe_load(recipe.read_text())["bisect"]["max_rounds"] == 4


def test_a_repeated_import_is_progress_and_a_hand_run_attempt_is_not(tmp_path, kit) -> None:
    """Progress is "the round's planned probes are recorded", by this import or an earlier one: the
    same ``round import --require-progress`` again (a "Re-run jobs" of reduce after its dispatch
    failed) goes on, also for a round one of whose probes never came back. A file already recorded
    that no round planned as it says (a hand-run probe of the bad end elsewhere: attempt 1, its
    round not given or another) moves nothing: the session stops, naming it."""
    hist = kit.make_history(tmp_path / "repo", 60, 41)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", "2", "--chain", "7")
    s = plan["session"]
    ends = []
    for i, p in enumerate(plan["probes"]):
        f = tmp_path / f"end{i}.json"
        assert _probe(kit, state, recipe, s, p["ref"], f).returncode == 0
        ends.append(f)
    for _ in range(2):  # the reduce, then its re-run
        r = _import(kit, state, recipe, s, *ends)
        assert r.returncode == 0, r.stderr
    assert [o["action"] for o in json.loads(r.stdout)] == ["already recorded"] * 2
    assert all("(planned in round 1)" in o["message"] for o in json.loads(r.stdout)), r.stdout
    r2 = kit.plan(state, recipe, "--session", s, "--chain", "7")  # not stopped
    assert r2["round"] == 2
    (q0, q1) = r2["probes"]

    # one probe of round 2 never came back: the import and its re-run both go on
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert _probe(kit, state, recipe, s, q0["ref"], a).returncode == 0
    for _ in range(2):
        r = _import(kit, state, recipe, s, a)
        assert r.returncode == 0, r.stderr
    assert [p["key"] for p in kit.plan(state, recipe, "--session", s, "--chain", "7")["probes"]] == [q1["key"]]

    # the bad end probed by hand on a machine without the ledger: attempt 1, round not given / round 2
    hand, hand2 = tmp_path / "hand.json", tmp_path / "hand2.json"
    assert _probe(kit, tmp_path / "gpu-box", recipe, s, hist.shas[-1], hand).returncode == 0
    assert _probe(kit, tmp_path / "gpu-box", recipe, s, hist.shas[-1], hand2, "--round", "2").returncode == 0
    assert json.loads(hand.read_text())["key"] == plan["probes"][[p["ref"] for p in plan["probes"]].index(
        hist.shas[-1])]["key"]  # round 1's probe of the bad end: already recorded
    r = _import(kit, state, recipe, s, hand, hand2)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"round session {s} stopped: round 2 made no progress: hand.json: already recorded" in r.stderr
    assert "no round planned it as this file says (attempt 1 of" in r.stderr and "round not given" in r.stderr
    assert "hand2.json: already recorded" in r.stderr and "round 2; e.g. a 'round probe' by hand" in r.stderr
    r = kit.cli("--state", str(state), "round", "plan", str(recipe), "--session", s, "--chain", "7")
    assert r.returncode == 1 and "stopped: round 2 made no progress" in r.stderr
    assert kit.cli("--state", str(state), "round", "resume", str(recipe), "--session", s).returncode == 0

    # the probe that did not come back, beside the hand-run file: recorded, the chain goes on
    assert _probe(kit, state, recipe, s, q1["ref"], b).returncode == 0
    r = _import(kit, state, recipe, s, b, hand)
    assert r.returncode == 0, r.stderr
    assert kit.plan(state, recipe, "--session", s)["round"] == 3
