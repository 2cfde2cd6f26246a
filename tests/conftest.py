"""Root test configuration shared by every area.

Area fixtures live in ``tests/<area>/conftest.py``; ``engine_factory`` and ``ledger``, used by
several areas, are here. Docker tests use the
``docker_required`` marker logic below: they *fail* when ``BISECTBOT_REQUIRE_DOCKER=1``
(set by ``scripts/test-all.sh``, hence in CI) and Docker is unreachable, and skip
otherwise (a developer's laptop without Docker).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The checkout goes on sys.path LAST: `tests.*` helper modules import from it, while `bisectbot`
# still comes from the installed wheel (scripts/test-all.sh runs with PYTHONSAFEPATH=1, so the
# checkout is not first on the path; tests/test_installed.py checks).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

# A suite started in the background of a non-interactive shell (`./scripts/test-all.sh &`) inherits
# SIGINT ignored, and so does every bisectbot it starts: Python installs no KeyboardInterrupt handler
# for a SIGINT ignored at start-up, and the Ctrl-C tests (tests/installed) waited out their timeouts.
# The tests start from Python's default; a handler (unlike SIG_IGN) is reset to SIG_DFL across exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


@pytest.fixture
def engine_factory() -> Iterator[Callable[..., Any]]:
    """``engine_factory(threshold=T, ...)`` starts a real reference engine
    (``bisectbot.demo.engine.start_engine``); all are stopped after the test."""
    from bisectbot.demo.engine import start_engine

    started: list[Any] = []

    def make(**kw: Any) -> Any:
        e = start_engine(**kw)
        started.append(e)
        return e

    yield make
    for e in started:
        e.stop()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Any]:
    """An open :class:`bisectbot.ledger.Ledger` under ``tmp_path/state``, closed after the test."""
    from bisectbot.ledger import Ledger

    with Ledger(tmp_path / "state") as led:
        yield led



@pytest.fixture(scope="session", autouse=True)
def sandbox_writable(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Candidates run in a sandbox whose /tmp is private (bisectbot.sandbox): the tests' candidates
    read and write files of their tests' tmp_path (scripts, ENV_DUMP, ENGINE_STARTS), so the tests'
    base temporary directory is a writable path of the sandbox (state and git dirs inside it stay
    hidden / read-only). tests/sandbox narrows it per test."""
    os.environ.setdefault("BISECTBOT_SANDBOX_WRITABLE", str(tmp_path_factory.getbasetemp()))


#: Test areas whose files run longest (real vLLM servers, generated worlds, whole workflows under
#: act), in the order they are handed out first. ``--dist loadfile`` gives each xdist worker whole
#: files in collection order only with ``--no-loadscope-reorder`` (``scripts/test-all.sh`` passes it;
#: xdist's default hands out the files with the most tests first), so a 25-minute file collected
#: last ran alone at the end of the session while the other worker idled.
LONG_AREAS = ("vllm", "worlds", "act")
#: The longest files, handed out before every other and in this order. xdist gives each worker one file,
#: then the next file to the first worker with at most two of its tests left, so the real night (issue 38:
#: the base image, four nightlies, 8 vLLM containers) is third: it starts after the worlds (~150 s, all in
#: their module fixture) on the worker that would otherwise wait ~150 s at the start of the suite for
#: ``scripts/test-all.sh``'s background build of its base image, while the other worker runs the
#: real-vLLM probe file.
LONGEST = ("tests/worlds/test_worlds.py", "tests/vllm/test_probe_vllm.py", "tests/vllm/test_real_night.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect :data:`LONGEST`, then the long areas' files first (:data:`LONG_AREAS`), every file's tests kept together and
    in their order; nothing else moves."""
    def rank(item: pytest.Item) -> int:
        parts = Path(str(item.fspath)).relative_to(ROOT).parts
        if "/".join(parts) in LONGEST:
            return LONGEST.index("/".join(parts)) - len(LONGEST)
        area = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
        return LONG_AREAS.index(area) if area in LONG_AREAS else len(LONG_AREAS)

    items[:] = sorted(items, key=rank)  # sorted() is stable: files and tests keep their order
