"""``nightly.yml``, executed unchanged under ``act`` (host mode; tests/act/actkit.py).

Real act, real dockerd, the registry on 127.0.0.1:5000 holding this test's nightlies of the
reference engine, the contract-validated fake GitHub in a real HTTP server. What the test
controls is what a deployment controls: its recipe, the dispatch inputs, the runner's
environment (``BISECTBOT_STATE``), the ``BISECTBOT_GITHUB_TOKEN`` secret and the
``BISECTBOT_BOT_LOGIN`` variable. Assertions are on the fake GitHub's recorded state.

Night 1 files one issue; night 2 (one more bad nightly) comments on it; after a maintainer's
``/bisectbot retract`` night 3 excludes the culprit -- known to the bisecting job only through the
issue body's culprit marker, as in production where the filing job's ledger is not the GPU
runner's -- and files the new answer as a NEW issue, linked from the reply to the retraction. A recipe with ``bisect.executor: actions`` is handed to
``bisect-fanout.yml`` (the dispatch the fake GitHub records) instead of being bisected in the job.
"""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from tests.act.actkit import DEPLOY_REPO, make_deployment
from tests.act.actnight import RECIPE, act, cleanup, recipe_text, spec
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import push_nightlies
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HANDOFF = "act-handoff"
PAGES_URL = "https://bisectbot-test.github.io/deploy"


