"""``try.yml`` executed unchanged under ``act`` (host mode; tests/act/actkit.py), from ``issue_comment``
payloads against the contract-validated fake GitHub, on real nightlies in the local registry (issue 42).

``/bisectbot test <ref>`` by a MEMBER on the bot's issue: the request is resolved into a diff pinned by
SHA on the hosted runner (the fake GitHub's commits and compare endpoints over a real git repository of
the component), the self-hosted job tries it on the newest nightly in its sandbox, and the comment is
answered once: a branch that only raises ``GARBAGE_ABOVE`` from 3000 to 5000 prompt tokens is
"partly" with both thresholds; a pull request that removes the bug is "fixed" -- at the head SHA read
when the request was resolved, not a later push. The same request by a stranger starts no job.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.act.actkit import make_deployment
from tests.act.actnight import RECIPE, act, cleanup, comment_payload, recipe_text, spec
from tests.containers.conftest import base_image, no_container_left_behind, registry  # noqa: F401
from tests.containers.nightly_factory import push_nightlies
from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMPONENT = "vllm-project/vllm"
CONFIG = "# Prompt tokens above which answers turn to garbage.\nGARBAGE_ABOVE = {n}\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _component(path: Path) -> dict[str, str]:
    """vLLM's repository as far as the nightlies show it: main holds the bad config (3000); branch
    ``raise-limit`` raises it to 5000; pull request 7's head removes the bug."""
    (path / "vllm").mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "vllm" / "engine_config.py").write_text(CONFIG.format(n=3000))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "the regression")
    _git(path, "checkout", "-q", "-b", "raise-limit")
    (path / "vllm" / "engine_config.py").write_text(CONFIG.format(n=5000))
    _git(path, "commit", "-q", "-am", "raise the limit")
    _git(path, "checkout", "-q", "-b", "pr7", "main")
    (path / "vllm" / "engine_config.py").write_text(CONFIG.format(n=1_000_000))
    _git(path, "commit", "-q", "-am", "fix the workspace")
    pr7 = _git(path, "rev-parse", "HEAD")
    _git(path, "update-ref", "refs/pull/7/head", pr7)
    _git(path, "checkout", "-q", "main")
    return {"pr7": pr7}


def test_try_answers_a_maintainer_partly_and_fixed_and_ignores_a_stranger(registry, base_image, fake_github,  # noqa: F811
                                                                          tmp_path) -> None:
    repository = f"bisectbot-test/act-try-{uuid.uuid4().hex[:8]}"
    specs = [spec(1, 1_000_000), spec(2, 1_000_000), spec(3, 3000), spec(4, 3000)]
    pushed = push_nightlies(specs, repository, registry=registry, base=base_image)
    try:
        shas = _component(tmp_path / "vllm-src")
        fake_github.add_repo(COMPONENT, git=tmp_path / "vllm-src")
        extra = f'\n  components: {{vllm: {{repo: "https://github.com/{COMPONENT}"}}}}'
        deploy = make_deployment(tmp_path / "deploy", {
            RECIPE: recipe_text(registry, repository, specs[0].tag, fake_github.base_url, extra=extra)})
        state = tmp_path / "state"
        fake_github.add_issue(GH_REPO, f"[bisectbot] {RECIPE}: garbage above 3000 prompt tokens", "filed earlier",
                              labels=["bisectbot"], author=fake_github.bot_login)

        # ---- a stranger asks: the parse job's condition is false, no job runs, GitHub hears nothing
        stranger = fake_github.add_comment(GH_REPO, 1, "/bisectbot test raise-limit", author="drive-by",
                                           association="NONE")
        before = len(fake_github.log)
        run, art = act(deploy, "try.yml", "issue_comment", comment_payload(fake_github, 1, stranger), tmp_path, state,
                       "stranger")
        assert run.returncode == 0 and run.jobs_started() == [], run.tail()
        assert len(fake_github.log) == before and not any(art.iterdir())

        # ---- a member asks for a branch that only moves the threshold: partly, both thresholds
        member = fake_github.add_comment(GH_REPO, 1, "/bisectbot test raise-limit", author="maint",
                                         association="MEMBER")
        run, art = act(deploy, "try.yml", "issue_comment", comment_payload(fake_github, 1, member), tmp_path, state,
                       "member-partly")
        assert run.returncode == 0, run.tail()
        assert [j.strip() for j in run.jobs_started()] == ["try/parse", "try/resolve", "try/try", "try/answer"], \
            run.tail()
        replies = [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if f"bisectbot:ack={member['id']}" in c["body"]]
        assert len(replies) == 1, [c["body"][:200] for c in fake_github.comments_of(GH_REPO, 1)]
        body = replies[0]
        assert "**partly**" in body and "the threshold moved from" in body and TOKEN not in body, body
        answer = json.loads(next(art.glob("bisectbot-try-*/try.json")).read_text())
        lo, hi = answer["before"]["threshold"][1], answer["after"]["threshold"][1]
        assert 3000 <= lo < 3500 and 5000 <= hi < 5500 and f"{lo:,}" in body and f"{hi:,}" in body, answer
        assert answer["candidate"]["label"] == specs[3].tag and answer["on_from"] == "the newest nightly"
        assert answer["change"]["source"].startswith(f"ref raise-limit of {COMPONENT} at ") and \
            answer["request"]["author"] == "maint", answer
        request = json.loads(next(art.glob("bisectbot-change-*/request.json")).read_text())
        assert request["kind"] == "ref" and request["sha"] == _git(tmp_path / "vllm-src", "rev-parse", "raise-limit")

        # ---- a member asks for pull request 7 at the head they read; a later push (which breaks it again)
        # is not what gets tested
        _git(tmp_path / "vllm-src", "checkout", "-q", "pr7")
        (tmp_path / "vllm-src" / "vllm" / "engine_config.py").write_text(CONFIG.format(n=3000))
        _git(tmp_path / "vllm-src", "commit", "-q", "-am", "a later push")
        _git(tmp_path / "vllm-src", "update-ref", "refs/pull/7/head", "HEAD")
        _git(tmp_path / "vllm-src", "checkout", "-q", "main")
        pr = fake_github.add_comment(GH_REPO, 1, f"/bisectbot test pr=7 sha={shas['pr7']}", author="maint",
                                     association="MEMBER")
        run, art = act(deploy, "try.yml", "issue_comment", comment_payload(fake_github, 1, pr), tmp_path, state,
                       "member-fixed")
        assert run.returncode == 0, run.tail()
        replies = [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if f"bisectbot:ack={pr['id']}" in c["body"]]
        assert len(replies) == 1 and "**fixed**" in replies[0], replies
        request = json.loads(next(art.glob("bisectbot-change-*/request.json")).read_text())
        assert request["kind"] == "pr" and request["sha"] == shas["pr7"], request
    finally:
        cleanup(pushed)
