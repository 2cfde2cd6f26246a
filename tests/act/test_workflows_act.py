"""The committed workflows, executed: ``nightly.yml`` and ``bisect.yml`` under ``act`` (host mode).

Real act, real dockerd, the registry on 127.0.0.1:5000 holding this test's nightlies of the
reference engine, the contract-validated fake GitHub (tests/report/fake_github.py) in a real
HTTP server. The workflows are this checkout's files unchanged; what the test controls is what a
deployment controls: its recipe (in ``recipes/``), the event payload and inputs, the runner's
environment (``BISECTBOT_STATE``) and the ``BISECTBOT_GITHUB_TOKEN`` secret. Assertions are on
the fake GitHub's recorded state.

* nightly: night 1 files one issue; night 2 (one more bad nightly) comments on it; a maintainer's
  ``/bisectbot retract`` makes night 3 exclude the culprit and file the new answer as a NEW issue,
  linked from the reply to the retraction.
* bisect: ``/bisectbot bisect good= bad=`` by a MEMBER runs the bisection and answers that comment
  once; the same by a stranger (``author_association: NONE``) starts no job and sends nothing.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.act.actkit import make_deployment, run_act
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import SERVER_COMMAND, NightlySpec, push_nightlies
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RECIPE = "act-night"


def _spec(n: int, garbage_above: int) -> NightlySpec:
    return NightlySpec(f"nightly_main_202605{n:02d}", vllm_version=f"0.19.1rc1.dev{n}+g{n:07d}ab",
                       garbage_above=garbage_above)


def _recipe(registry: str, repository: str, good: str, api_url: str) -> str:  # noqa: F811
    cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
    return f"""\
