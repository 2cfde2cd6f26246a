"""Triage: which ``recipe.triage`` toggles (env vars, server args) make the problem disappear."""

from __future__ import annotations

from ..models import Candidate, Verdict


class Triage:
    """Mixin of :class:`bisectbot.session.Session`: the toggles tried on the first-bad candidate."""

    def triage(self, c: Candidate) -> dict[str, str]:
        """Try each ``recipe.triage`` toggle on the first-bad candidate; ``{name: verdict}``."""
        out: dict[str, str] = {}
        for t in self.recipe.triage:
            res, origin = self.probe(c, 1, toggle=t)
            gone = res.verdict is Verdict.GOOD
            out[t.name] = res.verdict.value + (" (problem disappears)" if gone else "")
            self.ledger.log_event(self.session_id, "triage", {"toggle": t.name, "verdict": res.verdict.value,
                                                              "reason": res.reason, "origin": origin})
            self.echo(f"triage {t.name} on {c.label or c.ref}: {out[t.name]}; {res.reason}")
        return out
