"""Issue 23, input 7 through planned rounds (``bisectbot round plan|probe|import``, the fan-out of
bisect-fanout.yml): a round session claims only what its probes measured about the reference.

Real parts only: a git history of the reference engine (:mod:`bisectbot.demo.history`, a planted
culprit the text classifier cannot see), real reference-engine processes as the ``endpoint``
reference, every step a ``bisectbot`` child process, each probe with its own state directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bisectbot.cli.demo_cmd import concrete_recipe, subtle_recipe
from bisectbot.demo import history as H
from bisectbot.reproduce.oracle import UNCALIBRATED
from bisectbot.session.probing.oracles import ROUNDS_UNCALIBRATED
from tests.rounds.test_scope_rounds import drive


def _recipe(tmp_path: Path, reference: dict, commits: int = 8, seed: int = 3) -> tuple[Path, H.History]:
    hist = H.make_history(tmp_path / "engine-history", commits=commits, seed=seed, subtle=True)
    data = subtle_recipe(concrete_recipe(hist.path, tmp_path / "out"))
    data["bisect"]["good"] = hist.shas[1]
    data["triage"] = []
    data["reproducer"]["control"] = None
    data["reproducer"]["reference"] = reference
    if "endpoint" in reference:
        data["regress"] = "diverges"
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path, hist


def _builds(state: Path) -> list[Path]:
    """Build logs a bisectbot process with state directory ``state`` left (one per candidate built)."""
    return sorted((state / "logs").rglob("build-*")) if (state / "logs").is_dir() else []


def test_a_last_good_reference_is_refused_before_any_candidate_is_built(tmp_path, kit) -> None:
    """On main 'round plan' planned it and every 'round probe' built and served its candidate, then
    answered skip ("the reference (last-good) is not running in this process"): a night of GPU
    runners for a boundary-failed report. Now plan and probe exit 2 naming the field and what works."""
    r, hist = _recipe(tmp_path, {"candidate": "last-good", "continuation_tokens": 32})
    line = next(n for n, t in enumerate(r.read_text().splitlines(), 1) if "candidate: last-good" in t)
    state = tmp_path / "state"
    p = kit.cli("--state", str(state), "round", "plan", str(r), "--slots", "2")
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr
    assert f"{r}:{line}:" in err and "reproducer.reference.candidate" in err, err
    assert "'bisectbot run RECIPE' on one runner" in err and "reference: {endpoint: URL}" in err, err
    assert "Traceback" not in err and p.stdout == "", p.stdout
    assert _builds(state) == []  # the planner built nothing either (main: the good end, for its calibration)
    # a probe job of the workflow (given a plan's ref) refuses before building its candidate
    runner_state = tmp_path / "runner-0"
    q = kit.cli("--state", str(runner_state), "round", "probe", str(r), "--session", "s", "--ref", hist.shas[-1],
                "--key", "k", "--out", str(tmp_path / "v.json"))
    assert q.returncode == 2, q.stdout + q.stderr
    assert "reproducer.reference.candidate" in q.stderr and not (tmp_path / "v.json").exists(), q.stderr
    assert _builds(runner_state) == []
    # recipe validate says the same, as a warning: 'bisectbot run' bisects this recipe
    v = kit.cli("recipe", "validate", str(r))
    assert v.returncode == 0, v.stdout + v.stderr
    assert f"{r}:{line}:" in v.stderr and "(warning: bisectbot round refuses this)" in v.stderr, v.stderr
    # ... and an error when bisect.executor: actions hands the recipe to the fan-out (the workflows' switch)
    data = yaml.safe_load(r.read_text())
    data["bisect"]["executor"] = "actions"
    fan = tmp_path / "fanout.yaml"
    fan.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    v = kit.cli("recipe", "validate", str(fan))
    assert v.returncode == 2, v.stdout + v.stderr
    assert "reproducer.reference.candidate" in v.stderr and "set bisect.executor: local" in v.stderr, v.stderr
    assert ": ok (reproducer key" not in v.stdout, v.stdout


@pytest.mark.slow
def test_an_endpoint_reference_round_session_says_the_floors_applied(tmp_path, kit, engine_factory) -> None:
    """Each round probe compares with the endpoint uncalibrated (the floors); the verdict files say so
    and so does the report. On main the planner built and served the good end on its own machine and
    the report showed that calibration table, which no probe's verdict used."""
    ref = engine_factory(threshold=None, grounded=True, numerics=99, max_model_len=65536, model="demo/engine-7b")
    r, hist = _recipe(tmp_path, {"endpoint": ref.url, "prompt_logprobs": True})
    state = tmp_path / "state"
    done, _, files = drive(kit, tmp_path, r, 3, state)
    res = json.loads(Path(done["result"]).read_text())
    assert res["status"] == "culprit", (res["status"], res["notes"])
    assert res["stages"][-1]["first_bad"]["ref"] == hist.culprit
    docs = [json.loads(f.read_text()) for f in files]
    probed = [d for d in docs if d["evidence"]["extra"].get("reference")]
    assert probed and len(probed) == len([d for d in docs if d["verdict"] in ("good", "bad")]), docs
    assert all(d["evidence"]["extra"]["reference"]["noise"]["notes"] == [UNCALIBRATED] for d in probed)
    assert all(d["evidence"]["extra"]["reference"]["label"] == ref.url for d in probed)
    notes = "\n".join(res["notes"])
    assert f"reference: {ref.url}; regress diverges" in notes and ROUNDS_UNCALIBRATED in notes, notes
    assert "not calibrated: floors edit distance 0.2, prompt logprobs 0.05 nats" in notes, notes
    assert "noise calibration between the good end" not in notes and "tokens: edit distance" not in notes, notes
    md = (tmp_path / "out" / "report.md").read_text()
    assert ROUNDS_UNCALIBRATED in md and "(the recipe's floors: not calibrated)" in md
    assert _builds(state) == []  # the planner built no candidate: every build ran in a probe's own process


@pytest.mark.slow
def test_a_degenerate_endpoint_reference_leaves_every_round_probe_inconclusive(tmp_path, kit, engine_factory) -> None:
    """A reference that loops one word (its own reply GARBAGE) never makes a candidate bad in rounds:
    each probe is a skip whose sizes say 'reference unusable', and no culprit is named."""
    ref = engine_factory(threshold=1, garbage_kinds=["loop"], numerics=2, max_model_len=65536,
                         model="demo/engine-7b")
    r, _ = _recipe(tmp_path, {"endpoint": ref.url})
    done, _, files = drive(kit, tmp_path, r, 2, tmp_path / "state")
    res = json.loads(Path(done["result"]).read_text())
    assert res["status"] != "culprit", res["status"]
    docs = [json.loads(f.read_text()) for f in files]
    # the verdict's own reason says why no size was decided, not only its table rows
    assert docs and all(d["verdict"] == "skip" and "inconclusive: reference unusable" in d["reason"] for d in docs), \
        [(d["verdict"], d["reason"]) for d in docs]
    reasons = [x for d in docs for row in d["table"] for x in row["reasons"]]
    assert reasons and all(x.startswith("reference unusable: its own reply is GARBAGE") for x in reasons), reasons
    assert ROUNDS_UNCALIBRATED in "\n".join(res["notes"])
