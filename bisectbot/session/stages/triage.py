"""Triage: which ``recipe.triage`` toggles (env vars, server args) make the problem disappear."""

from __future__ import annotations

from ...models import Candidate, Verdict
from ...provenance import cached_from, measured_text
from ...recipe import Recipe
from ..probing.executor import Echo
from ..probing.prober import Prober


class Triage:
    """The toggles of ``recipe.triage`` tried on the first-bad candidate, probed through ``prober``;
    ``echo`` receives one line per toggle."""

    def __init__(self, prober: Prober, recipe: Recipe, *, echo: Echo):
        self.prober = prober
        self.recipe = recipe
        self.echo = echo

    def run(self, c: Candidate) -> dict[str, str]:
        """Try each ``recipe.triage`` toggle on the first-bad candidate; ``{name: verdict}``.

        The toggles are one round: probed at once on ``recipe.bisect.parallel`` slots (one
        after the other with one slot), through the session's executor when it has one."""
        toggles = list(self.recipe.triage)
        if not toggles:
            return {}
        with self.prober.executor_for(prefetch=False) as executor:
            results = self.prober.probe_batch([(c, 1, t) for t in toggles], executor)
        out: dict[str, str] = {}
        for t, (res, origin) in zip(toggles, results):
            gone = res.verdict is Verdict.GOOD
            out[t.name] = res.verdict.value + (" (problem disappears)" if gone else
                                               f" ({res.reason})" if res.verdict is Verdict.SKIP and res.reason else "")
            if cached_from(res) is not None:  # issue 23: not run now
                out[t.name] += f"; {measured_text(res, self.prober.session_id)}"
            self.prober.log("triage", {"toggle": t.name, "verdict": res.verdict.value,
                                       "reason": res.reason, "origin": origin})
            self.echo(f"triage {t.name} on {c.label or c.ref}: {out[t.name]}; {res.reason}")
        return out
