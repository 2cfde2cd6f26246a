"""The round loop of one stage: plan a batch of probes -> run it through an executor -> feed verdicts back.

Each round asks :meth:`bisectbot.bisect.Bisection.next_probes` for as many probes as the
executor has slots (``recipe.bisect.parallel``); verdicts known without probing (replay,
maintainers, the probe cache) are fed at once, the others run through a
:class:`bisectbot.session.probing.executor.Executor` and are stored in the ledger as each
finishes, so an interrupted run resumes without repeating a finished probe.

:class:`RoundLoop` is handed to every stage that searches (stage 1, the component commits,
the merged branch, the drift search): each calls :meth:`RoundLoop.search` with its
candidates and gets a :class:`bisectbot.models.StageResult` back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from ...bisect import Bisection, budget_text, search_settings
from ...errors import MissingPin
from ...models import Candidate, ProbeResult, StageResult, Status, Verdict
from ...patch_watch import RequiredPatchWatch
from ...provenance import cached_from, measured_text
from ...recipe import Recipe
from ...reproduce.search import counted_by
from ...verdict.agreement import (
    MIXED_BUILDS_FLAG,
    Agreement,
    agreeing,
    expected_reprobes,
    mixed,
    mixed_builds,
)
from ...verdict.badend import clean, sequential_end, sequential_good_end, shows_bug
from ...verdict.honesty import adapt_rates, check_runnable, derived_rates_note
from ...verdict.measured import measured_words
from ...verdict.scope import Scope, learn
from ..probing.executor import Echo
from ..probing.prefetch import next_candidates
from ..probing.prober import Prober
from ..replay import REPLAY_MEASUREMENTS

log = logging.getLogger(__name__)


def _fmt_thr(res: ProbeResult) -> str:
    """``, threshold 251..1021 tokens measured (usage.prompt_tokens)``: a threshold's ends are the
    measured sizes of requested prompts (issue 23: requested and measured are told apart)."""
    thr = res.threshold
    if not thr or thr == (None, None):
        return ""
    lo, hi = thr
    return (f", threshold {lo if lo is not None else '-'}..{hi if hi is not None else '-'} tokens"
            f" {measured_label(res.table)}")


def measured_label(table: list[dict[str, Any]]) -> str:
    """``measured (usage.prompt_tokens)``: how a probe's decided sizes (OK/GARBAGE rows of ``table``)
    were counted; ``requested`` when none was measured (a command reproducer's ``{size}``)."""
    how = _counted_by(table)
    if not how or how == ["requested"]:
        return "(requested)" if how else "measured"
    return f"measured ({', '.join(h for h in how if h != 'requested')})"


def _counted_by(table: list[dict[str, Any]]) -> list[str]:
    """How the decided sizes of ``table`` were counted (``usage.prompt_tokens``, ``/tokenize``, ``requested``)."""
    return sorted({counted_by(r) for r in table if isinstance(r, dict) and r.get("outcome") in ("OK", "GARBAGE")})


def phase_of(b: Bisection, i: int) -> str:
    """What probing candidate index ``i`` is for right now: ``boundary``, ``verify`` or ``search``."""
    return "boundary" if i in b._ends_left else "verify" if i in b._verify_targets else "search"


def unfocused_skip(res: ProbeResult) -> bool:
    """True when ``res`` is a skip from its threshold search (its table has rows: the server ran
    and answered some sizes) rather than from a build or a start, and not the scope rule's skip:
    asked first at the bad end's failing sizes, the candidate may answer (issue 23, input 2)."""
    return res.verdict is Verdict.SKIP and bool(res.table) and "scope" not in res.extra


def feed_order(b: Bisection, done: list[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Yield a round's ``((index, attempt), result)`` pairs in the order to feed them: as
    planned, except that a probe of a current verification target waits until the other
    probes are fed (verification re-probes folded into the last search round,
    :meth:`Bisection.next_probes`, must not end the search before the rest is evidence)."""
    pending = list(done)
    while pending:
        pick = next((x for x in pending if x[0][0] not in b._verify_targets), pending[0])
        pending.remove(pick)
        yield pick


def scope_line(scope: Scope, end: ProbeResult) -> str:
    """The ``scope:`` progress line (issue 35): the prompts on which the bad end failed, which every
    candidate is asked first and compared on (the same text; each probe measures its own tokens)."""
    how = [h for h in _counted_by(end.table) if h != "requested"]
    what = f"measured on the bad end, {', '.join(how)}" if how else "the bad end's requested size"
    return (f"scope: candidates are compared on the prompts on which the bad end fails from {scope.failing_size} "
            f"tokens ({what}): {'; '.join(k.text() for k in scope.failing)}; asked first, the same text on every "
            "candidate (each probe measures its own tokens)")


class RoundLoop:
    """Bisect one ordered candidate list in rounds: plan with :class:`Bisection`, probe through
    ``prober`` (cache, executor, ledger), feed the verdicts back.

    ``echo`` receives progress lines; ``prefetch``: a local executor with one slot prepares
    the candidates that can come next; ``recipe_path`` names the recipe in messages.
    ``log_resume`` False: a resumed session logs no ``resume`` event (replays of a round
    plan or import). ``last_bisection`` is the search of the last stage (for the drift
    search that follows stage 1).
    """

    def __init__(self, prober: Prober, recipe: Recipe, *, echo: Echo, prefetch: bool = True,
                 recipe_path: str = ""):
        self.prober = prober
        self.recipe = recipe
        self.echo = echo
        self.prefetch_enabled = prefetch
        self.recipe_path = recipe_path
        self.log_resume = True
        self.last_bisection: Bisection | None = None
        #: what the known-failing end's sequential test found in the current search (issue 23)
        self.end_notes: list[str] = []
        self._mixed = ""  # issue 40: why one probe's requests are no verification in this search ("" while none)
        #: issue 40: the measurements of this run (probe cache keys) that read bad, per build; a build seen
        #: bad in two of its own starts shows that the bug does not hide from a start (verdict.agreement)
        self._bad_starts: dict[str, set[str]] = {}
        self.t0 = time.monotonic()
        from ...progress import Eta

        self.eta = Eta()  # measured fresh probe times: the ETA after the first (issue 24, input 7)
        self.lines: list[str] = []

    def search(self, name: str, candidates: list[Candidate], component: str,
               flags_fn: Callable[[Candidate, Candidate], list[str]] | None = None,
               check_boundary: bool = True,
               verdict_fn: Callable[[ProbeResult], ProbeResult] | None = None, *,
               verify: bool | None = None, measured: dict[int, ProbeResult] | None = None) -> StageResult:
        """Bisect one ordered candidate list (index 0 good end, last bad end); returns the stage.

        ``verify`` overrides ``bisect.verify`` for this search (stage 1 leaves its verification to
        the commit stage after it, :mod:`bisectbot.session.stages.settle`); ``measured`` maps candidate
        indices to probes of the same build measured earlier in this run
        (:meth:`bisectbot.bisect.Bisection.measured_before`: not re-probed to verify when they agree).

        ``verdict_fn`` re-judges each probe result (cached or fresh) for a second question
        over the same measurements (the drift search); the ledger keeps the original.

        Scope (issue 23, :mod:`bisectbot.verdict.scope`): once the bad end is bad, a good
        verdict measured only below its failing size is used as skip, and the next probes ask
        the bad end's failing sizes first (``prober.focus``)."""
        r = self.recipe
        bs = r.bisect
        settings = search_settings(bs, len(candidates))
        if verify is not None:
            settings["verify"] = verify
        noisy = settings["false_positive"] > 0 or settings["false_negative"] > 0
        good, bad = candidates[0], candidates[-1]
        prober = self.prober
        session_id = prober.start(name, good.ref, bad.ref)
        if r.regress.mode == "slower":  # issue 39: every probe of this search is judged against these ends
            from ...verdict.measured import Baseline

            prober.baseline = Baseline(good.ref, bad.ref)
        cleanup = getattr(prober.runner, "cleanup_stale", None)
        if callable(cleanup) and prober.oracle is None:
            cleanup()  # worktrees a killed run left behind (with a reference up: done before it started)
        prior = prober.prior_events()
        done_before = sum(1 for e in prior if e["kind"] == "probe")
        before = prober.ledger.get_session(session_id) if prior else None
        finished = before is not None and before.get("status") not in (None, "", "running")
        prober.save_session(good.ref, bad.ref, "running",
                            {"stage": name, "component": component, "n": len(candidates),
                             "candidates": [c.ref for c in candidates]})
        if prior:
            if self.log_resume:
                prober.log("resume", {"cached": done_before})
            # a finished session run again is no resumption (issue 25, input 8): its verdicts are cached
            self.echo(f"session {session_id} finished before ({before['status']}): its {done_before} probes come "
                      "from the ledger" if finished and before else
                      f"resuming session {session_id}: {done_before} probes already done")
        else:
            prober.log("start", {
                "stage": name, "component": component, "n": len(candidates), "good": good.ref, "bad": bad.ref,
                "noisy": noisy})
        b = Bisection(len(candidates), check_boundary=check_boundary, **settings)
        b.in_probe_verification = bs.flake_unit == "request"
        b.expected_reprobes = expected_reprobes(r)
        self.last_bisection = b  # for the stages that follow (drift search)
        for i, res in (measured or {}).items():
            b.measured_before(i, res.verdict)
            self.echo(f"{candidates[i].label or candidates[i].ref[:12]}: its build was measured {res.verdict.value} "
                      f"earlier in this run as {res.candidate.label or res.candidate.ref[:12]}; a second agreeing "
                      "measurement here verifies it without a re-probe")
        derived = derived_rates_note(r) if b.exact else None
        self.echo(f"{name}: {len(candidates)} candidates ({component}), good {good.label or good.ref}, "
                  f"bad {bad.label or bad.ref}; ~{b.steps_left()} probes"
                  + (f" if it stays exact; {derived}" if derived else f", {budget_text(b)}")
                  + measured_words(r))
        probes: list[ProbeResult] = []
        attempts: dict[int, int] = {}
        scope: Scope | None = None
        prober.focus = ()
        self.end_notes = []
        self._mixed = ""  # issue 40: a probe answered the bad end's failing prompts both ways (said once)
        watch = RequiredPatchWatch(name)  # a required patch that applies nowhere is said now (issue 25)
        try:
            with prober.executor_for(self.prefetch_enabled) as executor:
                self._rounds(b, candidates, prober, executor, attempts, probes, verdict_fn, scope, watch)
        finally:
            prober.focus = ()
        for line in watch.finish(len({p.candidate.ref for p in probes})):
            self.echo(line)
        self._prefetch_report(name, executor)
        return self._stage_result(name, component, candidates, b, probes, flags_fn)

    def _rounds(self, b: Bisection, candidates: list[Candidate], prober: Prober, executor: Any,
                attempts: dict[int, int], probes: list[ProbeResult],
                verdict_fn: Callable[[ProbeResult], ProbeResult] | None, scope: Scope | None,
                watch: RequiredPatchWatch) -> None:
        """The rounds of :meth:`search` until the search is done (``watch`` sees each probe's patches)."""
        r = self.recipe
        good = candidates[0]
        while not b.done:
            # measured ends one at a time: the second end is judged against the first one's samples
            batch = b.next_probes(1 if r.regress.mode == "slower" and b.ends_pending else executor.slots)
            if not batch:
                break
            if getattr(executor, "has_prefetch", False) and len(batch) == 1:
                nxt = next_candidates(b, batch[0])  # what the next step can need, likely first
                executor.prefetch([candidates[i] for i in batch + nxt],
                                  [candidates[j] for j in nxt if prober.needs_probe(candidates[j], attempts, j)])
            asked = prober.focus  # the sizes this round's probes ask first
            jobs = []
            for i in batch:
                attempts[i] = attempts.get(i, 0) + 1
                jobs.append((i, attempts[i]))
            results = prober.probe_batch([(candidates[i], a) for i, a in jobs], executor)
            if verdict_fn is not None:
                results = [(verdict_fn(res), origin) for res, origin in results]
            for (i, a), (res, origin) in feed_order(b, list(zip(jobs, results))):
                if scope is not None and verdict_fn is None:
                    if asked != prober.focus and (unfocused_skip(res) or (
                            res.verdict is Verdict.GOOD and not scope.asked(res))):
                        res, origin = self._refocus(candidates[i], a, res, executor)
                    res = scope.judge(res)  # issue 23: compared only where the bad end failed
                if i == len(candidates) - 1 and phase_of(b, i) == "boundary":
                    # a command that cannot run is checked on the good end (git bisect run, 2.36)
                    check_runnable(r, res, good, lambda c: prober.probe(c, 1)[0], self.recipe_path)
                end_note = ""
                if (phase_of(b, i) == "boundary" and res.verdict is Verdict.SKIP
                        and res.reason.startswith(MissingPin.prefix)):
                    # issue 35, item 5: an end that pins a ref its component lacks is bad input, never
                    # "the bad end is not bad" (its component would run at another commit)
                    which = "good" if i == 0 else "bad"
                    raise MissingPin(f"the {which} end {candidates[i].label or candidates[i].ref[:12]}: "
                                     f"{res.reason.removeprefix(MissingPin.prefix)}")
                if (phase_of(b, i) == "boundary" and res.verdict is Verdict.SKIP and verdict_fn is None
                        and "scope" not in res.extra):
                    if origin == "cache" and not prober.retry_errors and not prober.answered_here(res):
                        # issue 23, input 3: a cached skip at an end is probed once more before the end is
                        # untestable (a round session replays itself each round: a skip it recorded is
                        # its own probe, not a cached one -- once, never again)
                        res, origin = prober.probe_fresh(candidates[i], a, executor), "probe"
                    if res.verdict is Verdict.SKIP:
                        end_note = (f"{res.reason[:300]}; if that failure passes on its own, "
                                    "`bisectbot run --retry-errors` probes cached skips again")
                failing_end = 0 if r.regress.is_fix else len(candidates) - 1
                if (i == failing_end and phase_of(b, i) == "boundary" and verdict_fn is None and clean(r, res)
                        and not b.done):
                    # issue 23, input 8: the known-failing end is probed until its "clean" is believable
                    res, a, note = sequential_end(
                        r, candidates[i], res, a,
                        lambda att, i=i: self._end_reprobe(b, candidates, i, att, attempts, probes, executor),
                        self.echo)
                    if note:
                        self.end_notes.append(note)
                elif (i == 0 and not r.regress.is_fix and phase_of(b, i) == "boundary" and verdict_fn is None
                        and shows_bug(r, res) and not b.done):
                    # issue 35, input 4: a minority of failing runs at the good end is probed further
                    res, a, note = sequential_good_end(
                        r, candidates[i], res, a, b.runs_seen.get(len(candidates) - 1, (0, 0)),
                        lambda att, i=i: self._end_reprobe(b, candidates, i, att, attempts, probes, executor),
                        self.echo)
                    if note:
                        self.end_notes.append(note)
                phase = phase_of(b, i)
                probes.append(res)
                if b.done:  # a folded re-probe the outcome did not need: evidence, not fed
                    eff, note, phase = res.verdict, "not used: the search had ended", "extra"
                else:
                    scoped_out = res.reason.split(": not tested", 1)[0] if "scope" in res.extra else ""
                    counted = (int(res.extra.get("hits") or 0), int(res.extra.get("runs") or 0))
                    # issue 40: agreeing requests of one probe verify its role where a request is a flake's unit
                    why = mixed(res, scope) if b.exact and r.bisect.verify and not self._mixed else ""
                    if why:  # the answer is a request-level draw: one probe's agreement proves nothing
                        self._mixed = why
                        b.single_measurements()
                        self.echo(f"{why}: one probe's requests are no verification in this run; each role is "
                                  "re-probed")
                    if not (b.exact and r.bisect.verify) or self._mixed:
                        agree = Agreement()
                    elif origin == "replay":  # the replayed log's own count: the same decisions, nothing probed
                        n = int(res.extra.get(REPLAY_MEASUREMENTS) or 1)
                        agree = Agreement(n, f"{n} agreeing measurements in its one probe, as the replayed log "
                                             "recorded them") if n > 1 else Agreement()
                    else:
                        this_run = prober.measured_by_this_run(res)
                        if this_run and res.verdict is Verdict.BAD:
                            self._bad_starts.setdefault(candidates[i].ref, set()).add(res.cache_key or str(id(res)))
                        agree = agreeing(r, res, scope, this_run=this_run, bad_end_ref=candidates[-1].ref,
                                         shows_every_start=any(len(v) >= 2 for v in self._bad_starts.values()))
                    eff = b.feed(i, res.verdict, res.signature or None, note=scoped_out or end_note,
                                 runs=counted if counted[1] > 0 else None, measurements=agree.count)
                    if agree.count > 1:
                        res.extra["agreeing"] = {"count": agree.count, "what": agree.what}
                    note = b.history[-1].note
                    adapt_rates(r, b, i, res, self.echo)
                prober.event("probe", {
                    "index": i, "ref": candidates[i].ref, "label": candidates[i].label, "attempt": a,
                    "verdict": res.verdict.value, "effective": eff.value, "reason": res.reason + (
                        f"; {note}" if note else ""),
                    "signature": res.signature, "threshold": list(res.threshold) if res.threshold else None,
                    "duration_s": round(res.duration_s, 3), "origin": origin, "phase": phase,
                    **({"measurements": b.history[-1].measurements}
                       if phase != "extra" and b.history and b.history[-1].measurements > 1 else {})})
                self._progress(b, candidates[i], res, eff, origin)
                for line in watch.see(candidates[i].label or candidates[i].ref, res.patches):
                    self.echo(line)
                if (scope is None and verdict_fn is None and i == len(candidates) - 1
                        and eff is Verdict.BAD):
                    scope = learn(r, res, candidates[i].label or candidates[i].ref[:12])
                    if scope is not None:
                        prober.focus = scope.sizes
                        self.echo(scope_line(scope, res))

    def _refocus(self, c: Candidate, attempt: int, res: ProbeResult, executor: Any) -> tuple[ProbeResult, str]:
        """Probe ``c`` again asking the bad end's failing prompts first (``prober.focus``): its probe
        ran in the round that first probed the bad end, before those prompts were known, and its
        threshold search ended in an error (``res``: a crash at the largest sizes, issue 23 input 2)
        or its good verdict never asked them (issue 35: compared on the same prompts only)."""
        self.echo(f"{c.label or c.ref[:12]}: probed before the bad end's failing prompts were known "
                  f"({res.verdict.value}: {res.reason[:120]}): probing it again asking "
                  f"{', '.join(str(getattr(k, 'requested', k)) for k in self.prober.focus)} tokens first")
        ((again, origin),) = self.prober.probe_batch([(c, attempt)], executor)
        return again, origin

    def _end_reprobe(self, b: Bisection, candidates: list[Candidate], i: int, attempt: int,
                     attempts: dict[int, int], probes: list[ProbeResult], executor: Any) -> ProbeResult:
        """One more probe (number ``attempt``) of the known-failing end ``i`` for
        :func:`bisectbot.verdict.badend.sequential_end`: logged and listed, not fed to the search."""
        attempts[i] = attempt
        ((res, origin),) = self.prober.probe_batch([(candidates[i], attempt)], executor)
        probes.append(res)
        self.prober.event("probe", {
            "index": i, "ref": candidates[i].ref, "label": candidates[i].label, "attempt": attempt,
            "verdict": res.verdict.value, "effective": res.verdict.value, "reason": res.reason + "; end test",
            "signature": res.signature, "threshold": list(res.threshold) if res.threshold else None,
            "duration_s": round(res.duration_s, 3), "origin": origin, "phase": "boundary"})
        self._progress(b, candidates[i], res, res.verdict, origin)
        return res

    def _prefetch_report(self, name: str, executor: Any) -> None:
        """One line and one ledger event: candidates prepared ahead, used, wasted (issue 15)."""
        stats_fn = getattr(executor, "prefetch_stats", None)
        stats = stats_fn() if callable(stats_fn) else None
        if not stats or not (stats.get("ahead") or stats.get("cancelled")):
            return
        self.prober.event("prefetch", {"stage": name, **stats})
        self.echo(f"{name}: prefetch prepared {stats['ahead']} candidate(s) ahead: {stats['used']} used, "
                  f"{stats['wasted']} wasted build(s); {stats['cancelled']} cancelled before starting "
                  f"(mean prepare {stats.get('prepare_s', 0):.1f}s, probe {stats.get('probe_s', 0):.1f}s)")

    def _stage_result(self, name: str, component: str, candidates: list[Candidate], b: Bisection,
                      probes: list[ProbeResult],
                      flags_fn: Callable[[Candidate, Candidate], list[str]] | None) -> StageResult:
        """The finished search as a :class:`StageResult` (flags, ledger result event and session row)."""
        good, bad = candidates[0], candidates[-1]
        sr = b.result()
        message = sr.message
        if self.recipe.regress.mode == "slower" and sr.status in (Status.NO_REGRESSION, Status.BOUNDARY_FAILED):
            # issue 39: an end judged against the other's samples; what was measured says why, not "older
            # than the range" (the good end measured no slower than the bad end is no regression in range)
            end = good if sr.status is Status.BOUNDARY_FAILED else bad
            why = next((p.reason for p in reversed(probes) if p.candidate.ref == end.ref), "")
            if why:
                message = f"the ends cannot be told apart as a slowdown: {why}"
        if self.end_notes and sr.status in (Status.NO_REGRESSION, Status.BOUNDARY_FAILED):
            message = f"{message}: {'; '.join(self.end_notes)}"
        st = StageResult(name=name, component=component, status=sr.status, candidates=list(candidates),
                         probes=probes, confidence=sr.confidence, message=message)
        if sr.last_good is not None:
            st.last_good = candidates[sr.last_good]
        if sr.first_bad is not None:
            st.first_bad = candidates[sr.first_bad]
        st.culprits = [candidates[i] for i in sr.culprits]
        if st.status in (Status.RANGE, Status.INCONCLUSIVE):
            st.message = _retry_hint(st.message, st.culprits, probes, self.prober.retry_errors)
        # issue 35, item 3: verdicts that contradict each other are named with what differs; an exact
        # search stops on them ("contradict" in its message), a noisy one weighs them as noise, so
        # there only a verdict another run measured against one this run measured is named
        what = contradiction_text(probes, self.prober.session_id, across_runs="contradict" not in st.message)
        if what:
            st.message = f"{st.message}; {what}"
            self.echo(what)
        if st.status is Status.CULPRIT and flags_fn and st.first_bad and st.last_good:
            try:
                st.flags = flags_fn(st.first_bad, st.last_good)
            except Exception as e:  # flags are advisory
                log.warning("plausibility flags failed: %s", e)
        if st.status is Status.CULPRIT and st.first_bad and st.last_good:
            mixed_how = mixed_builds(probes, st.first_bad.ref, st.last_good.ref)
            if mixed_how:  # issue 40: a prebuilt wheel against a source build differs beyond the commit
                st.flags = [*st.flags, MIXED_BUILDS_FLAG]
                st.message = f"{st.message}; {mixed_how}" if st.message else mixed_how
                self.echo(mixed_how)
        self.prober.log("result", {
            "stage": name, "status": st.status.value, "culprits": [c.ref for c in st.culprits],
            "confidence": st.confidence, "message": st.message, "flags": st.flags})
        self.prober.save_session(good.ref, bad.ref, st.status.value,
                                 {"stage": name, "component": component, "n": len(candidates),
                                  "candidates": [c.ref for c in candidates],
                                  "culprits": [c.ref for c in st.culprits]})
        return st

    def _progress(self, b: Bisection, c: Candidate, res: ProbeResult, eff: Verdict, origin: str) -> None:
        from ...report.words import verdict_word  # fixed / still broken in a fix bisection (newuser defect 6)

        r = self.recipe
        kind = "fix" if r.regress.is_fix else "regression"
        v = verdict_word(res.verdict.value, kind, r.regress)
        if eff is not res.verdict:
            v = f"{v} -> {verdict_word(eff.value, kind, r.regress)}"
        src = "" if origin == "probe" else f" [{origin}]"
        if origin == "cache" and cached_from(res) is not None:  # when and by whom (issue 23)
            src += " " + measured_text(res, self.prober.session_id).removeprefix("ledger cache: ")
        left = b.steps_left()
        if origin == "probe":
            self.eta.add(res.duration_s)
        eta = "" if b.done else self.eta.text(left)
        line = (f"[{b.probes}] {c.label or c.ref}: {v}{_fmt_thr(res)}; {res.reason} "
                f"({res.duration_s:.1f}s, elapsed {time.monotonic() - self.t0:.0f}s){src}"
                + ("" if b.done else f"; ~{left} probe{'' if left == 1 else 's'} left") + (f"; {eta}" if eta else ""))
        self.echo(line)
        from ... import progress

        self.lines.append(line)
        progress.summary(self.lines)


def _measured(p: ProbeResult, session: str) -> str:
    """``good in session S, 2026-12-02 05:04:57 UTC, image sha256:..``: one side of a contradiction."""
    from ...provenance import when_text

    mark = cached_from(p)
    where = (f"cached from session {mark['session'] or '?'} of {when_text(mark['measured_at'])}" if mark else
             f"measured in this run (session {session})")
    digest = p.candidate.ref if p.candidate.ref.startswith("sha256:") else str(p.extra.get("build_key") or "")
    return f"{p.verdict.value} {where}" + (f", image {digest[:80]}" if digest.startswith("sha256:") else "")


def contradiction_text(probes: list[ProbeResult], session: str, across_runs: bool = False) -> str:
    """What differs between the verdicts of one candidate that contradict each other (issue 35, item 3):
    both sides (verdict, session, date, image digest) and the host facts recorded with each probe
    that differ, then "something outside the recipe changed, or the probe is flaky"; ``""`` when no
    candidate has both a good and a bad verdict. ``across_runs``: only a pair of which one verdict
    came from another run's cache and the other was measured in this run."""
    from ...provenance import HOST_KEY, facts_diff, host_facts

    by_ref: dict[str, list[ProbeResult]] = {}
    for p in probes:
        if p.verdict in (Verdict.GOOD, Verdict.BAD):
            by_ref.setdefault(p.candidate.ref, []).append(p)
    for ps in by_ref.values():
        goods = [p for p in ps if p.verdict is Verdict.GOOD]
        bads = [p for p in ps if p.verdict is Verdict.BAD]
        if across_runs:
            here = [p for p in ps if cached_from(p) is None]
            there = [p for p in ps if cached_from(p) is not None]
            pair = next(((a, b) for a in there for b in here if a.verdict is not b.verdict), None)
            if pair is None:
                continue
            goods, bads = ([pair[0]], [pair[1]]) if pair[0].verdict is Verdict.GOOD else ([pair[1]], [pair[0]])
        if not goods or not bads:
            continue
        a, b = (goods[0], bads[-1]) if ps.index(goods[0]) < ps.index(bads[-1]) else (bads[0], goods[-1])
        fa = a.extra.get(HOST_KEY) if isinstance(a.extra.get(HOST_KEY), dict) else {}  # a row's odd host is none
        fb = b.extra.get(HOST_KEY) if isinstance(b.extra.get(HOST_KEY), dict) else {}
        fb = fb or (host_facts(str(fa.get("runner", ""))) if cached_from(b) is None else {})
        diff = facts_diff(fa, fb) if fa and fb else []
        name = a.candidate.label or a.candidate.ref[:12]
        facts = ("; host facts that differ: " + ", ".join(diff) if diff else
                 "; the host facts recorded with both probes are the same" if fa and fb else
                 "; the earlier probe recorded no host facts")
        return (f"{name} was {_measured(a, session)} and {_measured(b, session)}{facts}: something outside the "
                "recipe changed (the host, its packages, the image behind a tag), or the probe is flaky "
                "(then set bisect.flake rates)")
    return ""


def _retry_hint(message: str, inside: list[Candidate], probes: list[ProbeResult], retried: bool) -> str:
    """``message`` of a range, plus what to do about skips inside it that came from the ledger cache
    (issue 35: a transient failure cached as a skip is repeated by every later run): which, measured
    when, and that ``bisectbot run --retry-errors`` probes them again (unless this run did)."""
    refs = {c.ref for c in inside}
    last: dict[str, ProbeResult] = {}
    for p in probes:
        if p.candidate.ref in refs:
            last[p.candidate.ref] = p
    cached = [p for p in last.values() if p.verdict is Verdict.SKIP and cached_from(p) is not None]
    if not cached or retried:
        return message
    which = ", ".join(f"{p.candidate.label or p.candidate.ref[:12]} ({p.reason[:80]}; "
                      f"{measured_text(p).removeprefix('ledger cache: ')})" for p in cached[:3])
    hint = (f"the skip{'s' if len(cached) > 1 else ''} inside the range come{'' if len(cached) > 1 else 's'} from the "
            f"ledger cache: {which}; if that failure passes on its own, `bisectbot run --retry-errors` probes "
            "cached skips again")
    return f"{message}; {hint}" if message else hint


__all__ = ["RoundLoop", "phase_of"]
