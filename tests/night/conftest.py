"""Shared fixtures of the end-to-end night tests: the contract-following fake GitHub
(``tests/report/fake_github.py``) in a real HTTP server, with one repository."""

from __future__ import annotations

import logging

import pytest

from tests.report.fake_github import FakeGitHub

TOKEN = "ghp_NIGHTtoken1234567890abcdefghijklmnopq"
GH_REPO = "octo-org/vllm"


@pytest.fixture
def fake_github():
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    fake = FakeGitHub(token=TOKEN)
    fake.start()
    fake.add_repo(GH_REPO)
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.problems == [], "\n".join(fake.problems)
