"""Stage 1 of a run: bisect the recipe's source (git range, nightlies, releases), then hand over.

:meth:`Stage1.run` resolves the good/bad ends, bisects stage 1 in rounds, runs triage on
the first bad, continues with the component-commit stage when the ends name their
component commits (or are nightly images with known components), and finishes the result.
"""

from __future__ import annotations

from contextlib import ExitStack

from ..errors import BadInput
from ..models import RunResult, Status
from .components import parse_pins
from .oracles import oracle_notes, reference_up
from .result import finish_result, new_result
from .sources import CandidateSource, make_source, resolve_ends


class Stage1:
    """Mixin of :class:`bisectbot.session.Session`: the whole run, starting with stage 1."""

    def run(self, good: str | None = None, bad: str | None = None,
            source: CandidateSource | None = None) -> RunResult:
        """Stage 1 over the recipe's source (plus the component stage when possible), triage, result.
        A recipe's reference (issue 18) is up from the start of stage 1 to the end of the run."""
        with ExitStack() as stack:
            self._oracle_stack = stack
            return self._run(good, bad, source)

    def _run(self, good: str | None, bad: str | None, source: CandidateSource | None) -> RunResult:
        r = self.recipe
        good = good or r.bisect.good
        bad = bad or r.bisect.bad
        if (not good or not bad) and r.source.kind != "git":
            source = source or make_source(r, self.base_dir, self.ledger)
            good, bad = resolve_ends(r, good, bad, source)
        if not good or not bad:
            raise BadInput("a bisection needs a good and a bad end: --good/--bad or bisect.good/bisect.bad "
                           "in the recipe")
        result = new_result(r)
        if "=" in good or "=" in bad:
            old, new = parse_pins(good), parse_pins(bad)
            result.stages = self.components(old, new)
        else:
            source = source or make_source(r, self.base_dir, self.ledger)
            cands = source.candidates(good, bad)
            self._oracle_stack.enter_context(reference_up(self, cands[0], source))  # issue 18
            st = self.search("stage 1", cands, source.component, source.flags)
            result.stages.append(st)
            self.drift_finding(st, getattr(self, "last_bisection", None), result)
            branch = self.descend_merge(st, source)
            if branch is not None:  # the culprit merge's branch commit (issue 12)
                result.stages.append(branch)
                st = branch
            lg, fb = st.last_good, st.first_bad
            if r.triage and fb is not None and st.status in (Status.CULPRIT, Status.RANGE):
                # before any commit bisection (issue 6): which toggles make the problem disappear
                result.triage = self.triage(fb)
            if st.status is Status.CULPRIT and r.bisect.second_stage and lg and fb:
                if lg.meta.get("commits") and fb.meta.get("commits"):
                    result.stages += self.components(dict(lg.meta["commits"]), dict(fb.meta["commits"]),
                                                     stage1_done=True)
                elif lg.meta.get("image") and fb.meta.get("image") and r.bisect.components:
                    result.stages += self.image_components(lg, fb, result)
        final = result.final
        assert final is not None
        if (r.triage and not result.triage and final.first_bad is not None
                and final.status in (Status.CULPRIT, Status.RANGE)):  # component-pair runs
            result.triage = self.triage(final.first_bad)
        result = finish_result(result, r, recipe_path=self.recipe_path, session_id=self.session_id,
                               all_cached=self.fresh_probes == 0 and not self.replayed)
        result.notes[:0] = oracle_notes(r, final, getattr(self, "oracle", None))  # decode path, noise (issue 18)
        return result

