"""Fixtures of the report area: results, nightly histories, the fake GitHub server."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_github import FakeGitHub  # noqa: E402
from report_helpers import REPO, TOKEN  # noqa: E402

from bisectbot.ledger import Ledger  # noqa: E402
from bisectbot.recipe import GitHubTarget  # noqa: E402


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A running contract-following fake GitHub with repository ``octo-org/vllm``.

    Fails the test when any request or response broke the OpenAPI description.
    """
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
    return GitHubTarget(repo=REPO, labels=["bisectbot", "rocm"], assignees=["alice"], mentions=["bob", "amd/rocm-team"],
                        api_url=fake_github.base_url, bot_login=fake_github.bot_login)


@pytest.fixture
def client(target: GitHubTarget):
    from bisectbot.report.github import GitHubClient

    return GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5,
                        backoff_factor=0.05)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "state") as led:
        yield led
