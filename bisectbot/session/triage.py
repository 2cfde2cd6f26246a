"""Triage: which ``recipe.triage`` toggles (env vars, server args) make the problem disappear."""

from __future__ import annotations

from ..models import Candidate, Verdict
from .executor import LocalExecutor


class Triage:
    """Mixin of :class:`bisectbot.session.Session`: the toggles tried on the first-bad candidate."""

    def triage(self, c: Candidate) -> dict[str, str]:
        """Try each ``recipe.triage`` toggle on the first-bad candidate; ``{name: verdict}``.

        The toggles are one round: probed at once on ``recipe.bisect.parallel`` slots (one
        after the other with one slot), through the session's executor when it has one."""
        toggles = list(self.recipe.triage)
        if not toggles:
            return {}
        executor = self.executor or LocalExecutor(self.recipe, self.runner, self.recipe.bisect.parallel,
                                                  prefetch=False, oracle=getattr(self, "oracle", None))
        try:
            results = self.probe_batch([(c, 1, t) for t in toggles], executor)
        finally:
            if executor is not self.executor:
                executor.close()
        out: dict[str, str] = {}
        for t, (res, origin) in zip(toggles, results):
            gone = res.verdict is Verdict.GOOD
            out[t.name] = res.verdict.value + (" (problem disappears)" if gone else
                                               f" ({res.reason})" if res.verdict is Verdict.SKIP and res.reason else "")
            self.ledger.log_event(self.session_id, "triage", {"toggle": t.name, "verdict": res.verdict.value,
                                                              "reason": res.reason, "origin": origin})
            self.echo(f"triage {t.name} on {c.label or c.ref}: {out[t.name]}; {res.reason}")
        return out
