"""Stage 1 of a run: bisect the recipe's source (git range, nightlies, releases) between its ends.

:meth:`Stage1.ends` resolves the good/bad ends (the recipe's, or the source's newest
nightlies/releases), :meth:`Stage1.run` lists the candidates, starts the recipe's
reference (issue 18) for the rest of the run and bisects them in rounds.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from ...errors import BadInput
from ...models import StageResult
from ...recipe import Recipe
from ..probing.oracles import reference_up
from ..probing.prober import Prober
from ..rounds.loop import RoundLoop
from ..sources import CandidateSource, make_source, resolve_ends
from .settle import defers


class Stage1:
    """The search over the recipe's source; candidates come from ``make_source`` (``base_dir``
    resolves relative repository paths), probes from ``prober``, rounds from ``loop``."""

    def __init__(self, prober: Prober, loop: RoundLoop, recipe: Recipe, *, base_dir: Path | None = None):
        self.prober = prober
        self.loop = loop
        self.recipe = recipe
        self.base_dir = base_dir
        #: the last :meth:`run` left its verification to the commit stage (:mod:`.settle`)
        self.deferred = False

    def ends(self, good: str | None, bad: str | None,
             source: CandidateSource | None) -> tuple[str, str, CandidateSource | None]:
        """``(good, bad, source)``: the ends given, else the recipe's, else (not for git) the
        source's. Raises :class:`BadInput` when an end is still missing."""
        r = self.recipe
        good = good or r.bisect.good
        bad = bad or r.bisect.bad
        if (not good or not bad) and r.source.kind != "git":
            source = source or make_source(r, self.base_dir, self.prober.ledger)
            good, bad = resolve_ends(r, good, bad, source)
        if not good or not bad:
            raise BadInput("a bisection needs a good and a bad end: --good/--bad or bisect.good/bisect.bad "
                           "in the recipe")
        return good, bad, source

    def run(self, good: str, bad: str, source: CandidateSource | None,
            stack: ExitStack) -> tuple[StageResult, CandidateSource]:
        """Bisect the source's candidates between ``good`` and ``bad``: ``(stage, source)``. The
        recipe's reference is entered on ``stack``: it stays up until the run closes it."""
        source = source or make_source(self.recipe, self.base_dir, self.prober.ledger)
        cands = source.candidates(good, bad)
        stack.enter_context(reference_up(self.prober, cands[0], source))  # issue 18
        # a commit stage that can follow re-measures the nightly boundary with its ends (issue 40)
        self.deferred = defers(self.recipe, cands)
        return self.loop.search("stage 1", cands, source.component, source.flags,
                                verify=False if self.deferred else None), source
