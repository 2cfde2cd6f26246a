"""``bisect.yml``, executed unchanged under ``act`` (host mode; tests/act/actkit.py), from
``issue_comment`` event payloads against the contract-validated fake GitHub.

``/bisectbot bisect good= bad=`` by a MEMBER runs the bisection on the self-hosted runner and
answers that comment once; the same by a stranger (``author_association: NONE``) starts no job
and sends nothing to GitHub.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.act.actkit import make_deployment
from tests.act.actnight import RECIPE, act, cleanup, comment_payload, recipe_text, spec
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import push_nightlies
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_bisect_answers_a_member_and_ignores_a_stranger(registry, base_image, fake_github, tmp_path) -> None:  # noqa: F811
    repository = f"bisectbot-test/act-{uuid.uuid4().hex[:8]}"
    specs = [spec(1, 1_000_000), spec(2, 1_000_000), spec(3, 3000), spec(4, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: recipe_text(registry, repository, specs[0].tag, fake_github.base_url)})
        state = tmp_path / "state"
        fake_github.add_issue(GH_REPO, f"[bisectbot] {RECIPE}: garbage above 3000 prompt tokens", "filed earlier",
                              labels=["bisectbot"])
        request = f"/bisectbot bisect good={specs[0].tag} bad={specs[3].tag}"

        # ---- a stranger asks: the parse job's condition is false, no job runs, GitHub hears nothing
        stranger = fake_github.add_comment(GH_REPO, 1, request, author="drive-by", association="NONE")
        before = len(fake_github.log)
        run, art = act(deploy, "bisect.yml", "issue_comment", comment_payload(fake_github, 1, stranger),
                        tmp_path, state, "stranger")
        assert run.returncode == 0, run.tail()
        assert run.jobs_started() == [], run.tail()
        assert len(fake_github.log) == before and len(fake_github.comments_of(GH_REPO, 1)) == 1
        assert not any(art.iterdir())

        # ---- a member asks: parse -> bisect on the self-hosted runner -> one reply to that comment
        member = fake_github.add_comment(GH_REPO, 1, request, author="maint", association="MEMBER")
        payload = comment_payload(fake_github, 1, member)
        run, art = act(deploy, "bisect.yml", "issue_comment", payload, tmp_path, state, "member")
        assert run.returncode == 0, run.tail()
        assert run.jobs_started() == ["bisect/parse", "bisect/bisect", "bisect/answer"], run.tail()
        replies = [c for c in fake_github.comments_of(GH_REPO, 1) if f"bisectbot:ack={member['id']}" in c["body"]]
        assert len(replies) == 1, [c["body"][:200] for c in fake_github.comments_of(GH_REPO, 1)]
        body = replies[0]["body"]
        assert f"> `{request}`" in body and member["html_url"] in body and "maint" in body
        assert specs[2].tag in body and TOKEN not in body
        assert len(fake_github.issues(GH_REPO)) == 1  # answered where asked, nothing filed elsewhere
        (uploaded,) = list(art.iterdir())
        res = json.loads((uploaded / "result.json").read_text())
        assert res["stages"][0]["first_bad"]["label"] == specs[2].tag

        # ---- a member asks for a nightly that does not exist: the job fails and says so, once
        wrong = fake_github.add_comment(GH_REPO, 1, f"/bisectbot bisect good={specs[0].tag} bad=nightly_main_20260599",
                                        author="maint", association="MEMBER")
        run, _ = act(deploy, "bisect.yml", "issue_comment", comment_payload(fake_github, 1, wrong), tmp_path, state,
                     "wrong")
        assert run.returncode != 0, run.tail()
        told = [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if f"bisectbot:failed={wrong['id']}" in c["body"]]
        assert len(told) == 1 and "/actions/runs/" in told[0], run.tail()
    finally:
        cleanup(pushed)
