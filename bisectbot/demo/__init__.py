"""Demo pieces that run anywhere: the reference engine (:mod:`bisectbot.demo.engine`).

``start_engine(...)`` starts a real engine process for tests and the demo; see
:func:`bisectbot.demo.engine.start_engine`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EngineProcess", "start_engine"]


def __getattr__(name: str) -> Any:
    # Imported lazily: ``python -m bisectbot.demo.engine`` must not find the engine module
    # already imported by this package (runpy's RuntimeWarning in every server log).
    if name in __all__:
        from . import engine

        return getattr(engine, name)
    raise AttributeError(name)
