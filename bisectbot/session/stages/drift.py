"""The drift search (issue 12): where did the threshold move inside the bad range?

A regression whose first-garbage threshold moves later (garbage above ~20K tokens from
c3, above ~6K from c8) is one failure: stage 1 names c3. When the bad verdicts'
thresholds differ by more than a factor 2 (:meth:`bisectbot.bisect.Bisection.drift`),
this stage reports it, and with ``bisect.drift: true`` runs a second search over first
bad .. bad end on the same measurements (the probe cache answers every candidate stage 1
already measured), judged by :func:`bisectbot.verdict.judge_drift`. The finding goes to
``RunResult.findings``; it never changes the culprit.
"""

from __future__ import annotations

import dataclasses

from ...bisect import Bisection, Drift
from ...models import ProbeResult, StageResult, Status
from ...recipe import Recipe
from ...verdict import judge_drift
from ..rounds.loop import RoundLoop


def _tokens(n: int) -> str:
    return f"~{n / 1000:.0f}K" if n >= 1000 else str(n)


def drift_text(d: Drift) -> str:
    """``threshold moved from ~20K to ~6K tokens``."""
    return f"threshold moved from {_tokens(d.first_threshold)} to {_tokens(d.last_threshold)} tokens"


class DriftStage:
    """The optional second search for threshold drift, run through ``loop`` when ``recipe.bisect.drift``."""

    def __init__(self, loop: RoundLoop, recipe: Recipe):
        self.loop = loop
        self.recipe = recipe

    def run(self, st: StageResult, b: Bisection | None) -> tuple[StageResult | None, str | None]:
        """Drift seen in stage ``st`` (searched by ``b``): ``(finding, note)``. The finding is the
        drift search (with ``bisect.drift``; for ``RunResult.findings``), the note the line for
        ``RunResult.notes``; both None when there is no drift to report."""
        if b is None or st.status is not Status.CULPRIT or st.first_bad is None:
            return None, None
        d = b.drift()
        if d is None:
            return None, None
        cands = st.candidates
        lo = cands.index(st.first_bad)
        if not self.recipe.bisect.drift:
            return None, (f"{drift_text(d)} inside the bad range ({cands[d.first_index].label} .. "
                          f"{cands[d.last_index].label}); set bisect.drift: true to find where")
        if len(cands) - lo < 2:
            return None, None

        def rejudge(res: ProbeResult) -> ProbeResult:
            thr = res.threshold[1] if res.threshold else None
            j = judge_drift(d, str(res.extra.get("status") or ""), thr)
            return dataclasses.replace(res, verdict=j.verdict, reason=j.reason, signature="")

        ds = self.loop.search("threshold drift", cands[lo:], st.component, verdict_fn=rejudge)
        if ds.status is Status.CULPRIT and ds.first_bad is not None:
            ds.message = f"{drift_text(d)} at {ds.first_bad.label or ds.first_bad.ref}"
        else:
            ds.message = f"{drift_text(d)} somewhere in {cands[lo].label} .. {cands[-1].label}: {ds.message}"
        return ds, "second finding: " + ds.message


__all__ = ["DriftStage", "drift_text"]
