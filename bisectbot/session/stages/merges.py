"""Non-linear history (issue 12): when the first-parent search names a merge, search its branch.

With ``source.first_parent: false`` the stage-1 candidates are still the first-parent
chain (each one's last good is its parent). When the culprit is a merge, the second
parent's first-parent chain from the merge base to the branch tip is bisected
(:func:`bisectbot.bisect.merge_descent`); the culprit found there is reported together
with the merge that brought it in, and its last good is its own parent, so the printed
Reproduce command works. When the branch alone does not reproduce (the bug needs both
sides), the merge stays the culprit and is flagged as one.
"""

from __future__ import annotations

from ...bisect import merge_descent
from ...models import StageResult, Status
from ..probing.executor import Echo
from ..rounds.loop import RoundLoop
from ..sources import CandidateSource, GitCandidates


class MergeStage:
    """The second-parent search below a merge culprit, run through ``loop``; ``echo`` receives
    the line that says so."""

    def __init__(self, loop: RoundLoop, *, echo: Echo):
        self.loop = loop
        self.echo = echo

    def run(self, st: StageResult, source: CandidateSource) -> StageResult | None:
        """The branch search below merge culprit ``st.first_bad``, or None when there is none to do."""
        if (st.status is not Status.CULPRIT or st.first_bad is None or not isinstance(source, GitCandidates)
                or source.src.first_parent):
            return None
        merge = st.first_bad
        parents = source.repo.parent_shas(merge.ref)
        base = source.repo.merge_base(parents[0], parents[1]) if len(parents) > 1 else None
        rng = merge_descent(parents, base)
        if rng is None:
            return None
        self.echo(f"the culprit {merge.label or merge.ref} is a merge: bisecting its branch "
                  f"{rng[0][:10]}..{rng[1][:10]}")
        cands = source.repo.commits(rng[0], rng[1], first_parent=True)
        bs = self.loop.search("merged branch", cands, source.component, source.flags)
        where = f"merge {merge.ref} ({merge.meta.get('subject') or merge.label})"
        if bs.status is Status.CULPRIT:
            bs.message = f"brought in by {where}"
            return bs
        st.message = (f"{st.message + '; ' if st.message else ''}its branch alone does not name a culprit "
                      f"({bs.status.value}: {bs.message or 'see the merged branch stage'})")
        return None


__all__ = ["MergeStage"]
