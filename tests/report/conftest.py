"""Fixtures of the report area: results, nightly histories, the fake GitHub server
(``ledger`` comes from tests/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_github import FakeGitHub, serving  # noqa: E402
from report_helpers import REPO, TOKEN, github_client  # noqa: E402

from bisectbot.recipe import GitHubTarget  # noqa: E402


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A running contract-following fake GitHub with repository ``octo-org/vllm``.

    Fails the test when any request or response broke the OpenAPI description.
    """
    with serving(TOKEN, REPO) as fake:
        yield fake


@pytest.fixture
def target(fake_github: FakeGitHub) -> GitHubTarget:
    return GitHubTarget(repo=REPO, labels=["bisectbot", "rocm"], assignees=["alice"], mentions=["bob", "amd/rocm-team"],
                        api_url=fake_github.base_url, bot_login=fake_github.bot_login)


@pytest.fixture
def client(target: GitHubTarget):
    return github_client(target)
