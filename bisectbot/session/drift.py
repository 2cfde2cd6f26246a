"""The drift search (issue 12): where did the threshold move inside the bad range?

A regression whose first-garbage threshold moves later (garbage above ~20K tokens from
c3, above ~6K from c8) is one failure: stage 1 names c3. When the bad verdicts'
thresholds differ by more than a factor 2 (:meth:`bisectbot.bisect.Bisection.drift`),
this stage reports it, and with ``bisect.drift: true`` runs a second search over first
bad .. bad end on the same measurements (the probe cache answers every candidate stage 1
already measured), judged by :func:`bisectbot.bisect.judge_drift`. The finding goes to
``RunResult.findings``; it never changes the culprit.
"""

from __future__ import annotations

import dataclasses

from ..bisect import Bisection, Drift, judge_drift
from ..models import ProbeResult, RunResult, StageResult, Status


def _tokens(n: int) -> str:
    return f"~{n / 1000:.0f}K" if n >= 1000 else str(n)


def drift_text(d: Drift) -> str:
    """``threshold moved from ~20K to ~6K tokens``."""
    return f"threshold moved from {_tokens(d.first_threshold)} to {_tokens(d.last_threshold)} tokens"


class DriftStage:
    """Mixin of :class:`bisectbot.session.Session`: the optional second search for threshold drift."""

    def drift_finding(self, st: StageResult, b: Bisection | None, result: RunResult) -> None:
        """Note drift seen in stage ``st`` (searched by ``b``); with ``bisect.drift`` locate it and
        append the search to ``result.findings``."""
        if b is None or st.status is not Status.CULPRIT or st.first_bad is None:
            return
        d = b.drift()
        if d is None:
            return
        cands = st.candidates
        lo = cands.index(st.first_bad)
        if not self.recipe.bisect.drift:
            result.notes.append(f"{drift_text(d)} inside the bad range ({cands[d.first_index].label} .. "
                                f"{cands[d.last_index].label}); set bisect.drift: true to find where")
            return
        if len(cands) - lo < 2:
            return

        def rejudge(res: ProbeResult) -> ProbeResult:
            thr = res.threshold[1] if res.threshold else None
            j = judge_drift(d, str(res.extra.get("status") or ""), thr)
            return dataclasses.replace(res, verdict=j.verdict, reason=j.reason, signature="")

        ds = self.search("threshold drift", cands[lo:], st.component, verdict_fn=rejudge)
        if ds.status is Status.CULPRIT and ds.first_bad is not None:
            ds.message = f"{drift_text(d)} at {ds.first_bad.label or ds.first_bad.ref}"
        else:
            ds.message = f"{drift_text(d)} somewhere in {cands[lo].label} .. {cands[-1].label}: {ds.message}"
        result.findings.append(ds)
        result.notes.append("second finding: " + ds.message)


__all__ = ["DriftStage", "drift_text"]
