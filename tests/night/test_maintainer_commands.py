"""Maintainers steer from the issue: ``/bisectbot retract`` and ``/bisectbot good|bad REF`` are
honoured on the next ``bisectbot run --file-issue``, only from OWNER/MEMBER/COLLABORATOR, and
acknowledged by one reply. Real engine history, contract-following GitHub, CLI in a subprocess."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe
from tests.report.fake_github import FakeGitHub

TOKEN = "ghp_CMDStoken1234567890abcdefghijklmnopqr"
GH_REPO = "octo-org/vllm"
ENV = {"ENGINE_STARTS": "/dev/null", "GITHUB_TOKEN": TOKEN, "BISECTBOT_GITHUB_TOKEN": "", "GH_TOKEN": ""}


@pytest.fixture
def gh():
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    fake = FakeGitHub(token=TOKEN)
    fake.start()
    fake.add_repo(GH_REPO)
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.problems == [], "\n".join(fake.problems)


def _setup(tmp_path: Path, gh: FakeGitHub):
    repo = make_engine_repo(tmp_path / "repo", n=8, k=4)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    data = yaml.safe_load(rec.read_text())
    data["report"]["github"] = {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": gh.base_url}
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    state = str(tmp_path / "state")
    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o1"), env=ENV)
    assert p.returncode == 0 and "github: created: filed #1" in p.stdout, p.stdout + p.stderr
    return repo, rec, state


def _final(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())["stages"][-1]


def _acks(gh: FakeGitHub) -> list[str]:
    return [c["body"] for c in gh.comments_of(GH_REPO, 1) if "bisectbot:ack=" in c["body"]]


def test_retract_excludes_the_culprit_and_replies_once(tmp_path, gh) -> None:
    repo, rec, state = _setup(tmp_path, gh)
    gh.add_comment(GH_REPO, 1, "/bisectbot good " + repo.shas[4][:10], author="stranger", association="NONE")
    gh.add_comment(GH_REPO, 1, "/bisectbot retract", author="maint", association="MEMBER")

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o2"), env=ENV)
    assert "retracted by a maintainer" in p.stderr, p.stdout + p.stderr
    final = _final(tmp_path / "o2")
    # the retracted culprit is skip now: only skipped commits separate last-good and first-bad
    assert final["status"] == "range" and repo.shas[4] in [c["ref"] for c in final["culprits"]]
    assert len(gh.issues(GH_REPO)) == 1  # the answer goes to the issue the retraction was asked on
    acks = _acks(gh)
    assert len(acks) == 1 and "excluded" in acks[0] and "stranger" not in acks[0]

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o3"), env=ENV)
    assert len(_acks(gh)) == 1 and len(gh.issues(GH_REPO)) == 1, p.stdout + p.stderr


def test_human_good_verdict_moves_the_culprit(tmp_path, gh) -> None:
    repo, rec, state = _setup(tmp_path, gh)
    assert _final(tmp_path / "o1")["first_bad"]["ref"] == repo.shas[4]
    gh.add_comment(GH_REPO, 1, "/bisectbot good " + repo.shas[4][:10], author="owner1", association="OWNER")

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o2"), env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr
    final = _final(tmp_path / "o2")
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == repo.shas[5]
    assert "maintainer verdict by owner1" in json.dumps(final["probes"])
    acks = _acks(gh)
    assert len(acks) == 1 and "taken as good" in acks[0]
