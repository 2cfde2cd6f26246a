"""Demo pieces that run anywhere: the reference engine (:mod:`bisectbot.demo.engine`).

``start_engine(...)`` starts a real engine process for tests and the demo; see
:func:`bisectbot.demo.engine.start_engine`.
"""

from __future__ import annotations

from .engine import EngineProcess, start_engine

__all__ = ["EngineProcess", "start_engine"]
