"""Fixtures for the patch-stack tests; helpers and the aiter fixture forms live in patches_fixtures.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from patches_fixtures import AITER_REL, AITER_TAG_FORM  # noqa: E402


@pytest.fixture
def aiter_tree(tmp_path: Path) -> Path:
    """A tree (like site-packages) holding ``aiter/`` with the tag-form fixture."""
    root = tmp_path / "site"
    f = root / AITER_REL
    f.parent.mkdir(parents=True)
    f.write_text(AITER_TAG_FORM)
    (root / "aiter" / "__init__.py").write_text("")
    return root


@pytest.fixture
def repo_stack():
    from bisectbot.patches import load_stack

    return load_stack()
