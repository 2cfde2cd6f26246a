"""Fixtures of the hostile-input tests: the contract-following fake GitHub in a real HTTP server
(``ledger`` and ``engine_factory`` come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bisectbot.recipe import GitHubTarget
from tests.report.fake_github import FakeGitHub, serving
from tests.report.report_helpers import REPO, TOKEN, github_client


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    with serving(TOKEN, REPO) as fake:
        yield fake


@pytest.fixture
def target(fake_github: FakeGitHub) -> GitHubTarget:
    return GitHubTarget(repo=REPO, labels=["bisectbot"], api_url=fake_github.base_url, bot_login=fake_github.bot_login)


@pytest.fixture
def client(target: GitHubTarget):
    return github_client(target)
