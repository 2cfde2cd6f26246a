"""``bisect-fanout.yml``, executed unchanged under ``act`` (host mode; tests/act/actkit.py): a
bisection as rounds of GitHub Actions jobs (issue 17).

A generated git history with a planted culprit and a command reproducer (tests/rounds), a
recipe with ``bisect.executor: actions`` and ``bisect.parallel: 3``. Each act run is one round:
``plan`` on the ledger runner -> a matrix of up to 3 ``probe`` jobs (the verdict files go
through the upload/download-artifact stand-ins) -> ``reduce`` imports them and dispatches the
next round. The contract-validated fake GitHub records that dispatch; the test replays it as
the next act run until a round files the result instead. The culprit must be the one
``bisectbot run`` names on the same history.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.act.actkit import DEPLOY_REPO, make_deployment
from tests.act.actnight import act
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.rounds.conftest import make_history

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FANOUT = "act-fanout"


def _recipe(hist, api_url: str, out: str) -> str:
    return yaml.safe_dump({
        "name": FANOUT,
        "source": {"kind": "git", "repo": str(hist.path)},
        "reproducer": {"kind": "command", "command": ["python3", "check.py"], "command_timeout_s": 60},
        "regress": "command",
        "bisect": {"good": hist.shas[0], "bad": hist.shas[-1], "executor": "actions", "parallel": 3},
        "report": {"dir": out, "github": {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": api_url}},
    }, sort_keys=False)


def test_fanout_rounds_replayed_through_dispatches_name_the_culprit(fake_github, tmp_path) -> None:  # noqa: F811
    hist = make_history(tmp_path / "history", 12, 7)
    fake_github.add_repo(DEPLOY_REPO)
    deploy = make_deployment(tmp_path / "deploy", {FANOUT: _recipe(hist, fake_github.base_url, "out/fanout")})
    state = tmp_path / "ledger-runner-state"

    payload = {"inputs": {"recipe": FANOUT, "slots": "3"}}
    rounds, sizes = 0, []
    while True:
        rounds += 1
        assert rounds <= 6, "the fan-out does not converge"
        seen = len(fake_github.dispatches)
        run, art = act(deploy, "bisect-fanout.yml", "workflow_dispatch", payload, tmp_path, state, f"round{rounds}",
                       api_url=fake_github.base_url)
        assert run.returncode == 0, run.tail()
        probes = [j for j in run.jobs_started() if "/probe " in j]
        sizes.append(len(probes))
        new = fake_github.dispatches[seen:]
        if not new:
            break
        (d,) = new  # the reduce job dispatched exactly one next round of the same workflow
        assert d["workflow"] == "bisect-fanout.yml" and d["ref"] == "main"
        assert d["inputs"]["recipe"] == FANOUT and d["inputs"]["slots"] == "3" and d["inputs"]["session"]
        assert payload["inputs"].get("session") in (None, d["inputs"]["session"])  # one session throughout
        payload = {"inputs": d["inputs"]}
    print(f"fan-out: {rounds} rounds, probes per round {sizes}")
    assert sizes[0] == 3 and all(1 <= s <= 3 for s in sizes[:-1]), sizes

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
