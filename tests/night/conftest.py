"""Shared fixtures of the end-to-end night tests: the contract-following fake GitHub
(``tests/report/fake_github.py``) in a real HTTP server, with one repository."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.report.fake_github import FakeGitHub, serving

TOKEN = "ghp_NIGHTtoken1234567890abcdefghijklmnopq"
GH_REPO = "octo-org/vllm"


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    with serving(TOKEN, GH_REPO) as fake:
        yield fake
