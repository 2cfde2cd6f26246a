"""Stage 1's verification, left to the commit stage that follows it (issue 40).

A nightly stage that ends on a culprit nightly is followed by the commit stage over the
component commits between the two nightlies. That stage's two end probes measure the nightly
boundary again, from two new server starts:

* its good end is the last-good nightly's build (its component commit is the image's own, so the
  overlay is empty): the predecessor re-measured;
* its bad end is the first-bad nightly's component on the last-good image: the culprit nightly's
  change re-measured.

Re-probing the two nightlies first would spend two more starts on the same question, and a start
is a night's cost (10--40 minutes on MI355X). So stage 1 searches without its own verification when
such a stage can follow (:func:`defers`), and :func:`settle` then either takes the commit stage's
ends as its verification (both fresh, good and bad as stage 1 said) or, where no commit stage ran
or its ends do not say so, re-probes the two nightlies now as the search would have (attempt 2),
so a nightly culprit is never reported verified on less than a re-measurement.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...models import Candidate, ProbeResult, StageResult, Status, Verdict
from ...recipe import Recipe
from ...verdict.record import measured_now
from ..probing.executor import Echo
from ..probing.prober import Prober

SETTLED = "verified by the {stage} stage's ends"
"""The start of stage 1's note when the commit stage's ends verified it."""


def defers(recipe: Recipe, candidates: Sequence[Candidate]) -> bool:
    """True when stage 1 over ``candidates`` leaves its verification to a commit stage: the recipe
    verifies, runs a second stage and names components to bisect, and both ends are images (nightlies
    whose component commits the commit stage can overlay)."""
    bs = recipe.bisect
    return bool(bs.verify and bs.second_stage and bs.components and candidates
                and candidates[0].meta.get("image") and candidates[-1].meta.get("image"))


def _fresh(st: StageResult, c: Candidate, want: Verdict) -> ProbeResult | None:
    """``st``'s first probe of ``c`` when it was measured in this run with verdict ``want``."""
    p = next((p for p in st.probes if p.candidate.ref == c.ref), None)
    return p if p is not None and p.verdict is want and measured_now(p) else None


def _confirms(st: StageResult, later: StageResult) -> bool:
    """Whether ``later``'s ends re-measured ``st``'s boundary (module doc): its good end an empty
    overlay on the last-good nightly, measured good now; its bad end an overlay on the same image,
    measured bad now."""
    lg = st.last_good
    if lg is None or len(later.candidates) < 2 or not lg.meta.get("image"):
        return False
    good, bad = later.candidates[0], later.candidates[-1]
    on_lg = all(c.meta.get("base") == lg.meta["image"] for c in (good, bad))
    empty = good.meta.get("base_commit") == good.ref
    return bool(on_lg and empty and _fresh(later, good, Verdict.GOOD) and _fresh(later, bad, Verdict.BAD))


def settle(st: StageResult, later: Sequence[StageResult], prober: Prober, echo: Echo) -> None:
    """Complete stage 1's deferred verification (module doc) in place: a note on ``st`` when a
    stage in ``later`` confirmed it; else the two nightlies re-probed now (attempt 2), their
    probes appended to ``st``, and on a disagreement ``st`` and every later culprit stage become
    ``inconclusive`` with the reason. A stage 1 without a culprit has nothing to verify."""
    if st.status is not Status.CULPRIT or st.first_bad is None or st.last_good is None:
        return
    for s in later:
        if _confirms(st, s):
            good, bad = s.candidates[0], s.candidates[-1]
            st.message = (f"{SETTLED.format(stage=s.name)}: {good.label or good.ref[:12]} (the last-good nightly's "
                          f"build, nothing overlaid) re-measured good and {bad.label or bad.ref[:12]} (the first-bad "
                          "nightly's change on the last-good nightly) bad")
            return
    echo(f"{st.name}: no commit stage re-measured the nightly boundary: verifying it now "
         f"(re-probing {st.first_bad.label or st.first_bad.ref[:12]} and {st.last_good.label or st.last_good.ref[:12]})")
    failed = ""
    for c, want in ((st.first_bad, Verdict.BAD), (st.last_good, Verdict.GOOD)):
        res, origin = prober.probe(c, 2)
        st.probes.append(res)
        prober.log("probe", {"ref": c.ref, "label": c.label, "attempt": 2, "verdict": res.verdict.value,
                             "effective": res.verdict.value, "reason": res.reason, "signature": res.signature,
                             "duration_s": round(res.duration_s, 3), "origin": origin, "phase": "verify"})
        echo(f"verify {c.label or c.ref[:12]}: {res.verdict.value}; {res.reason}")
        if res.verdict is not want and not failed:
            failed = (f"verification failed: the re-probe of {c.label or c.ref[:12]} was {res.verdict.value}, "
                      f"expected {want.value}")
    if failed:
        st.status, st.message = Status.INCONCLUSIVE, failed
        for s in later:
            if s.status is Status.CULPRIT:
                s.status, s.message = Status.INCONCLUSIVE, f"the nightly stage's {failed}"


__all__ = ["SETTLED", "defers", "settle"]
