"""Issue 18 through ``bisectbot run``: a regression the text classifier cannot see, bisected over a
real git history of the reference engine with the good end serving as the reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from bisectbot.cli.demo_cmd import concrete_recipe, subtle_recipe
from bisectbot.demo import history as H


def _run(recipe: dict, tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "BISECTBOT_STATE")}
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(path),
                        "--runner", "local", "--out", str(out), *extra], capture_output=True, text=True, env=env,
                       timeout=600)
    assert "Traceback" not in p.stderr, p.stderr
    return p, json.loads((out / "result.json").read_text())


@pytest.mark.slow
def test_bisection_with_last_good_reference_names_the_planted_culprit(tmp_path):
    hist = H.make_history(tmp_path / "engine-history", commits=24, seed=3, subtle=True)
    recipe = subtle_recipe(concrete_recipe(hist.path, tmp_path / "out"))
    recipe["bisect"]["good"] = hist.shas[1]  # a good end with a build before it: the calibration partner
    recipe["triage"] = []
    p, res = _run(recipe, tmp_path)
    final = res["stages"][-1]
    assert res["status"] == "culprit", p.stdout + p.stderr
    assert final["first_bad"]["ref"] == hist.culprit
    assert final["last_good"]["ref"] == hist.last_good
    probes = [pr for st in res["stages"] for pr in st["probes"]]
    bad = [pr for pr in probes if pr["verdict"] == "bad"]
    assert bad and all("diverges from the reference" in pr["reason"] for pr in bad)
    # every bad verdict came from the comparison: the classifier read each of those replies as OK
    rows = [row for pr in bad for row in pr["table"] if row["outcome"] == "GARBAGE"]
    assert rows and all(row["evidence"]["reference"]["text_outcome"] == "OK" for row in rows)
    # the noise was measured between two different good builds (the good end and its parent)
    notes = "\n".join(res["notes"])
    assert f"noise calibration between the good end {hist.shas[1][:10]}" in notes
    assert "not calibrated" not in notes
    # issue 40: the good end's first probe ran on the reference's own server (the same build: no second
    # start); no other probe did
    shared = [pr for pr in probes if "the reference's start" in str(pr["extra"].get("server", ""))]
    assert [pr["candidate"]["ref"] for pr in shared] == [hist.shas[1]], [pr["extra"].get("server") for pr in probes]
    assert shared[0]["verdict"] == "good" and shared[0]["extra"]["attempt"] == 1
    # decode path next to the threshold: fine (the regression is in prefill), calibrated on the good end
    assert any(n.startswith("decode path: fine (") for n in res["notes"]), res["notes"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "decode path: fine" in md
    assert md.index("decode path: fine") < md.index("### Notes")  # shown with the culprit, next to the first bad


@pytest.mark.slow
def test_the_same_history_without_a_reference_sees_no_regression(tmp_path):
    hist = H.make_history(tmp_path / "engine-history", commits=12, seed=4, subtle=True)
    recipe = subtle_recipe(concrete_recipe(hist.path, tmp_path / "out"))
    recipe["reproducer"].pop("reference")
    recipe["regress"] = "garbage"
    recipe["triage"] = []
    p, res = _run(recipe, tmp_path)
    # the text classifier alone: the bad end reads good, there is nothing to bisect
    assert res["status"] == "no-regression", res["status"]
    probes = [pr for st in res["stages"] for pr in st["probes"]]
    assert probes and all(pr["verdict"] == "good" for pr in probes)


def test_regress_diverges_without_a_reference_is_a_recipe_error(tmp_path):
    hist_path = tmp_path / "h"
    recipe = subtle_recipe(concrete_recipe(hist_path, tmp_path / "out"))
    recipe["reproducer"].pop("reference")
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "bisectbot", "recipe", "validate", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "needs reproducer.reference" in p.stdout + p.stderr


@pytest.mark.slow
def test_bisection_with_an_endpoint_reference_calibrates_against_the_good_end(tmp_path):
    from bisectbot.demo.engine import start_engine

    hist = H.make_history(tmp_path / "engine-history", commits=16, seed=5, subtle=True)
    recipe = subtle_recipe(concrete_recipe(hist.path, tmp_path / "out"))
    recipe["triage"] = []
    recipe["reproducer"]["control"] = None
    with start_engine(threshold=None, grounded=True, numerics=99, max_model_len=65536,
                      model="demo/engine-7b") as ref:
        recipe["reproducer"]["reference"] = {"endpoint": ref.url, "prompt_logprobs": True}
        recipe["regress"] = "diverges"
        p, res = _run(recipe, tmp_path)
    final = res["stages"][-1]
    assert res["status"] == "culprit", p.stdout + p.stderr
    assert final["first_bad"]["ref"] == hist.culprit
    notes = "\n".join(res["notes"])
    assert f"noise calibration between the good end {hist.shas[hist.good][:10]}" in notes and ref.url in notes
    assert "decode path" not in notes  # no control configured


@pytest.mark.slow
def test_demo_subtle_finds_the_planted_culprit(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "BISECTBOT_STATE")}
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "bisectbot", "demo", "--subtle", "--out", str(out), "--state",
                        str(tmp_path / "state"), "--commits", "16", "--seed", "2"], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "found the planted regression" in p.stdout
    report = (out / "report.md").read_text()
    assert "diverges from the reference" in report and "decode path: fine" in report
    # the subtle history tags the good end on commit 1: its parent is the second good build of the calibration
    assert "noise calibration between the good end" in report and "not calibrated" not in report


def test_a_root_commit_good_end_says_there_is_nothing_before_it_to_calibrate_against(tmp_path):
    """Issue 23 ("Also"): the calibration partner of a root-commit good end is not "unknown commit '<sha>^'"."""
    hist = H.make_history(tmp_path / "engine-history", commits=10, seed=4, subtle=True)
    recipe = subtle_recipe(concrete_recipe(hist.path, tmp_path / "out"))
    recipe["bisect"]["good"] = hist.shas[0]
    recipe["triage"] = []
    recipe["reproducer"]["control"] = None
    p, res = _run(recipe, tmp_path)
    out = p.stdout + p.stderr + "\n".join(res["notes"])
    assert "is the root commit, there is nothing before it to calibrate against" in out, out
    assert "unknown commit" not in out, out
