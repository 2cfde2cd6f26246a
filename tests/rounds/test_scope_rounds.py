"""Issue 23 through planned rounds (``bisectbot round plan|probe|import``, the fan-out of
bisect-fanout.yml): verdicts claim only what was tested, as in ``bisectbot run``.

Each probe runs as its own ``round probe`` process with its own state directory (a GPU runner
without the ledger) and gets only what the plan printed, as a probe job of the workflow does;
the histories are the reference engine's, built as tests/bisect/test_scope.py builds them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.bisect.test_scope import SERVE_FLAKY_START, history, recipe

pytestmark = pytest.mark.slow


def req(focus_item: int | str) -> int:
    """The requested size of a plan's focus prompt (``N`` or ``N@seedSwW``, issue 35)."""
    return int(str(focus_item).split("@")[0])


def _probe_args(p: dict) -> list[str]:
    """What a probe job passes from one planned probe (the plan's ref, key, attempt, toggle, focus)."""
    args = ["--ref", p["ref"], "--key", p["key"], "--attempt", str(p["attempt"]), "--toggle", p["toggle"]]
    if p.get("focus"):
        args += ["--focus", ",".join(map(str, p["focus"]))]
    return args


def drive(kit, tmp_path: Path, r: Path, slots: int, state: Path, env: dict | None = None,
          limit: int = 20) -> tuple[dict, list[dict], list[Path]]:
    """plan -> probe each planned candidate -> import, until the plan is done: the last plan,
    every plan before it and every verdict file."""
    plans = [kit.plan(state, r, "--slots", str(slots))]
    files: list[Path] = []
    while not plans[-1]["done"]:
        assert len(plans) <= limit, plans[-1]
        pl = plans[-1]
        got = []
        for n, p in enumerate(pl["probes"]):
            f = tmp_path / "verdicts" / f"p{len(files) + n}.json"
            f.parent.mkdir(parents=True, exist_ok=True)
            q = kit.cli("--state", str(tmp_path / f"runner-{n}"), "round", "probe", str(r), "--session",
                        pl["session"], *_probe_args(p), "--round", str(pl["round"]), "--out", str(f), env=env)
            assert q.returncode == 0, q.stderr
            got.append(f)
        files += got
        q = kit.cli("--state", str(state), "round", "import", str(r), "--session", pl["session"], *map(str, got),
                    env=env)
        assert q.returncode == 0, q.stdout + q.stderr
        plans.append(kit.plan(state, r, "--session", pl["session"]))
    return plans[-1], plans[:-1], files


def _final(plan: dict) -> dict:
    return json.loads(Path(plan["result"]).read_text())["stages"][-1]


