"""Fixtures of the real-vLLM lane (issue 22): the lane's python, the tiny model, and ONE plain and
ONE planted vLLM server per test session (all probe tests of the lane are in ``test_probe_vllm.py``,
so ``--dist loadfile`` keeps them on one worker and each server starts once).

Tests that need the lane *fail* when it is missing and ``BISECTBOT_REQUIRE_VLLM=1`` (set by
``scripts/test-all.sh``, hence in CI), and skip otherwise (a developer without the lane:
``scripts/vllm-lane.sh`` builds it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.vllm import lane


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The lane venv's python (``scripts/vllm-lane.sh``)."""
    try:
        return lane.lane_python()
    except lane.LaneMissing as e:
        if os.environ.get("BISECTBOT_REQUIRE_VLLM") == "1":
            pytest.fail(f"real-vLLM lane missing but BISECTBOT_REQUIRE_VLLM=1 (CI): {e}")
        pytest.skip(f"{e} (set BISECTBOT_REQUIRE_VLLM=1 to make this a failure)")


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path) -> Path:
    """The tiny random-weight Llama of the lane (made on this machine, cached)."""
    return lane.tiny_model(vllm_python)


@pytest.fixture(scope="session")
def lane_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-logs")


@pytest.fixture(scope="session")
def lane_servers(vllm_python: Path, tiny_model: Path, lane_logs: Path) -> Iterator[dict[str, lane.VllmServer]]:
    """The session's three servers, started at once (each ~45 s on 2 cores; together ~60-90 s):
    ``plain`` and ``other`` (two unpatched processes) and ``planted`` (the bug in an overlay)."""
    overlay = lane.planted_overlay(vllm_python, lane_logs / "overlay")
    servers = {"plain": lane.VllmServer(vllm_python, tiny_model, lane_logs / "plain.log", cpu="0"),
               "planted": lane.VllmServer(vllm_python, tiny_model, lane_logs / "planted.log", overlay=overlay,
                                          cpu="1"),
               "other": lane.VllmServer(vllm_python, tiny_model, lane_logs / "other.log", cpu="1")}
    try:
        for srv in servers.values():
            srv.ready()
        yield servers
    finally:
        for srv in servers.values():
            srv.stop()


@pytest.fixture(scope="session")
def plain_vllm(lane_servers: dict[str, lane.VllmServer]) -> lane.VllmServer:
    """The unpatched vLLM serving the tiny model, prefix caching on (vLLM's default)."""
    return lane_servers["plain"]


@pytest.fixture(scope="session")
def other_vllm(lane_servers: dict[str, lane.VllmServer]) -> lane.VllmServer:
    """A second process of the unpatched build (the candidate of the no-divergence check)."""
    return lane_servers["other"]


@pytest.fixture(scope="session")
def planted_vllm(lane_servers: dict[str, lane.VllmServer]) -> lane.VllmServer:
    """vLLM with the planted chunked-prefill bug (:data:`tests.vllm.lane.PLANT`) in an overlay,
    prefix caching on."""
    return lane_servers["planted"]
