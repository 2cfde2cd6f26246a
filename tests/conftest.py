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

import pytest


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
