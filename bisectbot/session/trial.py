"""A try job (issue 42): probe one candidate with and without a change, and answer fixed / partly /
still broken (:mod:`bisectbot.verdict.trial`).

The candidate is the first bad of the recipe's last bisection in this ledger (its stage-1 culprit),
else -- for nightlies -- the newest nightly, else the ``--on`` ref named. Both probes go through the
session's :class:`~bisectbot.session.probing.prober.Prober`: the same reproducer, the same cold
prefills, the probe cache and the ledger (the unchanged candidate is answered from the bisection's
own probe when this host measured it); the changed one asks the unchanged one's failing prompts
first (its scope), as a bisection's candidates ask their bad end's. The try is a ledger session of
its own (stage ``try``): its status is the answer, its state the change, both thresholds and the
prompt table, which the dashboard shows.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..change import Change
from ..errors import BadInput
from ..ledger import Ledger
from ..models import Candidate, ProbeResult, Status, Verdict
from ..provenance import cached_from
from ..recipe import Recipe
from ..run.base import CandidateRunner
from ..verdict.agreement import agreeing
from ..verdict.scope import learn
from ..verdict.trial import FIXED, PARTLY, UNTESTED, TryVerdict, decide_try, failing_prompts
from .probing.executor import Echo, build_key
from .probing.oracles import reference_up
from .probing.prober import Prober
from .sources import CandidateSource, make_source

__all__ = ["TryOutcome", "last_first_bad", "resolve_on", "run_try", "with_change"]


@dataclass
class TryOutcome:
    """A finished try job: the ``candidate`` tried, the ``change``, both probes (``before`` without
    the change, ``after`` with it), the ``verdict`` and the ledger ``session_id``; ``on_from``: why this
    candidate (``--on``, the last bisection's first bad, the newest nightly)."""

    candidate: Candidate
    change: Change
    before: ProbeResult
    after: ProbeResult
    verdict: TryVerdict
    session_id: str
    on_from: str

    def to_dict(self) -> dict[str, Any]:
        """``try.json``: what was tried where, both probes (verdict, reason, threshold, table) and the answer."""
        def probe(p: ProbeResult) -> dict[str, Any]:
            return {"verdict": p.verdict.value, "reason": p.reason, "threshold": list(p.threshold) if p.threshold
                    else None, "table": [t.to_dict() if hasattr(t, "to_dict") else t for t in p.table or []],
                    "duration_s": round(p.duration_s, 1), "cached_from": cached_from(p)}
        return {"kind": "try", "candidate": {"ref": self.candidate.ref, "label": self.candidate.label,
                                             "component": self.candidate.component},
                "on_from": self.on_from, "session": self.session_id,
                "change": {"source": self.change.source, "sha256": self.change.sha256, "files": self.change.files(),
                           "component": self.change.component, "fuzz": self.change.fuzz},
                "answer": self.verdict.answer, "words": self.verdict.words, "prompts": list(self.verdict.prompts),
                "before": probe(self.before), "after": probe(self.after)}


def last_first_bad(ledger: Ledger, recipe: Recipe) -> str | None:
    """The ref of the first bad of this recipe's newest stage-1 session that named a culprit (None)."""
    for s in reversed(ledger.sessions(recipe.name)):
        st = s.get("state") or {}
        if s.get("status") == Status.CULPRIT.value and st.get("stage") == "stage 1" and st.get("culprits"):
            return str(st["culprits"][0])
    return None


def resolve_on(recipe: Recipe, ledger: Ledger, source: CandidateSource, on: str | None) -> tuple[Candidate, str]:
    """``(candidate, why)``: ``on`` (a commit of a git source, a nightly tag or digest) resolved through
    the recipe's source; without it the last bisection's first bad, else the newest nightly.
    Raises :class:`BadInput` when nothing names a candidate or the ref is unknown."""
    why = "--on"
    if on is None:
        on, why = last_first_bad(ledger, recipe), "the first bad of the last bisection in this ledger"
    if on is None and hasattr(source, "default_ends"):
        on, why = source.default_ends()[1], "the newest nightly"
    if not on:
        raise BadInput("try: no candidate to try the change on: give --on REF (no bisection of this recipe "
                       "in this ledger named a first bad)")
    one = getattr(source, "candidate", None)
    if not callable(one):
        raise BadInput(f"try: the recipe's source ({recipe.source.kind}) cannot name one candidate")
    return one(on), why


def _from_bisection(prober: Prober, recipe: Recipe, source: CandidateSource, cand: Candidate) -> ProbeResult | None:
    """The probe a bisection of this ledger made of ``cand`` (its first bad, or any candidate it probed),
    or None. A bisection asked its candidates their bad end's failing prompts first, which is part of
    their probe keys: the newest session whose candidates hold ``cand`` gives its bad end, whose own
    probe gives those prompts, and the key is looked up with them (the ledger's rules hold: a row of
    another host, a contradicted row, is no answer). Nothing is probed here."""
    for s in reversed(prober.ledger.sessions(recipe.name)):
        st = s.get("state") or {}
        if st.get("stage") == "try" or cand.ref not in (st.get("candidates") or []) or not s.get("bad"):
            continue
        one = getattr(source, "candidate", None)
        try:
            bad = one(str(s["bad"])) if callable(one) else None
        except BadInput:
            return None
        if bad is None:
            return None
        prober.focus = ()
        end, _o, _k = prober.lookup(bad, 1)
        scope = learn(recipe, end, bad.label) if end is not None else None
        prober.focus = scope.sizes if scope is not None else ()
        try:
            got, _o, _k = prober.lookup(cand, 1)
        finally:
            prober.focus = ()
        return got if got is not None and cached_from(got) is not None else None
    return None


def with_change(c: Candidate, change: Change) -> Candidate:
    """``c`` carrying ``change`` (``meta["change"]``); its label says so, so the two are never equal."""
    return dataclasses.replace(c, label=f"{c.label or c.ref[:12]} + {change.source}",
                               meta={**c.meta, "change": change.to_meta()})


def _probe_change(prober: Prober, recipe: Recipe, executor: Any, changed: Candidate, before: ProbeResult,
                  scope: Any, say: Echo) -> tuple[ProbeResult, TryVerdict]:
    """The candidate with the change probed, asked first every prompt on which ``before`` failed, and the
    answer: fixed or partly from one start only when that start holds two agreeing measurements
    (:func:`bisectbot.verdict.agreement.agreeing`), else from two starts that agree (issue 40's
    standard); two that disagree are untested."""
    label = before.candidate.label or before.candidate.ref[:12]
    every = tuple(failing_prompts(recipe, before))
    if every:
        say(f"try: the change is asked first every prompt on which {label} failed ({len(every)}): "
            + "; ".join(k.text() for k in every[:6]) + (" ..." if len(every) > 6 else ""))
    first: TryVerdict | None = None
    for attempt in (1, 2):
        prober.focus = every
        try:
            ((after, origin),) = prober.probe_batch([(changed, attempt)], executor)
        finally:
            prober.focus = ()
        if scope is not None:
            after = scope.judge(after)
        say(f"try: {label} with the change (start {attempt}): {after.verdict.value}; {after.reason[:300]}"
            + ("" if origin == "probe" else f" ({origin})"))
        got = decide_try(recipe, before, after)
        if first is not None:  # the second start must give the same answer
            if got.answer != first.answer:
                return after, TryVerdict(UNTESTED, f"could not be decided: two starts with the change disagree: "
                                         f"{first.words}; then {got.words} (a flaky candidate: declare its flake "
                                         "rates in bisect.flake, or try again)", first.before, None, first.prompts)
            first.words += f" (the same answer in a second start: {got.answer})"
            return after, first
        if got.answer not in (FIXED, PARTLY):
            return after, got
        held = agreeing(recipe, after, scope, this_run=True)
        if held.count >= 2:
            got.words += f" (verified in its start: {held.what})"
            return after, got
        first = got
        say(f"try: {got.answer} in one start: a start-level flake can fake an OK, so the change is started once more")
    raise AssertionError("unreachable: the second start returns")  # pragma: no cover


def run_try(recipe: Recipe, ledger: Ledger, runner: CandidateRunner, change: Change, *, on: str | None = None,
            echo: Echo | None = None, base_dir: Path | None = None,
            resolved: tuple[CandidateSource, Candidate, str] | None = None) -> TryOutcome:
    """Probe the candidate ``on`` names (see :func:`resolve_on`) without and with ``change``, and
    decide; ``resolved``: the recipe's source, the candidate and why, when the caller resolved them
    already (a ``--ref`` change is taken against the candidate). Raises :class:`BadInput` for a regress
    mode a try cannot answer (``slower``: a measured verdict needs two ends; a fix bisection) and for a
    runner that cannot apply a change."""
    say: Echo = echo or (lambda s: None)
    if recipe.regress.mode == "slower":
        raise BadInput("try: regress: slower is not supported yet (a measured verdict needs a good end to compare "
                       "with); try the change with `bisectbot run` on a history that has it")
    if recipe.regress.is_fix:
        raise BadInput("try: a fix bisection's recipe (regress: success) asks when a problem went away; a try "
                       "job asks whether a change removes it: use a regression recipe")
    if not getattr(runner, "supports_change", False):
        raise BadInput(f"try: {type(runner).__name__} cannot apply a change (releases and prebuilt wheels are "
                       "installed as published): use a git source or nightly images")
    if resolved is None:
        source = make_source(recipe, base_dir, ledger)
        cand, why = resolve_on(recipe, ledger, source, on)
    else:
        source, cand, why = resolved
    changed = with_change(cand, change)
    prober = Prober(recipe, ledger, runner, echo=say)
    # the session is the change on this candidate as this runner builds it (another runner: another session)
    built = hashlib.sha256(build_key(runner, changed).encode()).hexdigest()[:16]
    prober.start("try", cand.ref, f"{cand.ref}+change:{change.sha256[:16]}+build:{built}")
    prober.prior_events()
    label = cand.label or cand.ref[:12]
    say(f"try: {change.source} on {label} ({why}); {len(change.files())} file(s): "
        f"{', '.join(change.files()[:6])}{' ...' if len(change.files()) > 6 else ''}")
    prober.save_session(cand.ref, changed.ref, "running", {"stage": "try", "change": change.source})
    with reference_up(prober, cand, source), prober.executor_for(prefetch=False) as executor:
        known = _from_bisection(prober, recipe, source, cand)
        if known is not None:
            before, o1 = known, "cache"
        else:
            ((before, o1),) = prober.probe_batch([(cand, 1)], executor)
        say(f"try: {label} without the change: {before.verdict.value}; {before.reason[:300]}"
            + ("" if o1 == "probe" else f" ({o1})"))
        scope = learn(recipe, before, label)
        if before.verdict is Verdict.BAD:
            after, verdict = _probe_change(prober, recipe, executor, changed, before, scope, say)
        else:  # nothing to compare with: the change is not probed
            after = ProbeResult(changed, Verdict.SKIP, reason="not probed: the candidate is not bad without the change")
            verdict = decide_try(recipe, before, after)
    out = TryOutcome(cand, change, before, after, verdict, prober.session_id, why)
    prober.log("try", {"answer": verdict.answer, "words": verdict.words})
    state = out.to_dict()
    for k in ("before", "after"):  # the tables stay in the probes' rows; the session keeps the comparison
        state[k] = {kk: vv for kk, vv in state[k].items() if kk != "table"}
    prober.save_session(cand.ref, changed.ref, verdict.answer, {"stage": "try", **state})
    say(f"try: {verdict.words}")
    return out
