"""`bisectbot run` with the local runner on real git histories of the reference engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bisectbot.errors import ServerError
from bisectbot.ledger import Ledger
from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import load_recipe
from bisectbot.run.base import Prepared, PrepareFailed
from bisectbot.run.local import LocalRunner


def test_command_mode_finds_commit_k_with_unbuildable_and_broken_commits(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=30, k=17, unbuildable={8, 22}, broken={12})
    out = tmp_path / "out"
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command")
    p = kit.run_cli("--state", str(tmp_path / "state"), "run", str(recipe))
    assert p.returncode == 0, p.stderr
    assert repo.shas[17] in p.stdout and "verified" in p.stdout
    res = json.loads((out / "result.json").read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit" and final["first_bad"]["ref"] == repo.shas[17]
    assert final["last_good"]["ref"] == repo.shas[16]
    md = (out / "report.md").read_text()
    assert repo.shas[17] in md and "Regression in" in md
    # what the confidence rests on: one run per probe, no flake rates (issue 12)
    assert "exact search (one run per probe, no bisect.flake)" in md and "set reproducer.repeats" in md
    # progress lines name candidate, verdict, reason, time and probes left
    assert "probes left" in p.stderr and "command exit" in p.stderr
    log = kit.run_cli("--state", str(tmp_path / "state"), "bisect", "log")
    assert log.returncode == 0
    assert f"bad {repo.shas[17]}" in log.stdout and f"good {repo.shas[16]}" in log.stdout


def test_local_runner_prepare_build_failure_is_skip_and_worktrees_are_removed(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=4, k=2, unbuildable={1}, broken={3})
    recipe = load_recipe(kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out"))
    r = LocalRunner(recipe, {"engine": repo.path}, workdir=tmp_path / "wt")
    cand = lambda i: Candidate(CandidateKind.COMMIT, repo.shas[i], f"c{i}", "engine")  # noqa: E731
    failed = r.prepare(cand(1))
    assert isinstance(failed, PrepareFailed) and "build failed (exit 1)" in failed.reason
    assert "BUILD_FAILS" in failed.reason and Path(failed.log_paths[0]).exists()
    ok = r.prepare(cand(0))
    assert isinstance(ok, Prepared) and (ok.source / "version.txt").read_text().strip() == "engine-0"
    assert ok.build_key == r.build_key(cand(0)) and ok.build_key != r.build_key(cand(2))
    with r.server(ok) as srv:
        import requests

        assert requests.get(srv.base_url + "/health", timeout=5).status_code == 200
        pid = srv.meta["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    r.release(ok)
    assert not ok.source.exists()
    assert "worktree" not in kit.git(repo.path, "worktree", "list").split("\n", 1)[-1]
    broken = r.prepare(cand(3))
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="exited with code"):
        with r.server(broken):
            pass
    assert time.monotonic() - t0 < 15  # a dead process ends the health wait at once
    r.release(broken)
    cr = r.run_command(r.prepare(cand(2)), [sys.executable, "-c", "import time; time.sleep(30)"],
                       timeout_s=0.5)
    assert cr.timed_out and cr.returncode is None


@pytest.mark.slow
def test_kill_9_then_resume_repeats_no_probe(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=40, k=29, unbuildable={14})
    out = tmp_path / "out"
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command")
    state = tmp_path / "state"
    env = {**os.environ, "RUN_ID": "1", "CHECK_SLEEP": "0.4"}
    proc = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(recipe)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(kit.read_starts(starts_file)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run1 = Counter(v for r, v in kit.read_starts(starts_file) if r == "1")
    assert sum(run1.values()) >= 4
    with Ledger(state) as led:
        done1 = len(led.probes())
    assert done1 >= 3
    p = kit.run_cli("--state", str(state), "run", str(recipe), env={"RUN_ID": "2", "CHECK_SLEEP": "0"})
    assert p.returncode == 0, p.stderr
    assert "resuming session" in p.stderr
    res = json.loads((out / "result.json").read_text())
    assert res["stages"][-1]["first_bad"]["ref"] == repo.shas[29]
    run2 = Counter(v for r, v in kit.read_starts(starts_file) if r == "2")
    with Ledger(state) as led:
        total = len(led.probes())
    # every probe finished before the kill came from the cache; at most the one in flight ran twice
    assert sum(run1.values()) + sum(run2.values()) <= total + 1
    assert sum(run2.values()) == total - done1
    # an uninterrupted run over the same ledger probes nothing at all
    p3 = kit.run_cli("--state", str(state), "run", str(recipe), env={"RUN_ID": "3"})
    assert p3.returncode == 0 and not [1 for r, _ in kit.read_starts(starts_file) if r == "3"]


def test_dry_run_prints_plan_without_probing(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=20, k=5)
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(recipe), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "plan: 20 candidates" in p.stdout and "boundary: expect bad" in p.stdout and "if good:" in p.stdout
    assert kit.read_starts(starts_file) == []
    p = kit.run_cli("--state", str(tmp_path / "s"), "bisect", "plan", str(recipe), "-k", "3")
    assert p.returncode == 0 and "3 at a time" in p.stdout


def test_bad_input_exit_2(tmp_path, kit) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=5, k=2)
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(recipe), "--good", repo.shas[3], "--bad", repo.shas[1])
    assert p.returncode == 2 and "not an ancestor" in p.stderr
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(recipe), "--good", "nope")
    assert p.returncode == 2 and "unknown commit 'nope'" in p.stderr


def test_boundary_failure_exit_3(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=6, k=0)
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(recipe), "--good", repo.shas[1])
    assert p.returncode == 3 and "good end is bad" in p.stdout


@pytest.mark.slow
def test_prefill_engine_history_finds_commit_k_verifies_and_reports(tmp_path, kit, starts_file) -> None:
    """Done-when: the reference engine's threshold drops below the probe sizes at commit k;
    some commits do not build and one engine never starts: `bisectbot run` finds k and verifies it."""
    n, k = 26, 15
    repo = kit.make_engine_repo(tmp_path / "repo", n=n, k=k, unbuildable={12, 20}, broken={13})
    out = tmp_path / "out"
    recipe = kit.write_recipe(
        tmp_path / "r.yaml", repo, out,
        triage=[{"name": "no-garbage-config", "args": ["--threshold", "100000"]}])
    p = kit.run_cli("--state", str(tmp_path / "state"), "run", str(recipe))
    assert p.returncode == 0, p.stderr
    res = json.loads((out / "result.json").read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit" and final["first_bad"]["ref"] == repo.shas[k]
    assert final["last_good"]["ref"] == repo.shas[k - 1] and final["confidence"] == 1.0
    verdicts = {(pr["candidate"]["ref"], pr["verdict"]) for pr in final["probes"]}
    assert (repo.shas[k], "bad") in verdicts and (repo.shas[k - 1], "good") in verdicts
    # both roles were re-probed (verification): the culprit's second start is the run's test that the bug
    # does not hide from a start (issue 40: bisect.flake_unit start, bisectbot.verdict.agreement)
    refs = [pr["candidate"]["ref"] for pr in final["probes"]]
    assert refs.count(repo.shas[k - 1]) == 2 and refs.count(repo.shas[k]) == 2, refs
    skips = [pr["reason"] for pr in final["probes"] if pr["verdict"] == "skip"]
    assert any("build failed" in r for r in skips) and any("server exited" in r for r in skips), skips
    bad_probe = next(pr for pr in final["probes"] if pr["candidate"]["ref"] == repo.shas[k])
    assert bad_probe["threshold"][1] is not None and bad_probe["threshold"][1] <= 8000
    assert bad_probe["signature"].startswith("garbage@")
    assert res["triage"] == {"no-garbage-config": "good (problem disappears)"}
    md = (out / "report.md").read_text()
    assert repo.shas[k] in md and "## Triage" in md
    assert f"--good {repo.shas[k - 1]} --bad {repo.shas[k]}" in res["reproduce"]
    # one server start per probe that reached the server (skips for build failures start nothing)
    starts = Counter(v for _, v in kit.read_starts(starts_file))
    assert starts[f"engine-{k}"] == 3  # search, verification and triage
    assert "engine-12" not in starts and "engine-20" not in starts


class CountingRunner(LocalRunner):
    """The real local runner, recording what it prepared and released."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.prepared: list[str] = []
        self.released: list[str] = []

    def prepare(self, candidate):
        res = super().prepare(candidate)
        self.prepared.append(candidate.ref)
        if isinstance(res, PrepareFailed):
            self.released.append(candidate.ref)
        return res

    def release(self, prepared):
        if prepared.meta.get("worktrees"):
            self.released.append(prepared.candidate.ref)
        super().release(prepared)