def test_fanout_probes_ask_the_bad_ends_failing_sizes_first_and_name_the_culprit(tmp_path, kit) -> None:
    """Input 2 through rounds of 3: c3..c7 crash on prompts >= 28K, c5 turns to garbage from ~20K,
    the bad end c8 from ~21.8K. Opened at the maximum size (the plan carried no focus to
    'round probe', and c4 was probed in the bad end's own round), c3..c7 were skips and the answer
    the range c3..c8 / c4..c5; asked first where the bad end fails, c5 is the culprit."""
    cfgs = [{"threshold": 21800 if i == 8 else 20000 if i >= 5 else None,
             "crash_above": 28000 if 3 <= i <= 7 else None} for i in range(9)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    done, plans, files = drive(kit, tmp_path, r, 3, tmp_path / "state")
    final = _final(done)
    docs = [json.loads(f.read_text()) for f in files]
    why = json.dumps([(shas.index(d["ref"]), d.get("focus"), d["verdict"], d["reason"][:160]) for d in docs], indent=1)
    assert final["status"] == "culprit", why
    assert final["first_bad"]["ref"] == shas[5] and final["last_good"]["ref"] == shas[4], why
    # the bad end's failing sizes travel in the plan to every later probe, which asks them first
    (end,) = [d for d in docs if d["ref"] == shas[8]]
    first = end["threshold"][1]
    assert 21000 < first < 22500, end["threshold"]
    later = [p for pl in plans if pl["round"] > 1 for p in pl["probes"]]
    # issue 35: the focus names the bad end's failing prompt itself (its requested size, seed and words)
    first_req = next(t["requested"] for t in end["table"] if t["outcome"] == "GARBAGE" and t["prompt_tokens"] == first)
    assert later and all(p["focus"] and req(p["focus"][0]) == first_req for p in later), plans
    c4 = [d for d in docs if d["ref"] == shas[4] and d["verdict"] == "good"]
    assert c4 and c4[0]["focus"][0] == later[0]["focus"][0] and c4[0]["table"][0]["requested"] == first_req, why
    assert "second finding above the bad end's failing sizes" in c4[0]["reason"], c4[0]["reason"]


def test_fanout_good_end_measured_below_the_failing_size_is_no_culprit(tmp_path, kit) -> None:
    """Input 1 through rounds: old builds serve max_model_len 16384, c3 raises it; garbage from
    20,000 tokens everywhere. The good end c0, asked first at the bad end's failing size (the
    plan's focus), cannot answer there: it is untestable, never 'c3 is the culprit'."""
    cfgs = [{"threshold": 20000, "max_model_len": 16384 if i < 3 else 131072} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    done, plans, files = drive(kit, tmp_path, r, 1, tmp_path / "state")
    final = _final(done)
    assert final["status"] in ("boundary-failed", "range"), final
    assert not any(c["ref"] == shas[3] for c in final.get("culprits") or []), final
    m = re.search(r"could not be asked at the size where the bad end fails \((\d+) tokens", final["message"])
    assert m and 20000 <= int(m.group(1)) < 20100, final["message"]
    # the good end's probe got the bad end's failing sizes from the plan (they lie above what it
    # serves, so its search covers what it can); measured as it was, the search's use is the skip
    (planned,) = [p for pl in plans for p in pl["probes"] if p["ref"] == shas[0]]
    assert 20000 <= req(planned["focus"][0]) < 20200, planned
    (good_end,) = [d for d in (json.loads(f.read_text()) for f in files) if d["ref"] == shas[0]]
    assert good_end["focus"] == planned["focus"] and good_end["verdict"] == "good", good_end.get("focus")


def _start_recipe(kit, tmp_path: Path) -> tuple[list[str], Path]:
    cfgs = [{"threshold": 4000 if i >= 4 else None} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs, files=[{"version.txt": f"v{i}\n"} for i in range(8)],
                   serve=SERVE_FLAKY_START)
    (tmp_path / "starts").mkdir()
    return shas, recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000},
                        env_passthrough=["START_DIR", "START_FAILS"])


def test_fanout_reprobes_a_cached_skip_at_an_end_once(tmp_path, kit) -> None:
    """Input 3 through rounds: 'bisectbot run' cached a skip of the bad end (its server did not
    start). A round session over the same ledger probes that end once more before calling it
    untestable: once the start works, the culprit; while it still fails, one re-probe, then
    boundary-failed naming --retry-errors (no re-probe in every round of the replay)."""
    shas, r = _start_recipe(kit, tmp_path)
    fails = {"START_DIR": str(tmp_path / "starts"), "START_FAILS": "always-bad-end"}
    for state in ("fixed", "still"):
        p = kit.cli("--state", str(tmp_path / state), "run", str(r), env=fails)
        assert json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]["status"] == \
            "boundary-failed", p.stdout + p.stderr

    done, plans, _ = drive(kit, tmp_path / "fixed-v", r, 1, tmp_path / "fixed", env={**fails, "START_FAILS": ""})
    assert [p["ref"] for p in plans[0]["probes"]] == [shas[-1]], plans[0]  # the bad end, probed again
    final = _final(done)
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[4], final

    done, plans, _ = drive(kit, tmp_path / "still-v", r, 1, tmp_path / "still", env=fails)
    final = _final(done)
    assert final["status"] == "boundary-failed" and "--retry-errors" in final["message"], final
    assert [p["ref"] for pl in plans for p in pl["probes"]] == [shas[-1]], plans  # once, not every round


