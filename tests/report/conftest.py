"""Fixtures of the report area: results, nightly histories, the fake GitHub server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