name: {RECIPE}
model: demo
source: {{kind: registry, registry: "{registry}", repository: {repository}, tag_pattern: "nightly_main_*",
          insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {good}
report:
  github: {{repo: {GH_REPO}, labels: [bisectbot], api_url: "{api_url}"}}
"""


def _cleanup(pushed) -> None:
    built = [i for p in pushed for i in subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=org.bisectbot.base-digest={p.digest}"],
        capture_output=True, text=True).stdout.split()]
    subprocess.run(["docker", "rmi", "-f", *sorted(set(built)), *[x for p in pushed for x in (p.ref, p.pinned)]],
                   capture_output=True)


def _act(deploy: Path, workflow: str, event: str, payload: dict, tmp_path: Path, state: Path, name: str,
         bot_login: str = "bisectbot-app"):
    art = tmp_path / "artifacts" / name
    art.mkdir(parents=True)
    run = run_act(deploy, workflow, event, payload, tmp=tmp_path, token=TOKEN, state=state, artifacts=art,
                  bot_login=bot_login)
    print(f"act {workflow} {event} ({name}): rc {run.returncode} in {run.seconds:.0f} s; steps {run.step_seconds()}")
    return run, art


def _comment_payload(fake, number: int, comment: dict) -> dict:
    issue = fake.repos[GH_REPO].issues[number]
    owner, name = GH_REPO.split("/")
    return {"action": "created", "issue": issue, "comment": comment,
            "repository": {"full_name": GH_REPO, "name": name, "owner": {"login": owner}, "default_branch": "main"},
            "sender": comment["user"]}


def test_nightly_files_then_comments_then_a_retraction_files_anew(registry, base_image, fake_github,  # noqa: F811
                                                                   tmp_path) -> None:
    repository = f"bisectbot-test/act-{uuid.uuid4().hex[:8]}"
    specs = [_spec(1, 1_000_000), _spec(2, 1_000_000), _spec(3, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: _recipe(registry, repository, specs[0].tag, fake_github.base_url)})
        state = tmp_path / "state"
        dispatch = {"inputs": {"recipe": RECIPE}}

        # ---- night 1: N3 is the first bad nightly: one issue
        run, art = _act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night1")
        assert run.returncode == 0, run.tail()
        issues = fake_github.issues(GH_REPO)
        assert len(issues) == 1, run.tail()
        first = issues[0]
        assert first["title"] == f"[bisectbot] {RECIPE}: Regression in image {specs[2].tag}"
        assert "bisectbot:fingerprint=" in first["body"] and TOKEN not in first["body"]
        assert [lb["name"] for lb in first["labels"]] == ["bisectbot"]
        (uploaded,) = list(art.iterdir())  # the stand-in received the report directory
        res = json.loads((uploaded / "result.json").read_text())
        assert res["stages"][0]["first_bad"]["label"] == specs[2].tag
        assert (uploaded / "report.md").is_file() and (uploaded / "issue.md").is_file()
        assert TOKEN not in run.output

        # ---- night 2: one more bad nightly; the same regression: a comment, no second issue
        pushed += push_nightlies([_spec(4, 3000)], repository, registry=registry, base=base_image)
        run, _ = _act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night2")
        assert run.returncode == 0, run.tail()
        assert len(fake_github.issues(GH_REPO)) == 1, run.tail()
        comments = fake_github.comments_of(GH_REPO, 1)
        assert len(comments) == 1 and "bisectbot:redetected=" in comments[0]["body"], comments

        # ---- a maintainer retracts the culprit; night 3 files the new answer as a new issue
        fake_github.add_comment(GH_REPO, 1, "/bisectbot retract", author="maint", association="MEMBER")
        run, _ = _act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night3")
        assert run.returncode in (0,), run.tail()  # a range is reported like a culprit (exit 3 passes the step)
        issues = fake_github.issues(GH_REPO)
        assert [i["number"] for i in issues] == [1, 2], run.tail()
        new = issues[1]
        assert new["title"].startswith(f"[bisectbot] {RECIPE}:") and "bisectbot:fingerprint=" in new["body"]
        assert new["body"] != first["body"]
        acks = [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if "bisectbot:ack=" in c["body"]]
        assert len(acks) == 1 and "excluded" in acks[0] and new["html_url"] in acks[0], acks
    finally:
        _cleanup(pushed)


def test_bisect_answers_a_member_and_ignores_a_stranger(registry, base_image, fake_github, tmp_path) -> None:  # noqa: F811
    repository = f"bisectbot-test/act-{uuid.uuid4().hex[:8]}"
    specs = [_spec(1, 1_000_000), _spec(2, 1_000_000), _spec(3, 3000), _spec(4, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: _recipe(registry, repository, specs[0].tag, fake_github.base_url)})
        state = tmp_path / "state"
        fake_github.add_issue(GH_REPO, f"[bisectbot] {RECIPE}: garbage above 3000 prompt tokens", "filed earlier",
                              labels=["bisectbot"])
        request = f"/bisectbot bisect good={specs[0].tag} bad={specs[3].tag}"

        # ---- a stranger asks: the parse job's condition is false, no job runs, GitHub hears nothing
        stranger = fake_github.add_comment(GH_REPO, 1, request, author="drive-by", association="NONE")
        before = len(fake_github.log)
        run, art = _act(deploy, "bisect.yml", "issue_comment", _comment_payload(fake_github, 1, stranger),
                        tmp_path, state, "stranger")
        assert run.returncode == 0, run.tail()
        assert run.jobs_started() == [], run.tail()
        assert len(fake_github.log) == before and len(fake_github.comments_of(GH_REPO, 1)) == 1
        assert not any(art.iterdir())

        # ---- a member asks: parse -> bisect on the self-hosted runner -> one reply to that comment
        member = fake_github.add_comment(GH_REPO, 1, request, author="maint", association="MEMBER")
        payload = _comment_payload(fake_github, 1, member)
        run, art = _act(deploy, "bisect.yml", "issue_comment", payload, tmp_path, state, "member")
        assert run.returncode == 0, run.tail()
        assert run.jobs_started() == ["bisect/parse", "bisect/bisect"], run.tail()
        replies = [c for c in fake_github.comments_of(GH_REPO, 1) if f"bisectbot:ack={member['id']}" in c["body"]]
        assert len(replies) == 1, [c["body"][:200] for c in fake_github.comments_of(GH_REPO, 1)]
        body = replies[0]["body"]
        assert f"> `{request}`" in body and member["html_url"] in body and "maint" in body
        assert specs[2].tag in body and TOKEN not in body
        assert len(fake_github.issues(GH_REPO)) == 1  # answered where asked, nothing filed elsewhere
        (uploaded,) = list(art.iterdir())
        res = json.loads((uploaded / "result.json").read_text())
        assert res["stages"][0]["first_bad"]["label"] == specs[2].tag
    finally:
        _cleanup(pushed)
