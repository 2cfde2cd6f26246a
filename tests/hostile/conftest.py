"""Fixtures of the hostile-input tests: the contract-following fake GitHub in a real HTTP server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bisectbot.ledger import Ledger
from bisectbot.recipe import GitHubTarget
from tests.report.fake_github import FakeGitHub
from tests.report.report_helpers import REPO, TOKEN


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    fake = FakeGitHub(token=TOKEN)
    fake.start()
    fake.add_repo(REPO)
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.problems == [], "\n".join(fake.problems)


@pytest.fixture
def target(fake_github: FakeGitHub) -> GitHubTarget:
    return GitHubTarget(repo=REPO, labels=["bisectbot"], api_url=fake_github.base_url, bot_login=fake_github.bot_login)


@pytest.fixture
def client(target: GitHubTarget):
    from bisectbot.report.github import GitHubClient

    return GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5,
                        backoff_factor=0.05)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "state") as led:
        yield led