def test_prefetch_prepares_next_candidates_and_releases_every_worktree(tmp_path, kit, starts_file) -> None:
    from bisectbot.session import Session

    repo = kit.make_engine_repo(tmp_path / "repo", n=33, k=21)
    recipe = load_recipe(kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command"))
    runner = CountingRunner(recipe, {"engine": repo.path}, workdir=tmp_path / "wt")
    lines: list[str] = []
    with Ledger(tmp_path / "state") as led:
        res = Session(recipe, led, runner, echo=lines.append).run()
        events = [e for e in led.events(res.session_id) if e["kind"] == "prefetch"]
    assert res.final.first_bad.ref == repo.shas[21]
    # every preparation is a probe or a reported wasted build (issue 15); none is left unreleased
    (ev,) = events
    stats = ev["data"]
    assert stats["used"] >= 1 and stats["ahead"] == stats["used"] + stats["wasted"]
    assert len(runner.prepared) == len(res.final.probes) + stats["wasted"]
    assert any(f"{stats['wasted']} wasted build(s)" in ln for ln in lines)
    # only what the next step can need: at most one wasted build per search step
    assert stats["wasted"] <= len(res.final.probes)
    assert sorted(runner.prepared) == sorted(runner.released)
    assert not list((tmp_path / "wt").glob("cand-*"))
    assert kit.git(repo.path, "worktree", "list").count("\n") == 0


def test_parallel_k_ary_run_finds_commit(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=40, k=9, unbuildable={20})
    rec = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(rec), "--parallel", "3")
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["stages"][-1]["first_bad"]["ref"] == repo.shas[9]