def test_nightly_files_then_comments_then_a_retraction_files_anew(registry, base_image, fake_github,  # noqa: F811
                                                                   tmp_path) -> None:
    repository = f"bisectbot-test/act-{uuid.uuid4().hex[:8]}"
    specs = [spec(1, 1_000_000), spec(2, 1_000_000), spec(3, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: recipe_text(registry, repository, specs[0].tag, fake_github.base_url),
            HANDOFF: recipe_text(registry, repository, specs[0].tag, fake_github.base_url, name=HANDOFF,
                                 extra="\n  executor: actions\n  parallel: 3")})
        state = tmp_path / "state"
        dispatch = {"inputs": {"recipe": RECIPE}}

        # ---- night 1: N3 is the first bad nightly: one issue. The deployment publishes a dashboard
        # (the repository variable BISECTBOT_PAGES_URL): the pages job runs, and the issue embeds the
        # chart from there (issue 41 item 5b: the bisecting job never got the variable, so the issue
        # filed from its result.json named the artifact instead)
        pages = tmp_path / "pages"
        run, art = act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night1",
                       env={"ACT_TEST_PAGES": str(pages)}, variables={"BISECTBOT_PAGES_URL": PAGES_URL})
        assert run.returncode == 0, run.tail()
        issues = fake_github.issues(GH_REPO)
        assert len(issues) == 1, run.tail()
        first = issues[0]
        assert first["title"] == f"[bisectbot] {RECIPE}: Regression in image {specs[2].tag}"
        assert "bisectbot:fingerprint=" in first["body"] and TOKEN not in first["body"]
        assert f"]({PAGES_URL}/charts/{RECIPE}/" in first["body"], first["body"]
        charts = list((pages / "deployed" / "charts" / RECIPE).glob("*.png"))
        assert charts and any(f"/charts/{RECIPE}/{c.name})" in first["body"] for c in charts), charts
        assert [lb["name"] for lb in first["labels"]] == ["bisectbot"]
        # the stand-in received the report directory (and, from the commands job, the maintainers' commands)
        (uploaded,) = [p for p in art.iterdir() if p.name.startswith("bisectbot-")]
        assert {p.name.split("-")[0] for p in art.iterdir()} == {"bisectbot", "commands", "filed"}
        # the file job's filing, for the pages job on the ledger runner (deployment finding 9)
        filed = json.loads((art / f"filed-{RECIPE}-{uploaded.name.rsplit('-', 1)[1]}" / "filed.json").read_text())
        assert filed["number"] == first["number"] and filed["repo"] == GH_REPO, filed
        res = json.loads((uploaded / "result.json").read_text())
        assert res["stages"][0]["first_bad"]["label"] == specs[2].tag
        assert (uploaded / "report.md").is_file() and (uploaded / "issue.md").is_file()
        assert TOKEN not in run.output

        # ---- night 2: one more bad nightly; the same regression: a comment, no second issue
        pushed += push_nightlies([spec(4, 3000)], repository, registry=registry, base=base_image)
        # without BISECTBOT_PAGES_URL (a plain one-host deployment: no ledger runner, no Pages) the pages
        # job is skipped and the night succeeds (issue 41 item 4: it waited for a bisectbot-ledger runner)
        run, _ = act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night2")
        assert run.returncode == 0, run.tail()
        assert "Render the dashboard" not in run.output and "Deploy to GitHub Pages" not in run.output, run.tail()
        assert "bisectbot: reusing" in run.output  # the runner's virtualenv of this source tree, built on night 1
        assert len(fake_github.issues(GH_REPO)) == 1, run.tail()
        comments = fake_github.comments_of(GH_REPO, 1)
        assert len(comments) == 1 and "bisectbot:redetected=" in comments[0]["body"], comments

        # ---- a maintainer retracts the culprit; night 3 files the new answer as a new issue. In production
        # the `file` job runs on a hosted runner: the GPU runner's ledger never records a filing, and the
        # bisecting job learns which culprit is retracted only from the issue body's culprit marker
        # (`bisectbot:named=`), which the `commands` job (it holds the token) reads. Under act all jobs
        # share this ledger: forget its filings, so night 3 goes the production way.
        assert f"<!-- bisectbot:named={res['stages'][0]['first_bad']['ref']} -->" in first["body"]
        with sqlite3.connect(state / "ledger.sqlite3") as db:
            assert db.execute("DELETE FROM github").rowcount == 1
        fake_github.add_comment(GH_REPO, 1, "/bisectbot retract", author="maint", association="MEMBER")
        run, art3 = act(deploy, "nightly.yml", "workflow_dispatch", dispatch, tmp_path, state, "night3")
        (cmds,) = json.loads(next(art3.glob("commands-*/commands.json")).read_text())
        assert cmds["kind"] == "retract" and cmds["culprits"] == [res["stages"][0]["first_bad"]["ref"]], cmds
        assert "retracted by a maintainer" in run.output, run.tail()
        assert run.returncode in (0,), run.tail()  # a range is reported like a culprit (exit 3 passes the step)
        issues = fake_github.issues(GH_REPO)
        assert [i["number"] for i in issues] == [1, 2], run.tail()
        new = issues[1]
        assert new["title"].startswith(f"[bisectbot] {RECIPE}:") and "bisectbot:fingerprint=" in new["body"]
        assert new["body"] != first["body"]
        acks = [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if "bisectbot:ack=" in c["body"]]
        assert len(acks) == 1 and "excluded" in acks[0] and new["html_url"] in acks[0], acks

        # ---- a recipe with bisect.executor: actions: the night hands the bisection to bisect-fanout.yml
        fake_github.add_repo(DEPLOY_REPO)  # the deployment's own repository (GITHUB_REPOSITORY)
        before = {n: len(fake_github.comments_of(GH_REPO, n)) for n in (1, 2)}
        run, _ = act(deploy, "nightly.yml", "workflow_dispatch", {"inputs": {"recipe": HANDOFF}}, tmp_path, state,
                     "handoff", api_url=fake_github.base_url)
        assert run.returncode == 0, run.tail()
        assert fake_github.dispatches == [{"workflow": "bisect-fanout.yml", "ref": "main",
                                           "inputs": {"recipe": HANDOFF, "slots": "3"}}], run.tail()
        assert "Probe and bisect" not in "".join(run.step_seconds())
        assert len(fake_github.issues(GH_REPO)) == 2
        assert {n: len(fake_github.comments_of(GH_REPO, n)) for n in (1, 2)} == before
    finally:
        cleanup(pushed)
