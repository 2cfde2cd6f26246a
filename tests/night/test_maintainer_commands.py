"""Maintainers steer from the issue: ``/bisectbot retract`` and ``/bisectbot good|bad REF`` are
honoured on the next ``bisectbot run --file-issue``, only from OWNER/MEMBER/COLLABORATOR, and
acknowledged by one reply. Real engine history, contract-following GitHub, CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe
from tests.night.conftest import GH_REPO, TOKEN
from tests.report.fake_github import FakeGitHub

ENV = {"ENGINE_STARTS": "/dev/null", "GITHUB_TOKEN": TOKEN, "BISECTBOT_GITHUB_TOKEN": "", "GH_TOKEN": ""}




def _setup(tmp_path: Path, fake_github: FakeGitHub):
    repo = make_engine_repo(tmp_path / "repo", n=8, k=4)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    data = yaml.safe_load(rec.read_text())
    data["report"]["github"] = {"repo": GH_REPO, "labels": ["bisectbot"], "api_url": fake_github.base_url,
                                "bot_login": fake_github.bot_login}
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    state = str(tmp_path / "state")
    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o1"), env=ENV)
    assert p.returncode == 0 and "github: created: filed #1" in p.stdout, p.stdout + p.stderr
    return repo, rec, state


def _final(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())["stages"][-1]


def _acks(fake_github: FakeGitHub) -> list[str]:
    return [c["body"] for c in fake_github.comments_of(GH_REPO, 1) if "bisectbot:ack=" in c["body"]]


def test_retract_excludes_the_culprit_and_replies_once(tmp_path, fake_github) -> None:
    repo, rec, state = _setup(tmp_path, fake_github)
    fake_github.add_comment(GH_REPO, 1, "/bisectbot good " + repo.shas[4][:10], author="stranger", association="NONE")
    fake_github.add_comment(GH_REPO, 1, "/bisectbot retract", author="maint", association="MEMBER")

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o2"), env=ENV)
    assert "retracted by a maintainer" in p.stderr, p.stdout + p.stderr
    final = _final(tmp_path / "o2")
    # the retracted culprit is skip now: only skipped commits separate last-good and first-bad
    assert final["status"] == "range" and repo.shas[4] in [c["ref"] for c in final["culprits"]]
    # the new answer is a new issue (its own fingerprint); the reply to the retraction links to it
    issues = fake_github.issues(GH_REPO)
    assert [i["number"] for i in issues] == [1, 2], p.stdout + p.stderr
    assert "bisectbot:fingerprint=" in issues[1]["body"] and issues[0]["body"] != issues[1]["body"]
    assert "github: created: filed #2" in p.stdout
    acks = _acks(fake_github)
    assert len(acks) == 1 and "excluded" in acks[0] and f"filed as {issues[1]['html_url']}" in acks[0] and "stranger" not in acks[0]

    # the next night: the retraction still holds; the same answer comments on #2, nothing new is filed
    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o3"), env=ENV)
    assert len(_acks(fake_github)) == 1 and len(fake_github.issues(GH_REPO)) == 2, p.stdout + p.stderr
    assert "github: commented: commented on #2" in p.stdout or "github: unchanged" in p.stdout, p.stdout


def test_human_good_verdict_moves_the_culprit(tmp_path, fake_github) -> None:
    repo, rec, state = _setup(tmp_path, fake_github)
    assert _final(tmp_path / "o1")["first_bad"]["ref"] == repo.shas[4]
    fake_github.add_comment(GH_REPO, 1, "/bisectbot good " + repo.shas[4][:10], author="owner1", association="OWNER")

    p = run_cli("--state", state, "run", str(rec), "--file-issue", "--out", str(tmp_path / "o2"), env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr
    final = _final(tmp_path / "o2")
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == repo.shas[5]
    assert "maintainer verdict by owner1" in json.dumps(final["probes"])
    acks = _acks(fake_github)
    assert len(acks) == 1 and "taken as good" in acks[0]
