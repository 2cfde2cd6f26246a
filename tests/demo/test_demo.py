"""``bisectbot demo``: the whole pipeline on a temporary engine history, end to end."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bisectbot.cli import cli
from bisectbot.demo import history as H
from bisectbot.recipe import load_recipe


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_demo_finds_the_planted_commit_and_writes_report_and_issue(tmp_path, kit) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    t0 = time.monotonic()
    p = kit.run_demo("--out", str(out), "--state", str(state), "--seed", "3", "--commits", "36")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stdout + p.stderr
    assert took < 180, f"the demo took {took:.0f}s"
    # the same seed writes the same history: the expected culprit is known independently of the run
    ref = H.make_history(tmp_path / "again", commits=36, seed=3)
    culprit = ref.culprit
    res = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else \
        json.loads((out / "report.json").read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit" and final["first_bad"]["ref"] == culprit
    assert final["last_good"]["ref"] == ref.last_good
    md = (out / "report.md").read_text()
    assert culprit[:12] in md
    issues = sorted(out.glob("issue*.md"))
    assert issues and culprit[:12] in issues[0].read_text()
    # the terminal shows progress per probe and names culprit and report
    assert "probes left" in p.stderr
    # every build line names its candidate, the ones prepared ahead too (new-user pass: bare "build ...")
    bare = [ln for ln in p.stderr.splitlines() if ln.lstrip().startswith(("build ", "build:"))]
    assert not bare, bare[:5]
    assert "found the planted regression" in p.stdout and culprit[:12] in p.stdout
    assert str(out / "report.md") in p.stdout and str(issues[0]) in p.stdout
    # the "running:" line is the command that ran, runnable as printed (new-user pass: a bare
    # recipe name without the state directory)
    running = next(ln for ln in p.stdout.splitlines() if "running: " in ln)
    argv = shlex.split(running.split("running: ", 1)[1].split("   (", 1)[0])
    assert argv[:3] == ["bisectbot", "--state", str(state)] and Path(argv[4]).is_file(), running
    again = subprocess.run([sys.executable, "-m", "bisectbot", *argv[1:], "--dry-run"], capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    # build failures and the engine that never starts were met and are skips, not verdicts
    skips = [pr["reason"] for st in res["stages"] for pr in st["probes"] if pr["verdict"] == "skip"]
    assert any("build failed" in r for r in skips) and any("server exited" in r for r in skips), skips
    assert res["triage"] == {"no-threshold": "good (problem disappears)"}
    # no engine left running, no worktree left behind
    ports = [int(m.group(1)) for f in state.rglob("server-*.log") if (m := re.search(r"-(\d+)\.log$", f.name))]
    assert len(ports) >= 5
    assert all(_port_closed(pt) for pt in ports)
    assert kit.engines_using(state) == []
    assert not list((state / "worktrees").rglob("cand-*"))


@pytest.mark.slow
@pytest.mark.parametrize("where", ["demo", "global"])
def test_a_relative_state_directory_works(tmp_path, kit, where: str) -> None:
    """``--state gpu`` (relative, as a user types it) names the same directory in the builds' and
    servers' own working directories: before, every build failed 'No such file or directory:
    gpu/worktrees/...' and the demo ended boundary-failed."""
    before = ("--state", "gpu") if where == "global" else ()
    p = kit.run_demo("--out", "out", *(() if before else ("--state", "gpu")), "--seed", "3", "--commits", "12",
                     cwd=tmp_path, before=before)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert (tmp_path / "gpu").is_dir() and f"ledger {tmp_path / 'gpu'};" in p.stdout + p.stderr


@pytest.mark.slow
def test_demo_exits_1_when_the_found_culprit_is_not_the_planted_one(tmp_path, monkeypatch) -> None:
    """The exit code compares with the history: a history that lies about its culprit fails the demo."""
    real = H.make_history

    def lying(*a, **kw):
        h = real(*a, **kw)
        h.first_bad += 2  # what the history claims; the engine configs stay as they are
        return h

    monkeypatch.setattr(H, "make_history", lying)
    r = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "out"), "--state", str(tmp_path / "s"),
                                 "--commits", "12", "--seed", "5"])
    assert r.exit_code == 1, r.output
    assert "FAILED: expected the culprit" in r.output and "bisectbot found: culprit" in r.output


