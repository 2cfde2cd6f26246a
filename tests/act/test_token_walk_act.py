"""Issue 24, input 2, under ``act`` running the shipped ``bisect.yml`` with a fake GitHub token.

The candidate is hostile: its reproducer walks ``/proc/*/environ`` (every process it can see,
its ancestors first among them; same uid, and Yama restricts attach, not reading ``environ``)
and prints what looks like a secret base64-encoded -- a form redaction cannot know unless the
bot holds the token -- and on a bad commit it leaves a ``setsid``'d process that keeps walking
``/proc`` for a minute, writing what it finds to a file outside every artifact, to read the
token in the later filing step. Right: the bisecting job holds no secret, its processes are
killed before the verdict, filing is a separate job: the token is in no output, artifact,
report, ledger row or GitHub text, and no candidate process ever saw it.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.act.actkit import make_deployment
from tests.act.actnight import act
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401
from tests.rounds.conftest import make_history

pytestmark = [pytest.mark.slow]

NAME = "act-walk"

WALKER = r"""
import base64, glob, os, sys, time

LEAK = {leak!r}

def walk():
    found = []
    for p in glob.glob("/proc/[0-9]*/environ"):
        try:
            data = open(p, "rb").read()
        except OSError:
            continue
        found += [x for x in data.split(b"\0") if b"TOKEN" in x or b"MARKER_KEY" in x]
    return sorted(set(found))

print("walked " + base64.b64encode(b"|".join(walk())).decode())
bad = os.path.exists("BUG")
if bad and os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(LEAK + ".pid", "w") as fh:
            fh.write(str(os.getpid()))
        end = time.time() + 60
        while time.time() < end:
            with open(LEAK, "ab") as fh:
                fh.write(base64.b64encode(b"|".join(walk())) + b"\n")
            time.sleep(0.3)
        os._exit(0)
    os._exit(0)
if bad:
    os.wait()
    time.sleep(0.5)
sys.exit(1 if bad else 0)
"""


def _growing(leak: Path, window: float = 2.0) -> bool:
    """Whether the leftover still appends to ``leak`` (every 0.3 s while it lives) over ``window``
    seconds. Not its pid: inside the sandbox that is a pid of the probe's own namespace."""
    size = leak.stat().st_size if leak.exists() else -1
    time.sleep(window)
    return (leak.stat().st_size if leak.exists() else -1) != size


def test_no_candidate_sees_the_token_and_none_outlives_its_probe(fake_github, tmp_path) -> None:  # noqa: F811
    hist = make_history(tmp_path / "repo", 6, 3)
    leak = tmp_path / "leak.txt"
    walker = tmp_path / "walker.py"
    walker.write_text(WALKER.format(leak=str(leak)))
    recipe = {
        "name": NAME,
        "source": {"kind": "git", "repo": str(hist.path)},
        "reproducer": {"kind": "command", "command": [sys.executable, str(walker)], "command_timeout_s": 60},
        "regress": "command",
        "report": {"github": {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": fake_github.base_url}},
    }
    deploy = make_deployment(tmp_path / "deploy", {NAME: yaml.safe_dump(recipe, sort_keys=False)})
    state = tmp_path / "state"
    assert TOKEN not in "".join(os.environ.values())  # the test's own environment does not hold it

    payload = {"inputs": {"recipe": NAME, "good": hist.shas[0], "bad": hist.shas[-1]}}
    run, art = act(deploy, "bisect.yml", "workflow_dispatch", payload, tmp_path, state, "walk",
                   api_url=fake_github.base_url, shared_venv=False)
    assert run.returncode == 0, run.tail()
    assert run.jobs_started() == ["bisect/parse", "bisect/bisect", "bisect/answer"], run.tail()
    # input 5: the job that ran candidates had a virtualenv of its own, checked against the checkout
    (tmp_path / "act-output.log").write_text(run.output)
    fresh = [ln for ln in run.output.splitlines() if "bisectbot: fresh virtualenv" in ln]
    assert fresh and all(ln.startswith("[bisect/bisect]") and "verified against the checkout" in ln for ln in fresh), \
        [ln for ln in run.output.splitlines() if "Install bisectbot" in ln or "virtualenv" in ln or "reusing" in ln]

    # the leftover was killed with its probe (before the verdict), long before the answer job ran
    assert Path(str(leak) + ".pid").exists()  # the leftover started
    assert not _growing(leak)
    logs = [p for p in state.rglob("*.log") if p.is_file()]
    walked = [ln for p in logs for ln in p.read_text(errors="replace").splitlines() if ln.startswith("walked ")]
    assert len(walked) >= 3, logs  # the walk ran (the probes' logs hold it): the assertions below mean something
    # and so did the leftover, while it lived: a line per walk (empty inside the sandbox, whose /proc
    # shows the probe's own processes only; what it found is checked below)
    assert leak.exists() and leak.read_text().count("\n") >= 1

    # the culprit is filed from the artifact, by the job that holds the token
    (issue,) = fake_github.issues(GH_REPO)
    (uploaded,) = list(art.iterdir())
    res = json.loads((uploaded / "result.json").read_text())
    assert res["stages"][0]["first_bad"]["ref"] == hist.shas[3]

    forms = {TOKEN, base64.b64encode(TOKEN.encode()).decode()[:24]}
    forms |= {base64.b64encode(pre + TOKEN.encode()).decode()[4:28] for pre in (b"=", b"N=")}
    seen: list[tuple[str, str]] = []
    texts = {"act output": run.output, "leftover's findings": leak.read_text() if leak.exists() else ""}
    for line in texts["leftover's findings"].splitlines() + [w.split("walked ", 1)[1] for w in walked if w.strip() != "walked"]:
        texts.setdefault("decoded walks", "")
        texts["decoded walks"] += base64.b64decode(line.strip()).decode("utf-8", "replace") + "\n"
    texts["issue"] = json.dumps(fake_github.issues(GH_REPO)) + json.dumps(fake_github.comments_of(GH_REPO,
                                                                                                  issue["number"]))
    for root in (art, state):
        for p in root.rglob("*"):
            if p.is_file():
                texts[str(p)] = p.read_bytes().decode("utf-8", "replace")
    for where, text in texts.items():
        seen += [(where, f) for f in forms if f in text]
    assert seen == [], seen