def test_import_refuses_a_verdict_probed_without_the_planned_focus(tmp_path, kit) -> None:
    """The probe key of a focused probe says "asked first where the bad end fails": a file probed
    without --focus (a probe job that drops the plan's 'focus', or an older bisectbot's file) is
    refused naming the sizes to pass; probed with them (key computed by 'round probe' itself), it
    is recorded."""
    cfgs = [{"threshold": 20000 if i >= 4 else None} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas, {"max_size": 40000})
    state = tmp_path / "state"
    pl = kit.plan(state, r, "--slots", "1")
    ((end,),) = [pl["probes"]]
    assert end["ref"] == shas[-1] and end["focus"] == []  # nothing known before the bad end's verdict
    f0 = tmp_path / "end.json"
    q = kit.cli("--state", str(tmp_path / "runner"), "round", "probe", str(r), "--session", pl["session"],
                *_probe_args(end), "--out", str(f0))
    assert q.returncode == 0, q.stderr
    assert kit.cli("--state", str(state), "round", "import", str(r), "--session", pl["session"],
                   str(f0)).returncode == 0
    pl = kit.plan(state, r, "--session", pl["session"])
    ((good,),) = [pl["probes"]]
    sizes = ",".join(map(str, good["focus"]))
    assert good["ref"] == shas[0] and len(good["focus"]) == 2 and 20000 <= req(good["focus"][0]) < 20200, good

    unfocused, old, focused = (tmp_path / f"{n}.json" for n in ("unfocused", "old", "focused"))
    q = kit.cli("--state", str(tmp_path / "runner"), "round", "probe", str(r), "--session", pl["session"],
                "--ref", good["ref"], "--key", good["key"], "--out", str(unfocused))
    assert q.returncode == 0, q.stderr
    doc = json.loads(unfocused.read_text())
    assert doc["focus"] == [] and doc["table"][0]["requested"] != req(good["focus"][0])
    doc.pop("focus")  # a verdict file of a bisectbot before the focus travelled
    old.write_text(json.dumps(doc))
    empty = tmp_path / "empty.json"  # where the ledger is, without the plan's focus (issue 24's new user)
    # where the ledger holds the plan, another focus is refused before any device time is spent
    q = kit.cli("--state", str(state), "round", "probe", str(r), "--session", pl["session"], "--ref", good["ref"],
                "--focus", "", "--out", str(empty))
    assert q.returncode == 2 and not empty.exists(), q.stdout + q.stderr
    assert f"with focus {sizes}, not '': 'round import' would refuse the file; leave --focus out (the plan's) or " \
           f"pass --focus {sizes}" in q.stderr, q.stderr
    q = kit.cli("--state", str(state), "round", "import", str(r), "--session", pl["session"], str(unfocused), str(old))
    assert q.returncode == 2, q.stdout + q.stderr
    # the fix names both focus sizes; "without --focus" is the plan's focus where the ledger is
    assert q.stderr.count(f"but round {pl['round']} plans focus {sizes}: probe again without --focus where this "
                          f"ledger is (the plan's focus is the default) or with --focus {sizes}") == 2, q.stderr
    assert q.stderr.count("probed with focus none (--focus '', ") == 2 and "Traceback" not in q.stderr, q.stderr
    assert kit.plan(state, r, "--session", pl["session"])["probes"] == pl["probes"]  # nothing recorded

    q = kit.cli("--state", str(tmp_path / "runner"), "round", "probe", str(r), "--session", pl["session"],
                "--ref", good["ref"], "--focus", "20000,abc", "--out", str(focused))
    assert q.returncode == 2 and "--focus '20000,abc'" in q.stderr, q.stderr
    q = kit.cli("--state", str(tmp_path / "runner"), "round", "probe", str(r), "--session", pl["session"],
                "--ref", good["ref"], "--focus", sizes, "--out", str(focused))
    assert q.returncode == 0, q.stderr
    doc = json.loads(focused.read_text())
    assert doc["key"] == good["key"] and doc["table"][0]["requested"] == req(good["focus"][0]), doc["key"]
    q = kit.cli("--state", str(state), "round", "import", str(r), "--session", pl["session"], str(focused))
    assert q.returncode == 0 and q.stdout.startswith("recorded:"), q.stdout + q.stderr