def test_history_plants_the_regression_and_untestable_commits(tmp_path) -> None:
    h = H.make_history(tmp_path / "h", commits=30, seed=7)
    git = lambda *a: subprocess.run(["git", *a], cwd=h.path, check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout
    assert len(h.shas) == 30 and git("rev-parse", H.GOOD_TAG).strip() == h.shas[0]
    assert git("rev-parse", H.BRANCH).strip() == h.shas[-1]
    assert 10 <= h.first_bad <= 20 and h.unbuildable and h.broken
    assert not ({h.first_bad, h.first_bad - 1} & (set(h.unbuildable) | set(h.broken)))
    for i, sha in enumerate(h.shas):
        text = git("show", f"{sha}:engine.json")
        if i in h.unbuildable:
            try:
                cfg = json.loads(text)
            except ValueError:
                continue
            assert set(cfg) - {"model", "max_model_len", "seed", "threshold"}  # an unknown setting
            continue
        cfg = json.loads(text)
        assert cfg.get("broken", False) == (i in h.broken)
        if i < h.first_bad:
            assert cfg["threshold"] >= H.HIGH_RANGE[0]
        else:
            assert cfg["threshold"] <= H.LOW_THRESHOLD
    # the build step really fails on an unbuildable commit and passes on the culprit
    for i, rc in ((h.unbuildable[0], 1), (h.first_bad, 0)):
        wt = tmp_path / f"wt{i}"
        git("worktree", "add", "--detach", str(wt), h.shas[i])
        assert subprocess.run([sys.executable, "build.py"], cwd=wt, capture_output=True).returncode == rc
    subjects = git("log", "--format=%s", "--reverse").splitlines()
    assert subjects == h.subjects and subjects[h.first_bad] == H.CULPRIT_SUBJECT
    assert len(set(git("log", "--format=%an").splitlines())) > 3
    # deterministic: same seed, same SHAs; another seed, another history
    assert H.make_history(tmp_path / "h2", commits=30, seed=7).shas == h.shas
    assert H.make_history(tmp_path / "h3", commits=30, seed=8).shas != h.shas
    with pytest.raises(ValueError):
        H.make_history(tmp_path / "h4", commits=20, first_bad=5, unbuildable=[4], broken=[])


def test_shipped_recipe_is_the_readable_one_and_valid(tmp_path, kit) -> None:
    from bisectbot.cli.demo_cmd import concrete_recipe, demo_recipe_text

    text = demo_recipe_text()
    assert (kit.root / "recipes" / "demo.yaml").read_text() == text
    assert load_recipe(kit.root / "recipes" / "demo.yaml").source.kind == "git"
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(concrete_recipe(tmp_path / "repo", tmp_path / "out", "/x/python")))
    r = load_recipe(p)
    assert r.source.repo == str(tmp_path / "repo") and r.report.dir == str(tmp_path / "out")
    assert r.server.command[0] == "/x/python" and r.server.build_command[0] == "/x/python"


def test_demo_help_shows_an_example() -> None:
    r = CliRunner().invoke(cli, ["demo", "--help"])
    assert r.exit_code == 0 and "Example:" in r.output and "--commits" in r.output


@pytest.mark.network
@pytest.mark.slow
def test_wheel_ships_the_demo_recipe(tmp_path, kit) -> None:
    """``pip install .`` (not editable) must carry the recipe: build a wheel and look inside."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(kit.root / name, src / name)
    shutil.copytree(kit.root / "bisectbot", src / "bisectbot",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp_path / "w")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    whl = next((tmp_path / "w").glob("bisectbot-*.whl"))
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        assert "bisectbot/demo/recipe.yaml" in names and "bisectbot/demo/history.py" in names
        assert z.read("bisectbot/demo/recipe.yaml").decode() == (kit.root / "recipes" / "demo.yaml").read_text()


@pytest.mark.slow
def test_benchmark_runs_and_reports_the_target(kit) -> None:
    p = subprocess.run([sys.executable, str(kit.root / "benchmarks" / "demo.py"), "--seeds", "4", "--commits", "8",
                        "--target", "600"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "target: every run finds the planted culprit" in p.stdout and ": met" in p.stdout
    # issue 41 item 17: the figures are read from the run's result (it read report.json, whose stages
    # are nested under "result", and printed "probes 0, requests 0" for a run of 11 probes)
    row = next(ln.split() for ln in p.stdout.splitlines() if ln.split()[:2] == ["4", "8"])
    probes, requests = int(row[4]), int(row[6])
    assert probes >= 3 and requests >= probes, p.stdout


@pytest.mark.slow
def test_demo_runs_where_the_host_has_no_sandbox_and_a_real_run_stops(tmp_path) -> None:
    # command 1 of the quick start on a fresh machine without bubblewrap (issue 36): the demo's
    # candidates are the bot's own engine, so it runs them unconfined and says so; `run` of the same
    # recipe fails closed, naming the opt-out. A `bwrap` that refuses (as a host whose seccomp
    # profile or sysctl forbids namespaces) stands first on PATH.
    import os

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "BISECTBOT_STATE", "BISECTBOT_SANDBOX")}
    env["PATH"] = f"{fake}:{env['PATH']}"
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "bisectbot", "demo", "--out", str(out), "--keep", "--commits", "16",
                        "--seed", "3"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "no candidate sandbox on this host" in p.stderr and "No permissions" in p.stderr, p.stderr[-3000:]
    recipe = next((out / "work").glob("demo-engine-*.yaml"))
    r = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state2"), "run", str(recipe),
                        "--runner", "local", "--out", str(tmp_path / "again")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "BISECTBOT_SANDBOX=off" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
