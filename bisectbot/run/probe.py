"""What one probe is given: the stage's :class:`ProbeContext` and the candidate's :class:`ProbeJob`.

A probe (:func:`bisectbot.session.probing.executor.run_probe`) prepares one candidate, runs the
recipe's reproducer on it and judges it (:func:`bisectbot.verdict.judge.judge`). What every
probe of a stage shares -- the recipe, the runner, the run's reference oracle, the prefetcher
of a serial run -- travels as one frozen :class:`ProbeContext`, built once by the prober; what
differs per candidate is a :class:`ProbeJob`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from ..models import Candidate
from ..recipe import Recipe, TriageToggle
from .base import CandidateRunner, Prepared, PrepareFailed


class PreparedSource(Protocol):
    """Hands out candidates prepared ahead (:class:`bisectbot.session.probing.prefetch.Prefetcher`)."""

    def get(self, c: Candidate) -> Prepared | PrepareFailed:
        """``c`` prepared (taken from what was prepared ahead, or prepared now)."""
        ...


@dataclass(frozen=True)
class ProbeJob:
    """One probe to run: the candidate, its probe key
    (:func:`bisectbot.session.probing.executor.probe_key`), attempt number, triage toggle, and the sizes
    (tokens) its threshold search asks first (``focus``, issue 23; empty: none). ``again``: the
    key's cached verdict (a skip at an end of the search) is probed once more and the new
    verdict replaces it (issue 23, input 3)."""

    candidate: Candidate
    key: str
    attempt: int = 1
    toggle: TriageToggle | None = None
    focus: tuple[Any, ...] = ()  # bisectbot.models.PromptKey (or sizes, tokens): the bad end's failing prompts
    again: bool = False

    @property
    def env(self) -> dict[str, str] | None:
        """The toggle's extra server/command environment, if any."""
        return self.toggle.env if self.toggle else None

    @property
    def args(self) -> list[str] | None:
        """The toggle's extra server/command arguments, if any."""
        return self.toggle.args if self.toggle else None


@dataclass(frozen=True)
class ProbeContext:
    """What every probe of a stage shares: the ``recipe``, the ``runner`` that prepares and
    releases candidates, the run's reference ``oracle``
    (:class:`bisectbot.reproduce.oracle.Oracle`, issue 18; None without one) and, in a serial
    run, the ``prefetcher`` that prepared candidates ahead (None: prepare on demand), and under
    ``regress: slower`` the search's ``baseline`` (:class:`bisectbot.verdict.measured.Baseline`: the
    ends' samples every candidate is judged against; None otherwise)."""

    recipe: Recipe
    runner: CandidateRunner
    oracle: Any = None
    prefetcher: PreparedSource | None = None
    baseline: Any = None

    def prepare(self, c: Candidate) -> Prepared | PrepareFailed:
        """``c`` prepared: from the prefetcher when there is one, else by the runner now."""
        return self.prefetcher.get(c) if self.prefetcher is not None else self.runner.prepare(c)

    def with_prefetcher(self, prefetcher: PreparedSource | None) -> ProbeContext:
        """The same context with another prefetcher (None: prepare on demand)."""
        return dataclasses.replace(self, prefetcher=prefetcher)
