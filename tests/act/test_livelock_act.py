"""Issue 24, input 4, under ``act`` running the shipped ``bisect-fanout.yml``: a round that records
nothing ends the chain with a failed ``reduce`` naming why, instead of re-dispatching it forever.

Round 1 runs as usual. In round 2 every probe's runner dies (no verdict file) while the round's
artifacts hold verdict files that move nothing: round 1's own files again (``already recorded``)
and one edited after its probe (its SHA-256 is not the artifact's: refused). Before, ``reduce`` ran
``round import ... || true``, saw files come back and dispatched round 2 again, forever.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.act.actkit import DEPLOY_REPO, make_deployment, run_act
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.rounds.conftest import History, git

pytestmark = [pytest.mark.slow]

NAME = "act-livelock"
CHECK = """\
import os, signal, sys
if os.environ.get("KILL_ALL"):
    os.kill(os.getppid(), signal.SIGKILL)  # this runner dies: no verdict file
sys.exit(1 if os.path.exists("BUG") else 0)
"""


def _history(path, n: int, culprit: int) -> History:
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


def test_a_round_without_progress_fails_reduce_and_dispatches_nothing(fake_github, tmp_path) -> None:  # noqa: F811
    hist = _history(tmp_path / "history", 10, 6)
    fake_github.add_repo(DEPLOY_REPO)
    recipe = {
        "name": NAME, "source": {"kind": "git", "repo": str(hist.path)},
        "reproducer": {"kind": "command", "command": ["python3", "check.py"], "command_timeout_s": 60},
        "env_passthrough": ["KILL_ALL"], "regress": "command",
        "bisect": {"good": hist.shas[0], "bad": hist.shas[-1], "executor": "actions", "parallel": 2},
        "report": {"dir": "out/fanout", "github": {"repo": GH_REPO, "labels": ["bisectbot"],
                                                   "api_url": fake_github.base_url}},
    }
    deploy = make_deployment(tmp_path / "deploy", {NAME: yaml.safe_dump(recipe, sort_keys=False)})
    state = tmp_path / "ledger-state"

    def round_run(name: str, payload: dict, env: dict | None = None, seed: dict | None = None):
        art = tmp_path / "artifacts" / name
        art.mkdir(parents=True)
        for artifact, files in (seed or {}).items():
            (art / artifact).mkdir()
            for fname, data in files.items():
                (art / artifact / fname).write_bytes(data)
        return run_act(deploy, "bisect-fanout.yml", "workflow_dispatch", payload, tmp=tmp_path, token=TOKEN,
                       state=state, artifacts=art, bot_login="bisectbot-app", api_url=fake_github.base_url,
                       env=env), art

    run, art1 = round_run("round1", {"inputs": {"recipe": NAME, "slots": "2"}})
    assert run.returncode == 0, run.tail()
    (d,) = fake_github.dispatches
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
    run, _ = round_run("round2", {"inputs": d["inputs"]}, env={"KILL_ALL": "1"}, seed=seed)
    assert run.returncode != 0, run.tail()
    reduce = run.output.split("bisect-fanout/reduce", 1)[-1]
    assert "made no progress" in reduce and "already recorded" in reduce, run.tail()
    assert "differs from the probe job's" in reduce, run.tail()
    assert len(fake_github.dispatches) == 1  # nothing dispatched after the round without progress

    # the session stays stopped: another dispatch of it fails its plan (no probe runs)
    run, _ = round_run("round2-again", {"inputs": d["inputs"]})
    assert run.returncode != 0 and not [j for j in run.jobs_started() if "/probe " in j], run.tail()
    assert "stopped: round" in run.output and len(fake_github.dispatches) == 1
    shutil.rmtree(tmp_path / "artifacts", ignore_errors=True)
