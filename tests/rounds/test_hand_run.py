"""Issue 24, input 4 / issue 23: a new user drives the fan-out by hand (``round plan``, ``round probe``,
``round import`` as bisect-fanout.yml runs them), each command a child process over a real git history.

* A file whose ``round`` is not the round that plans its probe (``round probe --round 1`` for a probe of
  round 2) is refused by name at import, and ``round probe`` refuses that ``--round`` where the ledger is.
* ``round probe --ref`` takes a unique prefix (>= 7 hex digits) of a planned ref: the file names the
  whole ref and is recorded; a shorter one says so. Without the ledger a short SHA is the commit too.
* A triage probe by hand: without ``--toggle`` the plan's toggle is taken when the ref is planned with
  one; with two, the error names both and says "pass --toggle NAME".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisectbot.errors import BadInput


def _probe(kit, state: Path, recipe: Path, s: str, out: Path, *args: str):
    return kit.cli("--state", str(state), "round", "probe", str(recipe), "--session", s, "--out", str(out), *args)


def _import(kit, state: Path, recipe: Path, s: str, *files: Path):
    return kit.cli("--json", "--state", str(state), "round", "import", str(recipe), "--session", s,
                   "--require-progress", *map(str, files))


def _round_two(kit, tmp_path: Path, short: bool) -> tuple[Path, Path, str, dict]:
    """A session of a 40-commit history whose round 1 (the ends) is probed -- each end by the short
    SHA a user copies from a log when ``short`` -- and imported: ``(state, recipe, session, round 2)``."""
    hist = kit.make_history(tmp_path / "repo", 40, 23)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    state = tmp_path / "state"
    pl = kit.plan(state, recipe, "--slots", "2")
    s = pl["session"]
    files = []
    for i, p in enumerate(pl["probes"]):
        f = tmp_path / f"end{i}.json"
        r = _probe(kit, state, recipe, s, f, "--ref", p["ref"][:8] if short else p["ref"])
        assert r.returncode == 0, r.stderr
        doc = json.loads(f.read_text())
        assert doc["ref"] == p["ref"] and doc["key"] == p["key"] and doc["round"] == 1, doc["ref"]
        files.append(f)
    r = _import(kit, state, recipe, s, *files)
    assert r.returncode == 0, r.stderr
    assert [o["action"] for o in json.loads(r.stdout)] == ["recorded", "recorded"]
    pl2 = kit.plan(state, recipe, "--session", s)
    assert pl2["round"] == 2
    return state, recipe, s, pl2


def test_a_file_of_another_round_than_its_probes_is_refused(tmp_path, kit) -> None:
    state, recipe, s, pl2 = _round_two(kit, tmp_path, short=False)
    q = pl2["probes"][0]
    # elsewhere (no ledger): the plan's key with a stale --round: the file says round 1
    stale = tmp_path / "stale.json"
    r = _probe(kit, tmp_path / "gpu-box", recipe, s, stale, "--ref", q["ref"], "--key", q["key"],
               "--attempt", str(q["attempt"]), "--round", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(stale.read_text())
    assert doc["round"] == 1 and doc["key"] == q["key"]
    r = _import(kit, state, recipe, s, stale)
    assert r.returncode == 1, r.stdout + r.stderr  # refused, and nothing else moved: the chain stops
    (o,) = json.loads(r.stdout)
    assert o["action"] == "refused" and "stale.json: round 1 is stale" in o["message"], o
    assert "the session is at round 2, which plans probe" in o["message"] and "--round 2" in o["message"], o
    kit.cli("--state", str(state), "round", "resume", str(recipe), "--session", s)
    assert kit.plan(state, recipe, "--session", s)["probes"] == pl2["probes"]  # nothing recorded from it

    # where the ledger is, a --round that is not the plan's is refused before anything runs
    r = _probe(kit, state, recipe, s, tmp_path / "x.json", "--ref", q["ref"], "--round", "1")
    assert r.returncode == 2, r.stderr
    assert f"plans {q['ref']} in round 2, not in round 1" in r.stderr and "--round 2" in r.stderr, r.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_unique_prefix_of_a_planned_ref_is_that_ref(tmp_path, kit) -> None:
    state, recipe, s, pl2 = _round_two(kit, tmp_path, short=True)  # round 1 by 8-digit SHAs
    q = pl2["probes"][0]
    # too short a prefix: the error says how long one must be
    r = _probe(kit, state, recipe, s, tmp_path / "x.json", "--ref", q["ref"][:6])
    assert r.returncode == 2 and "does not plan" in r.stderr and "at least 7 hex digits" in r.stderr, r.stderr
    # without the ledger, with the plan's key: the short SHA is the commit, as the plan names it
    f = tmp_path / "short.json"
    r = _probe(kit, tmp_path / "gpu-box", recipe, s, f, "--ref", q["ref"][:10], "--key", q["key"],
               "--attempt", str(q["attempt"]), "--round", "2")
    assert r.returncode == 0, r.stderr
    assert json.loads(f.read_text())["ref"] == q["ref"]
    r = _import(kit, state, recipe, s, f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)[0]["action"] == "recorded"


def test_a_prefix_of_several_planned_refs_is_ambiguous() -> None:
    from bisectbot.cli.round_cmd import _planned_ref

    probes = [{"ref": "abcdef0123" + "1" * 30, "key": "k1"}, {"ref": "abcdef0123" + "2" * 30, "key": "k2"},
              {"ref": "0" * 40, "key": "k3"}]
    assert _planned_ref("abcdef01231", probes) == probes[0]["ref"]
    assert _planned_ref("ABCDEF01232", probes) == probes[1]["ref"]
    assert _planned_ref("abcdef0123", probes, key="k2") == probes[1]["ref"]
    assert _planned_ref("fedcba9", probes) == "fedcba9"  # no planned ref: as given (the caller says what is planned)
    with pytest.raises(BadInput, match=r"--ref abcdef0 is a prefix of 2 planned refs \(abcdef0123111111, "
                                       r"abcdef0123222222\): pass more of it"):
        _planned_ref("abcdef0", probes, "round session S: round 3")


def test_a_triage_probe_by_hand_takes_the_plans_toggle(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 12, 7)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out",
                              triage=[{"name": "workaround", "args": ["--workaround"]},
                                      {"name": "noop", "args": ["--noop"]}])
    state = tmp_path / "state"
    pl = kit.plan(state, recipe, "--slots", "4")
    s = pl["session"]
    for _ in range(10):  # to the triage round
        if any(p["toggle"] for p in pl["probes"]):
            break
        files = []
        for i, p in enumerate(pl["probes"]):
            f = tmp_path / f"r{pl['round']}-{i}.json"
            r = _probe(kit, state, recipe, s, f, "--ref", p["ref"])
            assert r.returncode == 0, r.stderr
            files.append(f)
        assert _import(kit, state, recipe, s, *files).returncode == 0
        pl = kit.plan(state, recipe, "--session", s)
    else:
        raise AssertionError("no triage round")
    assert sorted(p["toggle"] for p in pl["probes"]) == ["noop", "workaround"]
    ref = hist.shas[7]
    assert {p["ref"] for p in pl["probes"]} == {ref}

    # two toggles for one ref: which one is the user's to say
    r = _probe(kit, state, recipe, s, tmp_path / "t.json", "--ref", ref)
    assert r.returncode == 2, r.stderr
    assert (f"round {pl['round']} plans {ref} with toggles noop, workaround: pass --toggle NAME" in r.stderr), r.stderr
    assert not (tmp_path / "t.json").exists()
    w = tmp_path / "workaround.json"
    assert _probe(kit, state, recipe, s, w, "--ref", ref[:9], "--toggle", "workaround").returncode == 0
    assert _import(kit, state, recipe, s, w).returncode == 0

    # one toggle left for the ref: it is the default
    (left,) = kit.plan(state, recipe, "--session", s)["probes"]
    assert left["toggle"] == "noop"
    n = tmp_path / "noop.json"
    r = _probe(kit, state, recipe, s, n, "--ref", ref)
    assert r.returncode == 0, r.stderr
    doc = json.loads(n.read_text())
    assert doc["toggle"] == "noop" and doc["key"] == left["key"] and doc["verdict"] == "bad", doc["toggle"]
    r = _import(kit, state, recipe, s, n)
    assert r.returncode == 0, r.stdout + r.stderr
    done = kit.plan(state, recipe, "--session", s)
    assert done["done"], done
    res = json.loads(Path(done["result"]).read_text())
    assert res["triage"] == {"workaround": "good (problem disappears)", "noop": "bad"}
