"""How long a planned bisection will take, from what this ledger measured (issue 40).

A night's cost is its probes, each a server start plus the reproducer's requests (10--40 minutes
a start on MI355X), so ``run --dry-run`` says "~9 probes" *and* how long that is: the median
wall time of the probes this ledger measured (a finite, positive number of seconds; the lower middle
one, a duration some probe took) for the same recipe (by name) on this host with the
same runner profile (the host facts stored with each probe, :func:`bisectbot.provenance.host_facts`),
times the probes the plan expects. Probes answered from the cache cost nothing and are not
counted as measurements; a maintainer's or replayed verdict has no duration; a skip (a build that
failed, a command that could not start) measured no probe's time. The plan's count is of the search's
probes: those the ledger already holds take none (a second run of one range costs no start), which
the line says. Without such a
probe there is no estimate, and the line says so rather than guess.
"""

from __future__ import annotations

import math
import platform
import statistics
from dataclasses import dataclass
from typing import Any

from ..models import Verdict
from ..provenance import HOST_KEY, SESSION_KEY


@dataclass
class Estimate:
    """``probes`` expected, ``per_probe_s`` (median seconds, None without measurements),
    ``measured`` (how many probes the median is of), ``runner`` and ``host`` it applies to."""

    probes: int
    per_probe_s: float | None
    measured: int
    runner: str
    host: str
    #: the recipe has a ``reference`` (its start and a calibration build come beside the probes)
    reference: bool = False

    @property
    def total_s(self) -> float | None:
        """Seconds for ``probes`` at the median; None without measurements or when that is no finite number."""
        if self.per_probe_s is None or not math.isfinite(self.probes * self.per_probe_s):
            return None
        return self.probes * self.per_probe_s

    def line(self) -> str:
        """The plan's ``time:`` line."""
        if self.per_probe_s is None:
            return (f"time: no estimate: this ledger holds no probe of this recipe measured on {self.host} with "
                    f"runner {self.runner!r} yet (the first run's probes give one)")
        if self.total_s is None:
            return f"time: no estimate: the median of {self.measured} measured probe(s) is no usable number of seconds"
        total = self.total_s or 0.0
        return (f"time: ~{_human(total)} for ~{self.probes} probes at {_human(self.per_probe_s)} each (the median of "
                f"{self.measured} probe{'s' if self.measured != 1 else ''} of this recipe measured on {self.host} with "
                f"runner {self.runner!r}; probes the ledger already holds take none"
                + ("; the reference and its calibration build add a start each)" if self.reference else ")"))


def _human(s: float) -> str:
    """Seconds as ``0.14 s``, ``4.2 s``, ``45 s``, ``12 min`` or ``3.5 h`` (two figures below 10 s, so that
    the total and the probes times the figure per probe agree as printed)."""
    if s < 1:
        return f"{s:.2f} s"
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def estimate(ledger: Any, recipe_name: str, runner: str, probes: int, host: str | None = None,
             reference: bool = False) -> Estimate:
    """The :class:`Estimate` of ``probes`` probes of ``recipe_name`` with runner profile ``runner`` on
    ``host`` (default this host's name), from ``ledger``'s stored probes (module doc); ``reference``: the
    recipe has one (said in the line)."""
    host = host or platform.node()
    sessions = {str(s["id"]) for s in ledger.sessions(recipe_name)}
    secs: list[float] = []
    for p in ledger.probes():
        extra = p.extra if isinstance(p.extra, dict) else {}
        facts = extra.get(HOST_KEY) if isinstance(extra.get(HOST_KEY), dict) else {}
        d = p.duration_s
        if (extra.get(SESSION_KEY) in sessions and facts.get("host") == host and facts.get("runner") == runner
                and p.verdict is not Verdict.SKIP and isinstance(d, (int, float)) and math.isfinite(d) and d > 0):
            secs.append(float(d))
    # median_low: one of the measured durations, never the mean of two (a single odd row among two moved
    # the estimate halfway to it)
    return Estimate(probes, statistics.median_low(secs) if secs else None, len(secs), runner, host, reference)


__all__ = ["Estimate", "estimate"]
