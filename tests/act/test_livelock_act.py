"""Issue 24, inputs 3 and 4, under ``act`` running the shipped ``bisect-fanout.yml``: no round of
the fan-out is re-dispatched forever, and a verdict file rewritten after its probe is never
recorded.

Every livelock shape found in the first real night, each in a session of its own (one deployment,
one ledger runner, one act cache for all of them, so the bot's virtualenv is built once):

* no verdict came back (every runner died) while the artifacts hold files that move nothing
  (already recorded, or edited after the probe): ``reduce`` fails naming why, the session stays
  stopped;
* (a) a candidate whose server answers every request with HTTP 500 (transient, "not recorded"):
  after its second transient answer it is a recorded skip, so its round is planned at most twice
  and the chain goes on to a filed result;
* (b) verdict files refused for a recipe mismatch (a push to main changed the recipe while the
  round's probes ran): before, ``reduce`` ran ``round import ... || true`` and dispatched the same
  round again; now it fails naming the refusal and dispatches nothing;
* (c) a ``round probe`` run by hand without the plan's ``--key``/``--attempt``: on a machine
  without the ledger it writes attempt 1 where the plan asks attempt 2 ("already recorded"):
  ``reduce`` fails naming that; on the ledger runner it takes the plan's key and attempt and is
  recorded;
* (d) a process the probe's reaper cannot reach (outside its process tree: a container the
  candidate started through the runner's docker, a job another runner left) rewrites every
  verdict file that says ``bad`` into ``good`` after ``round probe`` wrote it: the artifact's
  name carries the SHA-256 ``round probe`` put in the step's output, so ``reduce`` refuses the
  file and the candidate is never recorded good; a file whose top-level verdict is not its probe
  record's is refused even with a matching digest. Within two rounds the reduce fails.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bisectbot.ledger import Ledger
from tests.act.actkit import DEPLOY_REPO, FanoutRounds, make_deployment, reduce_log
from tests.act.runnerkill import DIE, RunnerKiller
from tests.night.conftest import GH_REPO, TOKEN
from tests.report.fake_github import FakeGitHub, serving
from tests.rounds.conftest import History, git

pytestmark = [pytest.mark.slow]

NAME = "act-livelock"  # no verdict came back
A500 = "act-always-500"  # (a)
MISMATCH = "act-recipe-push"  # (b)
HANDRUN = "act-hand-run"  # (c)
FORGED = "act-forged"  # (d)

CHECK = """\
import os, sys
""" + DIE + """
bad = os.path.exists("BUG")
if os.environ.get("KILL_ALL"):
    die(os.environ["KILL_ALL"])  # this runner dies (killed from the host, tests/act/runnerkill): no verdict file
once = os.environ.get("CLEAN_ONCE")
if once and bad and not os.path.exists(once):  # a flaky reproducer: a bad build looks clean once
    open(once, "w").close()
    sys.exit(0)
