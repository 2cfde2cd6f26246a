"""``bisect-fanout.yml``, executed unchanged under ``act`` (host mode; tests/act/actkit.py): a
bisection as rounds of GitHub Actions jobs (issue 17).

A generated git history with a planted culprit and a command reproducer, a
recipe with ``bisect.executor: actions`` and ``bisect.parallel: 3``. Each act run is one round:
``plan`` on the ledger runner -> a matrix of up to 3 ``probe`` jobs (the verdict files go
through the upload/download-artifact stand-ins) -> ``reduce`` imports them and dispatches the
next round. The contract-validated fake GitHub records that dispatch; the test replays it as
the next act run until a round files the result instead. The culprit must be the one
``bisectbot run`` names on the same history. In the first round one probe's runner dies (its
bisectbot is killed): that run fails, reduce still imports the other verdicts and dispatches
the same round again with just that candidate. Then a maintainer's ``/bisectbot bisect`` on the
issue goes through bisect.yml's hand-off to the fan-out, which answers that comment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml

from tests.act.actkit import DEPLOY_REPO, make_deployment
from tests.act.actnight import act, comment_payload
from tests.act.runnerkill import DIE, RunnerKiller
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.rounds.conftest import History, git

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FANOUT = "act-fanout"
DIES = 5  # the probe of this commit kills its runner's bisectbot the first time (a runner dying mid-round)

CHECK = """\
import glob, os, sys, time
""" + DIE + """
n = int(open("n.txt").read())
once = os.environ.get("KILL_ONCE")
if once and n == DIES and not os.path.exists(once):
    open(once, "w").close()
    die(os.environ["KILL_DIR"])  # the bisectbot round probe process dies (tests/act/runnerkill): no verdict file
bad = os.path.exists("BUG")
forge = os.environ.get("FORGE_DIR")
if bad and forge and os.fork() == 0:  # issue 24: a setsid'd forger waits for verdict files, rewrites bad -> good
    os.setsid()
    if os.fork() == 0:
        beat = os.path.join(forge, "forger-" + os.urandom(6).hex())  # its heartbeat: a pid means nothing here
        end = time.time() + 20
        while time.time() < end:
            open(beat, "a").write(".")
            for f in glob.glob(os.environ["FORGE_GLOB"], recursive=True):
                try:
                    text = open(f).read()
                    if '"verdict": "bad"' in text:
                        open(f, "w").write(text.replace('"verdict": "bad"', '"verdict": "good"'))
                        open(os.path.join(forge, "forged"), "a").write(f + "\\n")
                except OSError:
                    pass
            time.sleep(0.05)
        os._exit(0)
    os._exit(0)
if bad and forge:
    os.wait()
    time.sleep(0.2)
