"""Warn during a run of a required patch that applies to none of the probed candidates (issue 25, input 8).

A required patch whose target file is missing from every candidate, or whose ``when`` condition
holds on none, leaves each probe ``not-applicable`` for it: every verdict is then measured without
the patch the recipe said it needs. The report's patch table showed it after the run; the person
watching the run must see it while the run goes, when it becomes likely (both ends of the range
probed without it) and, definitively, when the stage ends.

:class:`RequiredPatchWatch` is fed each probe's ``ProbeResult.patches`` (the
:meth:`bisectbot.patches.PatchStatus.to_dict` records) and returns the warning lines to print.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

APPLIED_STATES = frozenset({"applies", "applies-with-offset", "applies-with-fuzz", "already-upstream"})
"""Patch states (:class:`bisectbot.patches.State` values) under which the candidate ran with the fix."""

EARLY_AFTER = 2
"""Probes without the patch (and none with it) before the first warning: the two ends of a range."""


@dataclass
class RequiredPatchWatch:
    """What each required patch did on the probed candidates of one stage.

    ``stage`` names the stage in the lines. :meth:`see` returns the early warning (once per patch),
    :meth:`finish` the definitive one for each required patch that applied to no probed candidate.
    """

    stage: str = ""
    applied: set[str] = field(default_factory=set)
    missed: dict[str, list[str]] = field(default_factory=dict)  # patch id -> "label: state (detail)"
    warned: set[str] = field(default_factory=set)

    def see(self, label: str, patches: Iterable[dict[str, Any]]) -> list[str]:
        """Record one probe's patch records (candidate ``label``); the lines to print now."""
        out = []
        for rec in patches:
            if not rec.get("required"):
                continue
            pid = str(rec.get("id") or "?")
            if str(rec.get("state") or "") in APPLIED_STATES:
                self.applied.add(pid)
                continue
            if pid in self.applied:
                continue
            seen = self.missed.setdefault(pid, [])
            if len(seen) < 64:
                seen.append(f"{label}: {rec.get('state') or '?'}" + (f" ({rec['detail']})" if rec.get("detail") else ""))
            if len(seen) >= EARLY_AFTER and pid not in self.warned:
                self.warned.add(pid)
                out.append(f"warning: required patch {pid} applied to none of the {len(seen)} candidates"
                           f"{self._where()} probed so far ({'; '.join(seen[:2])}): their verdicts are measured without it")
        return out

    def finish(self, probed: int) -> list[str]:
        """The definitive lines at the end of the stage (``probed``: distinct candidates it probed)."""
        return [f"warning: required patch {pid} applied to none of the {probed} probed candidates{self._where()} "
                f"({seen[0]}): every verdict is measured without it; check the patch's path and `when` against "
                f"this range (`bisectbot patches check`)"
                for pid, seen in self.missed.items() if pid not in self.applied and seen]

    def _where(self) -> str:
        return f" of {self.stage}" if self.stage else ""


__all__ = ["APPLIED_STATES", "RequiredPatchWatch"]
