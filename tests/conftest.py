"""Root test configuration shared by every area.

Area fixtures live in ``tests/<area>/conftest.py``. Docker tests use the
``docker_required`` marker logic below: they *fail* when ``BISECTBOT_REQUIRE_DOCKER=1``
(set by ``scripts/test-all.sh``, hence in CI) and Docker is unreachable, and skip
otherwise (a developer's laptop without Docker).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

# The checkout goes on sys.path LAST: `tests.*` helper modules import from it, while `bisectbot`
# still comes from the installed wheel (scripts/test-all.sh runs with PYTHONSAFEPATH=1, so the
# checkout is not first on the path; tests/test_installed.py checks).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

# Under pytest-xdist every worker is its own test session: give each its own run label, so one
# worker's "no container left behind" check never sees (or removes) another worker's containers.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["BISECTBOT_RUN_ID"] = f"tests-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def require_docker() -> None:
    """Use in every test that needs the Docker daemon."""
    if docker_available():
        return
    if os.environ.get("BISECTBOT_REQUIRE_DOCKER") == "1":
        pytest.fail("Docker daemon unreachable but BISECTBOT_REQUIRE_DOCKER=1 (CI): start dockerd")
    pytest.skip("Docker daemon unreachable (set BISECTBOT_REQUIRE_DOCKER=1 to make this a failure)")