sys.exit(1 if bad else 0)
""".replace("DIES", str(DIES))


def _history(path, n: int, culprit: int) -> History:
    """``n`` commits; from ``culprit`` on the file BUG exists, so check.py exits 1 there."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(n):
        (path / "check.py").write_text(CHECK)
        (path / "n.txt").write_text(f"{i}\n")
        if i == culprit:
            (path / "BUG").write_text("the planted regression\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"change {i}")
    return History(path, git(path, "rev-list", "--reverse", "main").splitlines(), culprit)


def _recipe(hist, api_url: str, out: str) -> str:
    return yaml.safe_dump({
        "name": FANOUT,
        "source": {"kind": "git", "repo": str(hist.path)},
        "reproducer": {"kind": "command", "command": ["python3", "check.py"], "command_timeout_s": 60},
        "env_passthrough": ["KILL_ONCE", "KILL_DIR", "FORGE_DIR", "FORGE_GLOB"],
        "regress": "command",
        "bisect": {"good": hist.shas[0], "bad": hist.shas[-1], "executor": "actions", "parallel": 3},
        "report": {"dir": out, "github": {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": api_url}},
    }, sort_keys=False)


def test_fanout_rounds_replayed_through_dispatches_name_the_culprit(fake_github, tmp_path) -> None:  # noqa: F811
    hist = _history(tmp_path / "history", 12, 7)
    fake_github.add_repo(DEPLOY_REPO)
    deploy = make_deployment(tmp_path / "deploy", {FANOUT: _recipe(hist, fake_github.base_url, "out/fanout")})
    state = tmp_path / "ledger-runner-state"

    payload = {"inputs": {"recipe": FANOUT, "slots": "3"}}
    # what the candidates may write, and nothing else: in act host mode the matrix's jobs share
    # act-cache, so the session-wide writable base temp (tests/conftest.py) would let one probe's
    # forger rewrite a sibling job's finished verdict file, which on real runners is another
    # machine (or at least a path outside the sandbox's writable set)
    rw = tmp_path / "candidate-rw"
    forge = rw / "forgers"
    forge.mkdir(parents=True)
    rounds, sizes = 0, []
    while True:
        rounds += 1
        assert rounds <= 6, "the fan-out does not converge"
        seen = len(fake_github.dispatches)
        with RunnerKiller(rw / "kill-requests", hist.shas) as killer:
            run, art = act(deploy, "bisect-fanout.yml", "workflow_dispatch", payload, tmp_path, state,
                           f"round{rounds}", api_url=fake_github.base_url,
                           env={"KILL_ONCE": str(rw / "killed-once"), "KILL_DIR": str(killer.reqdir),
                                "FORGE_DIR": str(forge), "BISECTBOT_SANDBOX_WRITABLE": str(rw),
                                "FORGE_GLOB": str(tmp_path / "act-cache" / "**" / "verdict" / "*.json")})
        probes = [j for j in run.jobs_started() if "/probe " in j]
        sizes.append(len(probes))
        if f"change {DIES}" in "".join(probes) and "died" not in sizes:
            # the runner probing DIES died: the run fails, yet reduce imported the others and
            # dispatched the same round again, with only that candidate
            assert run.returncode != 0 and (rw / "killed-once").exists() and killer.killed == [DIES], run.tail()
            assert "Job succeeded" in run.output.split("bisect-fanout/reduce")[-1], run.tail()
            sizes.append("died")
        else:
            assert run.returncode == 0, run.tail()
        new = fake_github.dispatches[seen:]
        if not new:
            break
        (d,) = new  # the reduce job dispatched exactly one next round of the same workflow
        assert d["workflow"] == "bisect-fanout.yml" and d["ref"] == "main"
        assert d["inputs"]["recipe"] == FANOUT and d["inputs"]["slots"] == "3" and d["inputs"]["session"]
        assert payload["inputs"].get("session") in (None, d["inputs"]["session"])  # one session throughout
        payload = {"inputs": d["inputs"]}
    print(f"fan-out: {rounds} runs, probes per run {sizes}")
    # issue 24, input 3: every bad probe left a setsid'd forger; each was killed before its verdict
    # file was written, so none rewrote a file (the digests matched in every reduce)
    forgers = sorted(forge.glob("forger-*"))
    assert forgers and not (forge / "forged").exists()
    beats = {p: p.stat().st_size for p in forgers}  # a living forger appends every 0.05 s
    time.sleep(1.0)
    assert not [p for p in forgers if p.stat().st_size != beats[p]], "a forger outlived its probe"
    assert "differs from the probe job's" not in run.output
    assert sizes[:3] == [3, "died", 1], sizes  # round 1: 3 probes, one runner died; round 1 again: that one
    assert all(1 <= s <= 3 for s in sizes[3:] if s != "died"), sizes

    (report,) = [p for p in art.iterdir() if p.name.startswith("bisectbot-fanout-")]
    res = json.loads((report / "result.json").read_text())
    final = res["stages"][-1]
    assert res["status"] == "culprit" and final["first_bad"]["ref"] == hist.shas[7], final

    # filed on GitHub: one issue naming the culprit
    (issue,) = fake_github.issues(GH_REPO)
    assert issue["title"].startswith(f"[bisectbot] {FANOUT}:") and hist.shas[7][:9] in issue["title"] + issue["body"]

    # the same history through `bisectbot run` in one process: the same culprit
    recipe = tmp_path / "local.yaml"
    recipe.write_text(_recipe(hist, fake_github.base_url, str(tmp_path / "local-out")))
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "local-state"), "run",
                        str(recipe)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    local = json.loads((tmp_path / "local-out" / "result.json").read_text())["stages"][-1]
    assert local["first_bad"]["ref"] == final["first_bad"]["ref"] == hist.shas[7]
    assert local["last_good"]["ref"] == final["last_good"]["ref"]

    # a maintainer asks on the issue for the same range: bisect.yml hands it to the fan-out with the
    # issue and comment; the fan-out finds the session finished in its ledger and answers that comment
    ask = f"/bisectbot bisect good={hist.shas[0]} bad={hist.shas[-1]}"
    member = fake_github.add_comment(GH_REPO, issue["number"], ask, author="maint", association="MEMBER")
    seen = len(fake_github.dispatches)
    run, _ = act(deploy, "bisect.yml", "issue_comment", comment_payload(fake_github, issue["number"], member),
                 tmp_path, state, "asked", api_url=fake_github.base_url)
    assert run.returncode == 0 and "bisect/bisect: Bisect" not in "".join(run.step_seconds()), run.tail()
    (d,) = fake_github.dispatches[seen:]
    assert d["workflow"] == "bisect-fanout.yml" and d["inputs"] == {
        "recipe": FANOUT, "good": hist.shas[0], "bad": hist.shas[-1], "slots": "3",
        "issue": str(issue["number"]), "comment": str(member["id"])}, d
    run, _ = act(deploy, "bisect-fanout.yml", "workflow_dispatch", {"inputs": d["inputs"]}, tmp_path, state,
                 "answer", api_url=fake_github.base_url)
    assert run.returncode == 0 and not [j for j in run.jobs_started() if "/probe " in j], run.tail()
    assert len(fake_github.dispatches) == seen + 1  # done: nothing dispatched any more
    replies = [c["body"] for c in fake_github.comments_of(GH_REPO, issue["number"])
               if f"bisectbot:ack={member['id']}" in c["body"]]
    assert len(replies) == 1 and hist.shas[7][:12] in replies[0], replies
    assert len(fake_github.issues(GH_REPO)) == 1

