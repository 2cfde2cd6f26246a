"""A nightly result: one probe per nightly, oldest first, and the fields maintainers read.

The fields follow what vLLM maintainers already read in nightly-failure issues filed by the
external CI dashboard (see DOMAIN.md): *last good nightly*, *first bad nightly* (streak start),
*streak length* and *pass/fail flips*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import ProbeResult, Verdict


def problem_present(probe: ProbeResult, kind: str = "regression") -> bool | None:
    """Does ``probe`` show the tracked problem? ``None`` for a skip (untestable).

    For ``kind == "regression"`` the problem is present when the verdict is ``bad``; for a fix
    bisection (``kind == "fix"``, regress mode ``success``, where *bad* means "fixed") when it is
    ``good``.
    """
    if probe.verdict == Verdict.SKIP:
        return None
    bad = probe.verdict == Verdict.BAD
    return bad if kind != "fix" else not bad


@dataclass
class Streak:
    """Summary of a nightly history.

    ``last_good``/``first_bad`` are candidate labels (or refs); ``length`` counts the nightlies
    of the current failing streak (skips inside it are not counted and do not break it);
    ``flips`` counts pass<->fail changes over the whole history (skips ignored); ``failing``
    says whether the newest tested nightly shows the problem.
    """

    failing: bool
    length: int = 0
    first_bad: str | None = None
    last_good: str | None = None
    flips: int = 0
    newest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"failing": self.failing, "length": self.length, "first_bad": self.first_bad,
                "last_good": self.last_good, "flips": self.flips, "newest": self.newest}


def _name(p: ProbeResult) -> str:
    return p.candidate.label or p.candidate.ref


@dataclass
class NightlyResult:
    """Per-nightly probes of one recipe, oldest first.

    ``probes`` holds one :class:`ProbeResult` per nightly (``threshold`` in prompt tokens).
    ``threshold_below`` (tokens) is the recipe's ``threshold-below`` bound, drawn as a line in
    the chart; ``max_size`` (tokens) is the largest probed prompt (a nightly that never turned
    to garbage is drawn there).
    """

    recipe: str
    probes: list[ProbeResult] = field(default_factory=list)
    kind: str = "regression"
    regress: str = ""
    threshold_below: int | None = None
    max_size: int | None = None

    @property
    def newest(self) -> ProbeResult | None:
        return self.probes[-1] if self.probes else None

    def streak(self) -> Streak:
        """Compute :class:`Streak` over ``probes`` (oldest first)."""
        states = [(p, problem_present(p, self.kind)) for p in self.probes]
        tested = [(p, s) for p, s in states if s is not None]
        flips = sum(1 for (_, a), (_, b) in zip(tested, tested[1:]) if a != b)
        newest = _name(tested[-1][0]) if tested else None
        if not tested or not tested[-1][1]:
            last_good = _name(tested[-1][0]) if tested else None
            return Streak(failing=False, flips=flips, last_good=last_good, newest=newest)
        length = 0
        first_bad = None
        last_good = None
        for p, s in reversed(tested):
            if s:
                length += 1
                first_bad = _name(p)
            else:
                last_good = _name(p)
                break
        return Streak(failing=True, length=length, first_bad=first_bad, last_good=last_good,
                      flips=flips, newest=newest)

    def has_thresholds(self) -> bool:
        """True when at least one probe measured a threshold (a chart is worth drawing)."""
        return any(p.threshold and any(v is not None for v in p.threshold) for p in self.probes)

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "kind": self.kind, "regress": self.regress,
                "threshold_below": self.threshold_below, "max_size": self.max_size,
                "probes": [p.to_dict() for p in self.probes], "streak": self.streak().to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NightlyResult:
        return cls(recipe=d["recipe"], kind=d.get("kind", "regression"), regress=d.get("regress", ""),
                   threshold_below=d.get("threshold_below"), max_size=d.get("max_size"),
                   probes=[ProbeResult.from_dict(p) for p in d.get("probes") or []])
