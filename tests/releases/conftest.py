"""Fixtures of the release-bisection tests (definitions and the synthetic index in release_fixtures.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from release_fixtures import index, patches_dir  # noqa: E402,F401
