"""Fixtures of the oracles area (issue 18): real reference-engine processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bisectbot.demo.engine import EngineProcess, start_engine


@pytest.fixture
def engine_factory() -> Iterator[Callable[..., EngineProcess]]:
    """``engine_factory(threshold=T, ...)`` starts a real engine; all are stopped after the test."""
    started: list[EngineProcess] = []

    def make(**kw: Any) -> EngineProcess:
        e = start_engine(**kw)
        started.append(e)
        return e

    yield make
    for e in started:
        e.stop()
