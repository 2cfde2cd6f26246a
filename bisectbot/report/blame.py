"""Whether a report may blame its culprit: :func:`blame_decision` over the run's final stage.

The rule itself is :func:`bisectbot.bisect.may_blame` (the exit code follows it too); this
module turns it into the :class:`Blame` every rendering reads. Below
:data:`DEFAULT_BLAME_CONFIDENCE` (or the recipe's ``bisect.blame_confidence``) an issue names a
range, not a culprit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import RunResult, Status

DEFAULT_BLAME_CONFIDENCE = 0.66
"""Below this confidence the issue names a range, not a culprit (issue 6; recipe ``bisect.blame_confidence``)."""


@dataclass
class Blame:
    """Whether the report may name a culprit, and why not."""

    ok: bool
    reason: str = ""


def blame_decision(result: RunResult, blame_confidence: float = DEFAULT_BLAME_CONFIDENCE) -> Blame:
    """Refuse to blame on a range, a flagged culprit or a confidence below ``blame_confidence``."""
    from ..bisect import confidence_text, may_blame  # the one blame rule (the exit code follows it too)

    final = result.final
    if final is None or not final.culprits:
        return Blame(False, f"no culprit (status {result.status.value})")
    if final.status is Status.INCONCLUSIVE:  # the culprits are the search's best guess, not an answer
        return Blame(False, f"status inconclusive: the search ended on a best guess of {len(final.culprits)} "
                            f"candidate(s) with probability {confidence_text(final.confidence)}, "
                            "below what it needs to name a culprit")
    if result.status != Status.CULPRIT or final.status != Status.CULPRIT or len(final.culprits) != 1:
        return Blame(False, f"status {final.status.value}: {len(final.culprits)} candidates remain")
    ok, why = may_blame(final.status, final.confidence, final.flags, blame_confidence)
    return Blame(True) if ok else Blame(False, why)
