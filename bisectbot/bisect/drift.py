"""The threshold moved inside the bad range (issue 12): the data of the second, drift search.

:class:`Drift` is what :class:`bisectbot.bisect.search.Bisection` carries into that search;
its verdict rule is :func:`bisectbot.verdict.rules.judge_drift`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Drift:
    """The first-garbage threshold moved inside the bad range: ``first_threshold`` tokens at
    candidate ``first_index`` (lowest-index bad verdict), ``last_threshold`` at ``last_index``."""

    first_index: int
    first_threshold: int
    last_index: int
    last_threshold: int

    @property
    def split(self) -> int:
        """Tokens between the two thresholds (geometric mean): the second search's cut."""
        return int(round(math.sqrt(self.first_threshold * self.last_threshold)))

    @property
    def lowered(self) -> bool:
        return self.last_threshold < self.first_threshold