push, pushes = os.environ.get("RECIPE_PUSH"), os.environ.get("PUSH_DIR")
if push:  # a push to main changes the recipe once every probe of the round has checked out
    open(os.path.join(pushes, "probe-" + open("n.txt").read().strip()), "w").close()
    if len([f for f in os.listdir(pushes) if f.startswith("probe-")]) >= int(os.environ["PUSH_AFTER"]):
        try:
            os.close(os.open(os.path.join(pushes, "pushed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            text = open(push).read()
            assert "command_timeout_s: 60" in text
            with open(push + ".tmp", "w") as fh:
                fh.write(text.replace("command_timeout_s: 60", "command_timeout_s: 90"))
            os.replace(push + ".tmp", push)
sys.exit(1 if bad else 0)
"""

# outside every probe's process tree: rewrites each verdict file that says bad
FORGER = """\
import glob, sys, time
pattern, log = sys.argv[1], sys.argv[2]
end = time.time() + 600
while time.time() < end:
    for f in glob.glob(pattern):
        try:
            text = open(f).read()
            if '"verdict": "bad"' in text:
                open(f, "w").write(text.replace('"verdict": "bad"', '"verdict": "good"'))
                open(log, "a").write(f + "\\n")
        except OSError:
            pass
    time.sleep(0.02)
"""


def _history(path: Path, n: int, culprit: int) -> History:
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


def _engine_history(path: Path) -> list[str]:
    """Four commits of the reference engine: good, two whose server answers every chat request
    with HTTP 500, bad (garbage from 1,000 tokens)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    busy = {"transient": [500] * 500, "retry_after_s": 0}
    shas = []
    for i, (cfg, subject) in enumerate([({"threshold": None}, "good"), (busy, "answers 500"),
                                        (busy, "answers 500 too"), ({"threshold": 1000}, "bad")]):
        (path / "engine.json").write_text(json.dumps({"seed": i, **cfg}))
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"engine {i} {subject}")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


class Deployment:
    def __init__(self, rounds: FanoutRounds, github: FakeGitHub, hist: History, engine: list[str]):
        self.rounds, self.github, self.hist, self.engine = rounds, github, hist, engine

    def recipe(self, name: str) -> Path:
        return self.rounds.deploy / "recipes" / f"{name}.yaml"

    def cli(self, *args: str, state: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), *args],
                              capture_output=True, text=True, timeout=120, cwd=self.rounds.tmp)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("act-livelock")
    hist = _history(tmp / "history", 10, 6)
    engine = _engine_history(tmp / "engine")
    with serving(TOKEN, GH_REPO) as github:
        github.add_repo(DEPLOY_REPO)
        report = {"dir": "out/fanout", "github": {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": github.base_url}}

        def command(name: str, **bisect) -> str:
            return yaml.safe_dump({
                "name": name, "source": {"kind": "git", "repo": str(hist.path)},
                # the name in the command: a reproducer of its own, so no session finds another's probes in
                # the ledger (the probe cache is keyed by candidate and reproducer, not by recipe name)
                "reproducer": {"kind": "command", "command": ["python3", "check.py", name], "command_timeout_s": 60},
                "env_passthrough": ["KILL_ALL", "CLEAN_ONCE", "RECIPE_PUSH", "PUSH_DIR", "PUSH_AFTER"],
                "regress": "command",
                "bisect": {"good": hist.shas[0], "bad": hist.shas[-1], "executor": "actions", "parallel": 2, **bisect},
                "report": report}, sort_keys=False)

        recipes = {n: command(n) for n in (NAME, MISMATCH, FORGED)}
        # (c): a reproducer that can miss (bisect.flake): a clean bad end is probed again, attempt 2
        recipes[HANDRUN] = command(HANDRUN, flake={"false_negative": 0.3})
        recipes[A500] = yaml.safe_dump({
            "name": A500, "source": {"kind": "git", "repo": str(tmp / "engine")},
            "server": {"command": [sys.executable, "-m", "bisectbot.demo.engine", "--port", "{port}", "--config",
                                   "engine.json"], "health_timeout_s": 30, "request_timeout_s": 30},
            "reproducer": {"min_size": 2000, "max_size": 16000, "sizes": [2000, 8000, 16000]},
            "regress": "garbage",
            "bisect": {"good": engine[0], "bad": engine[-1], "executor": "actions", "parallel": 2},
            "report": report}, sort_keys=False)
        deploy = make_deployment(tmp / "deploy", recipes)
        yield Deployment(FanoutRounds(deploy, tmp, tmp / "ledger-state", TOKEN, github.base_url), github, hist, engine)


def test_a_round_without_progress_fails_reduce_and_dispatches_nothing(deployment) -> None:
    """Round 1 runs as usual. In round 2 every probe's runner dies (no verdict file) while the
    round's artifacts hold files that move nothing: round 1's own files again (``already
    recorded``) and one edited after its probe (its SHA-256 is not the artifact's: refused)."""
    rounds, github = deployment.rounds, deployment.github
    seen = len(github.dispatches)
    run, art1 = rounds.run("round1", {"inputs": {"recipe": NAME, "slots": "2"}})
    assert run.returncode == 0, run.tail()
    (d,) = github.dispatches[seen:]
    session = d["inputs"]["session"]
    assert d["inputs"]["chain"]  # the chain's id travels with it
    verdicts = sorted(p for p in art1.iterdir() if p.name.startswith(f"verdict-{session}-r1-"))
    assert len(verdicts) == 2

    # round 2: every runner dies; the artifacts that come back move nothing
    seed = {}
    for i, v in enumerate(verdicts):
        (f,) = list(v.iterdir())
        data = f.read_bytes()
        digest = v.name.rsplit("-", 1)[1]
        if i == 1:  # edited after its probe: the artifact's digest no longer matches
            doc = json.loads(data)
            doc["reason"] = "edited"
            data = json.dumps(doc).encode()
        seed[v.name.replace("-r1-", "-r2-", 1)] = {f.name: data}
        assert len(digest) == 64
    with RunnerKiller(rounds.tmp / "kill-round2", deployment.hist.shas) as killer:
        run, _ = rounds.run("round2", {"inputs": d["inputs"]}, env={"KILL_ALL": str(killer.reqdir)}, seed=seed)
    assert killer.killed, run.tail()  # the runners died
    assert run.returncode != 0, run.tail()
    reduce = reduce_log(run)
    assert "made no progress" in reduce and "already recorded" in reduce, run.tail()
    assert "differs from the probe job's" in reduce, run.tail()
    assert len(github.dispatches) == seen + 1  # nothing dispatched after the round without progress

    # the session stays stopped: another dispatch of it fails its plan (no probe runs)
    run, _ = rounds.run("round2-again", {"inputs": d["inputs"]})
    assert run.returncode != 0 and not [j for j in run.jobs_started() if "/probe " in j], run.tail()
    assert "stopped: round" in run.output and len(github.dispatches) == seen + 1


def test_a_a_server_answering_500_is_a_skip_after_two_rounds_and_the_chain_ends(deployment) -> None:
    """(a) Both middle commits' servers answer every chat request with HTTP 500: each answer is
    transient ("not recorded"), so the plan names them again; the second answer makes each a
    recorded skip and the chain goes on to a filed result (the culprit range around them)."""
    rounds, github = deployment.rounds, deployment.github
    payload = {"inputs": {"recipe": A500, "slots": "2"}}
    busy_rounds, logs = 0, []
    for n in range(1, 7):
        seen = len(github.dispatches)
        run, art = rounds.run(f"a500-{n}", payload)
        assert run.returncode == 0, run.tail()
        probes = [j for j in run.jobs_started() if "/probe " in j]
        if [j for j in probes if "answers 500" in j]:
            busy_rounds += 1
            assert len(probes) == 2 and all("answers 500" in j for j in probes), probes
        logs.append(reduce_log(run))
        new = github.dispatches[seen:]
        if not new:
            break
        (d,) = new
        payload = {"inputs": d["inputs"]}
    else:
        raise AssertionError("the chain of rounds never ended")
    assert busy_rounds == 2, (busy_rounds, len(logs))  # planned twice, then never again
    (first,) = [log for log in logs if "transient error 1 of 2" in log]
    second = logs[logs.index(first) + 1]  # the round right after: both recorded skips
    assert first.count("transient error 1 of 2") == 2 and "HTTP 500" in first, first[-3000:]
    assert second.count("skip (round 2, runner") == 2, second[-3000:]
    assert second.count("2 transient errors, recorded as a skip") >= 2, second[-3000:]
    (report,) = [p for p in art.iterdir() if p.name.startswith("bisectbot-fanout-")]
    res = json.loads((report / "result.json").read_text())
    assert res["status"] == "range", res["status"]
    (issue,) = [i for i in github.issues(GH_REPO) if i["title"].startswith(f"[bisectbot] {A500}:")]


def test_b_a_recipe_pushed_mid_round_fails_reduce_naming_the_refusal(deployment, tmp_path) -> None:
    """(b) A push to main changes the recipe's reproducer while round 1's probes run (after every
    probe job checked out): their files carry the old recipe hash and are refused; the reduce
    fails naming that instead of dispatching round 1 again."""
    rounds, github = deployment.rounds, deployment.github
    before = deployment.recipe(MISMATCH).read_text()
    seen = len(github.dispatches)
    pushes = tmp_path / "pushes"
    pushes.mkdir()
    try:
        run, art = rounds.run("mismatch-1", {"inputs": {"recipe": MISMATCH, "slots": "2"}},
                              env={"RECIPE_PUSH": str(deployment.recipe(MISMATCH)), "PUSH_DIR": str(pushes),
                                   "PUSH_AFTER": "2"})
        assert (pushes / "pushed").exists() and deployment.recipe(MISMATCH).read_text() != before
    finally:  # the deployment as committed again (a checkout with local changes builds its own virtualenv)
        deployment.recipe(MISMATCH).write_text(before)
    assert run.returncode != 0, run.tail()
    reduce = reduce_log(run)
    assert reduce.count("probed with recipe hash") >= 2 and "made no progress" in reduce, reduce[-4000:]
    assert "Dispatch the next round" not in "".join(run.step_seconds()), run.step_seconds()
    assert len(github.dispatches) == seen  # nothing dispatched: the chain stopped
    assert len(list(art.glob("verdict-*-r1-*"))) == 2  # both probes ran and their files came back


def test_c_a_hand_run_probe_without_the_plans_attempt_fails_reduce(deployment, tmp_path) -> None:
    """(c) The bad end looks clean once, so round 2 asks for it again (attempt 2). Every runner of
    round 2 dies; the file that comes back is a ``round probe`` run by hand without --key/--attempt
    on a machine without the ledger: attempt 1, already recorded: the reduce fails naming that.
    Resumed, the same hand-run probe on the ledger runner takes the plan's key and attempt 2 and is
    recorded: the chain goes on."""
    rounds, github = deployment.rounds, deployment.github
    hist = deployment.hist
    seen = len(github.dispatches)
    run, _ = rounds.run("handrun-1", {"inputs": {"recipe": HANDRUN, "slots": "2"}},
                        env={"CLEAN_ONCE": str(tmp_path / "clean-once")})
    assert run.returncode == 0 and (tmp_path / "clean-once").exists(), run.tail()
    (d,) = github.dispatches[seen:]
    session = d["inputs"]["session"]

    def hand_run(stem: str, state: Path) -> bytes:
        out = tmp_path / f"{stem}.json"
        p = deployment.cli("round", "probe", str(deployment.recipe(HANDRUN)), "--session", session, "--ref",
                           hist.shas[-1], "--out", str(out), state=state)
        assert p.returncode == 0, p.stderr
        return out.read_bytes()

    elsewhere = hand_run("elsewhere", tmp_path / "gpu-box-state")  # no ledger there: attempt 1
    assert json.loads(elsewhere)["attempt"] == 1
    with RunnerKiller(tmp_path / "kill-handrun-2", hist.shas) as killer:
        run, _ = rounds.run("handrun-2", {"inputs": d["inputs"]}, env={"KILL_ALL": str(killer.reqdir)},
                            seed=rounds.verdict_artifact(session, 2, "elsewhere", elsewhere))
    assert killer.killed, run.tail()
    assert run.returncode != 0, run.tail()
    reduce = reduce_log(run)
    assert "stopped: round 2 made no progress: elsewhere.json: already recorded" in reduce, reduce[-4000:]
    assert len(github.dispatches) == seen + 1

    r = deployment.cli("round", "resume", str(deployment.recipe(HANDRUN)), "--session", session,
                       state=rounds.state)
    assert r.returncode == 0, r.stderr
    on_ledger = hand_run("on-ledger", rounds.state)  # the plan's key, attempt and round
    doc = json.loads(on_ledger)
    assert doc["attempt"] == 2 and doc["round"] == 2 and doc["key"] != json.loads(elsewhere)["key"]
    with RunnerKiller(tmp_path / "kill-handrun-3", hist.shas) as killer:
        run, _ = rounds.run("handrun-3", {"inputs": d["inputs"]}, env={"KILL_ALL": str(killer.reqdir)},
                            seed=rounds.verdict_artifact(session, 2, "on-ledger", on_ledger))
    reduce = reduce_log(run)
    assert f"on-ledger.json: {hist.shas[-1]} bad (round 2" in reduce, reduce[-4000:]
    (nxt,) = github.dispatches[seen + 1:]
    assert nxt["inputs"]["session"] == session and "next: round 3" in reduce, reduce[-4000:]


def test_d_a_verdict_file_rewritten_after_its_probe_is_never_recorded(deployment, tmp_path) -> None:
    """(d) A process outside every probe's tree rewrites ``"verdict": "bad"`` into ``"good"`` in
    each verdict file after ``round probe`` wrote it. Round 1: the bad end's file is refused (its
    SHA-256 is not the one in the artifact's name), the good end's recorded, round 1 dispatched
    again for the bad end alone. Round 1 again: rewritten and refused again, and so is a file of
    the same probe whose top-level verdict (good) is not its probe record's (bad), even with its
    own digest in the artifact's name: the reduce fails; the bad end was never recorded."""
    rounds, github = deployment.rounds, deployment.github
    hist = deployment.hist
    log = tmp_path / "forged.txt"
    # each job's workspace (act host mode): act-cache/<job>/hostexecutor; a narrow glob, so every pass is quick
    workspaces = rounds.tmp / "act-cache" / "*" / "hostexecutor" / "verdict" / "*.json"
    forger = subprocess.Popen([sys.executable, "-c", FORGER, str(workspaces), str(log)], start_new_session=True)
    try:
        seen = len(github.dispatches)
        run, art = rounds.run("forged-1", {"inputs": {"recipe": FORGED, "slots": "2"}})
        assert run.returncode == 0, run.tail()
        session = json.loads(next(art.glob("verdict-*/*.json")).read_text())["session"]
        files = rounds.verdict_files(art, session, 1)
        docs = {f.name: (digest, f.read_bytes()) for digest, f in files.values()}
        forged = [n for n, (digest, data) in docs.items() if json.loads(data)["ref"] == hist.shas[-1]]
        (name,) = forged
        digest, data = docs[name]
        assert json.loads(data)["verdict"] == json.loads(data)["probe"]["verdict"] == "good"  # rewritten ...
        assert hashlib.sha256(data).hexdigest() != digest  # ... after round probe reported its digest
        reduce = reduce_log(run)
        assert f"{name}: SHA-256" in reduce and "differs from the probe job's" in reduce, reduce[-4000:]
        assert f"{hist.shas[0]} good (round 1" in reduce and f"{hist.shas[-1]} good" not in reduce, reduce[-4000:]
        (d,) = github.dispatches[seen:]  # round 1 again, for the bad end

        two = json.loads(data)
        two["probe"]["verdict"] = "bad"  # the probe record as the probe found it; the top level says good
        handmade = json.dumps(two).encode()
        run, _ = rounds.run("forged-2", {"inputs": d["inputs"]},
                            seed=rounds.verdict_artifact(session, 1, "handmade", handmade))
        assert run.returncode != 0, run.tail()
        reduce = reduce_log(run)
        assert "round 1 made no progress" in reduce and "differs from the probe job's" in reduce, reduce[-4000:]
        assert "handmade.json: the file's two verdicts differ (verdict 'good', probe record 'bad')" in reduce
        assert f"{hist.shas[-1]} good" not in reduce, reduce[-4000:]
        assert len(github.dispatches) == seen + 1 and log.exists()
    finally:
        forger.kill()
        forger.wait()
    key = json.loads(docs[name][1])["key"]
    assert Ledger(rounds.state).get_probe(key) is None  # the bad end: never recorded (good or otherwise)