@pytest.mark.slow
def test_fix_bisection_with_regress_success(tmp_path, kit, starts_file) -> None:
    """regress: success inverts the predicate: the first candidate where the garbage is gone."""
    repo = kit.make_engine_repo(tmp_path / "repo", n=12, k=7, low=30000, high=4000)  # garbage until commit 7
    out = tmp_path / "out"
    rec = kit.write_recipe(tmp_path / "r.yaml", repo, out, regress="success")
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(rec))
    assert p.returncode == 0, p.stderr
    res = json.loads((out / "result.json").read_text())
    assert res["kind"] == "fix" and res["stages"][-1]["first_bad"]["ref"] == repo.shas[7]
    verdicts = {pr["candidate"]["ref"]: pr["reason"] for pr in res["stages"][-1]["probes"]}
    assert verdicts[repo.shas[7]].startswith("fixed") and verdicts[repo.shas[6]].startswith("still broken")


@pytest.mark.slow
def test_kill_9_during_a_server_probe_leaves_no_server_after_resume(tmp_path, kit, starts_file) -> None:
    repo = kit.make_engine_repo(tmp_path / "repo", n=10, k=6, extra_cfg={"delay_s": 0.2})
    rec = kit.write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out")
    state = tmp_path / "state"
    env = {**os.environ, "RUN_ID": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(rec)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids_dir = state / "worktrees" / "engine-demo" / "pids"
    deadline = time.monotonic() + 60
    while len(kit.read_starts(starts_file)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    while not list(pids_dir.glob("*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    server_pid = int(next(pids_dir.glob("*")).name)
    proc.kill()  # kill -9 the bot only: its server keeps running in its own process group
    proc.wait()
    os.kill(server_pid, 0)  # still alive
    p = kit.run_cli("--state", str(state), "run", str(rec), env={"RUN_ID": "2"})
    assert p.returncode == 0, p.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
    assert not list(pids_dir.glob("*"))


def test_next_candidates_are_the_two_branches_likely_first() -> None:
    """Prefetch wants only what the next step can need: the pick after a good and after a bad
    verdict, the more probable branch first (issue 15)."""
    from bisectbot.bisect import Bisection
    from bisectbot.models import Verdict
    from bisectbot.session.probing.prefetch import next_candidates

    b = Bisection(33, check_boundary=False, verify=False)
    (i,) = b.next_probes(1)
    la = b.lookahead(i)
    assert sorted(next_candidates(b, i)) == sorted({la[Verdict.GOOD], la[Verdict.BAD]} - {None, i})
    b.feed(i, Verdict.BAD)
    b.feed(b.next_probes(1)[0], Verdict.GOOD)
    (j,) = b.next_probes(1)
    p_bad = float(b.posterior[: j + 1].sum())
    first = next_candidates(b, j)[0]
    assert first == b.lookahead(j)[Verdict.BAD if p_bad >= 0.5 else Verdict.GOOD]


def test_an_edited_reproducer_script_outside_the_tree_is_probed_again(tmp_path, kit, starts_file) -> None:
    """A reproducer script named by absolute path lives outside the candidate's tree: the
    recipe names it, not its content. Editing it (the bug now judged present from commit 4,
    not 7) must not reuse the old script's cached verdicts: the second run names commit 4."""
    repo = kit.make_engine_repo(tmp_path / "repo", n=12, k=7)
    script = tmp_path / "judge.sh"

    def judge_from(k: int) -> None:
        script.write_text(f'#!/bin/sh\nn=$(sed "s/.*-//" version.txt)\n[ "$n" -lt {k} ]\n')
        script.chmod(0o755)

    out = tmp_path / "out"
    recipe = kit.write_recipe(tmp_path / "r.yaml", repo, out, mode="command",
                              reproducer={"kind": "command", "command": [str(script)], "command_timeout_s": 30})
    state = str(tmp_path / "state")
    judge_from(7)
    p = kit.run_cli("--state", state, "run", str(recipe))
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "result.json").read_text())["stages"][-1]["first_bad"]["ref"] == repo.shas[7]
    judge_from(4)
    p = kit.run_cli("--state", state, "run", str(recipe))
    assert p.returncode == 0, p.stderr
    final = json.loads((out / "result.json").read_text())["stages"][-1]
    assert final["first_bad"]["ref"] == repo.shas[4] and final["last_good"]["ref"] == repo.shas[3]
    # the same script again: everything is served from the ledger
    p = kit.run_cli("--state", state, "run", str(recipe))
    assert p.returncode == 0 and "[cache]" in p.stderr, p.stderr
