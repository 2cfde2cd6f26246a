"""The :class:`Prober`: the probe cache and the one writer of a run's ledger rows.

Every stage asks it for verdicts (:meth:`Prober.probe`, :meth:`Prober.probe_batch`): a
maintainer's verdict, a replayed one or a cached one is answered at once, the rest run
through an :class:`bisectbot.session.probing.executor.Executor` and are stored as each finishes.
Session rows and events (``bisectbot bisect log``) go through it too, so no stage writes
the ledger itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...ledger import Ledger
from ...models import Candidate, ProbeResult, PromptKey, Verdict
from ...provenance import CACHED_KEY, HOST_KEY, SESSION_KEY, cached_from, host_facts, mark_cached
from ...recipe import Recipe, TriageToggle
from ...run.base import CandidateRunner
from ...run.probe import ProbeContext, ProbeJob
from ...verdict.record import GIVEN_KEY
from ..replay import REPLAY_MEASUREMENTS, LogLine
from .executor import (
    Echo,
    Executor,
    LocalExecutor,
    build_key,
    focused_key,
    probe_key,
    reproducer_key,
    run_probe,
)
from .prefetch import Prefetcher

#: Host facts a cached verdict is not compared on (:meth:`Prober._other_host`): the bot's version
#: (it changes no measurement; the verdict is decided again from the row's evidence) and the
#: server environment's package versions (the build's own, fixed by the probe key).
_UNCOMPARED_FACTS = ("bisectbot", "packages")


class Prober:
    """Verdicts for candidates, cached in ``ledger`` under (candidate ref, build key,
    reproducer key = ``recipe.verdict_hash()``, triage toggle, attempt number).

    ``replay`` forces verdicts per candidate ref (in order) instead of probing.
    A candidate the replay log lacks is probed, not answered by the ledger's cache
    (``fresh_refs``: what this replay probed itself may be).
    ``human`` are maintainers' verdicts (``/bisectbot good|bad REF``, ``retract`` as skip):
    they hold for every probe of the candidates they name and are never overridden by a probe.
    ``executor`` runs each round's probes (None: a :class:`LocalExecutor` per round, see
    :meth:`executor_for`). ``oracle`` is the run's reference while it is up
    (:func:`bisectbot.session.probing.oracles.reference_up` sets it, issue 18).

    Caching policy (issue 11): only deterministic outcomes are cached -- a verdict, a
    failed build, a server that never became healthy (each costs 15-40 minutes to redo on
    MI355X). A transient error (connection, timeout, HTTP 429/5xx after the reproducer's
    bounded retries: ``extra["transient"]``) is a skip for this run but never stored, so a
    later run probes again. ``retry_errors`` (``run --retry-errors``) probes again, once
    per run, every candidate whose cached verdict is a skip.

    ``focus`` (issue 23): sizes (tokens) where the current search's bad end failed; set by the
    round loop once the bad end is known bad, asked first by every later probe's threshold
    search (:mod:`bisectbot.reproduce.focus`) and part of those probes' cache keys.

    ``round_session`` (issue 23, input 3): the round session (``bisectbot round plan``) this
    prober replays, ``""`` in a ``run``; a verdict ``round import`` recorded for it carries its id
    (``extra["round_session"]``), which tells a verdict of this session from an older cached one
    (:meth:`answered_here`).

    Events are logged into the current session (:meth:`start`); the first ``n`` probe events
    after :meth:`prior_events` found ``n`` logged ones are not logged again (a resumed run).
    """

    def __init__(self, recipe: Recipe, ledger: Ledger, runner: CandidateRunner, *, echo: Echo,
                 replay: list[LogLine] | None = None, human: list[LogLine] | None = None,
                 executor: Executor | None = None, retry_errors: bool = False):
        self.recipe = recipe
        self.ledger = ledger
        self.runner = runner
        self.executor = executor
        self.echo = echo
        self.repro_key = reproducer_key(recipe)
        self.replay: dict[str, list[LogLine]] = {}
        for ln in replay or []:
            self.replay.setdefault(ln.ref, []).append(ln)
        self.replayed = bool(replay)
        #: the replay log's verdict lines, in order, as one digest: part of the session's identity, so
        #: an edited log is a session of its own and the same log resumes its interrupted session
        self.replay_digest = hashlib.sha256("\n".join(
            f"{ln.verdict.value} {ln.ref} {ln.signature}" for ln in replay or []).encode()).hexdigest()[:16] \
            if replay else ""
        # refs probed for real in this replay (this process, or an interrupted run of the same replay
        # session): in a replay, only they may answer from the cache (issue 25, input 6)
        self.fresh_refs: set[str] = set()
        self.human: list[LogLine] = list(human or [])
        self.retry_errors = retry_errors
        self._retried: set[str] = set()  # cache keys re-probed under retry_errors in this run
        self.oracle: Any = None  # the run's reference while it is up (issue 18)
        #: under regress: slower, the current search's ends' samples (bisectbot.verdict.measured.Baseline, issue 39)
        self.baseline: Any = None
        self.focus: tuple[PromptKey, ...] = ()  # the bad end's failing prompts (issues 23, 35)
        self.round_session = ""  # the round session replayed (issue 23, input 3)
        self.fresh_probes = 0  # probes really run (not from cache or replay) in this process
        self.round_no = 0  # rounds (batches of probes) so far, cached ones included
        #: probe keys of each round so far (cached ones included; maintainer and replayed verdicts have none):
        #: ``round import`` tells a repeated import of a round's files from a probe no round planned (issue 24)
        self.round_keys: dict[int, set[str]] = {}
        self.session_id = ""
        #: every stage session this run started (:meth:`start`): rows they measured are this run's
        #: (a resumed run starts the same ones: its finished probes stay answered)
        self._sessions: set[str] = set()
        self._to_skip_logging = 0
        self._other_host_said: set[str] = set()  # probe keys whose other-host row was said (once each)
        self._host: dict[str, Any] | None = None  # this host's facts (provenance.host_facts), read once

    # ------------------------------------------------------------------ keys and ids
    def _build_key(self, c: Candidate) -> str:
        return build_key(self.runner, c)

    def _repro_key(self) -> str:
        """The reproducer key of the next probes: with ``focus``, the sizes asked first too; under
        ``regress: slower`` the search's ends (a verdict judged against other ends is not reused)."""
        ends = self.baseline.key if self.baseline is not None else ""
        return focused_key(self.repro_key + ends, self.focus)

    @property
    def context(self) -> ProbeContext:
        """What every probe of the current stage shares: recipe, runner and the run's oracle
        (while it is up); the per-candidate rest travels as a :class:`bisectbot.run.probe.ProbeJob`."""
        return ProbeContext(self.recipe, self.runner, self.oracle, baseline=self.baseline)

    def start(self, stage: str, good: str, bad: str) -> str:
        """Make the session of ``stage`` between refs ``good`` and ``bad`` the current one; its id
        (SHA-256, 12 hex chars, of recipe, reproducer key, stage, ends, the replay log's verdict lines and
        maintainers' verdicts)."""
        human = ",".join(f"{ln.verdict.value}:{ln.ref}" for ln in self.human)
        replay = f"replay={self.replay_digest}" if self.replayed else ""
        blob = (f"{self.recipe.name}|{self.repro_key}|{stage}|{good}|{bad}|{replay}"
                + (f"|human={human}" if human else ""))
        self.session_id = hashlib.sha256(blob.encode()).hexdigest()[:12]
        self._sessions.add(self.session_id)
        return self.session_id

    def measured_by_this_run(self, res: ProbeResult) -> bool:
        """True when ``res`` was measured by this run: fresh, or a ledger row of one of this run's stage
        sessions (an interrupted run being resumed) or of the round session it replays; False for a
        row another run measured and for a verdict given without a measurement (a maintainer's, the
        replay log's)."""
        if res.extra.get(GIVEN_KEY):
            return False
        if cached_from(res) is None or self.answered_here(res):
            return True
        return bool(res.extra.get(SESSION_KEY)) and str(res.extra.get(SESSION_KEY)) in self._sessions

    def _measured_elsewhere(self, res: ProbeResult, attempt: int) -> bool:
        """True when the cached ``res`` may not answer probe number ``attempt`` of its candidate: a
        re-probe (``attempt`` > 1: verification, more runs of a flaky end, the good end asked about
        the good side's noise) is a new measurement of *this* run's question, and a row another run
        measured is not one (issue 35: night 1's re-probes of its bad end answered night 2's
        verification of that commit from the cache, so the host's drift between the nights was never
        measured and a culprit was named at 0.99). A first probe may come from another run (the
        nightly's saving; the report says "cached"); rows this run's stages measured -- or the same
        stages of an interrupted run being resumed: the session ids are the same -- still answer."""
        if attempt <= 1 or self.answered_here(res):
            return False
        return str(res.extra.get(SESSION_KEY) or "") not in self._sessions

    # ------------------------------------------------------------------ verdicts known without probing
    def human_verdict(self, c: Candidate) -> LogLine | None:
        """The newest maintainer verdict naming ``c`` (see ``human``), or None."""
        for ln in reversed(self.human):
            if ln.matches(c):
                return ln
        return None

    def lookup(self, c: Candidate, attempt: int = 1,
               toggle: TriageToggle | None = None) -> tuple[ProbeResult | None, str, str]:
        """A verdict known without probing: ``(result, origin, cache_key)``; result None when unknown.

        ``origin`` is ``human`` (a maintainer's verdict), ``replay`` (forced by the replay
        log) or ``cache`` (the ledger). A cache hit measured by another run (not this round
        session's own) carries ``extra["cached"]`` (:func:`bisectbot.provenance.mark_cached`).
        """
        tname = toggle.name if toggle else ""
        hv = None if toggle else self.human_verdict(c)
        if hv is not None:
            return (ProbeResult(c, hv.verdict, reason=hv.note or "maintainer verdict",
                                extra={GIVEN_KEY: "a maintainer's verdict"}), "human", "")
        if not toggle and self.replay.get(c.ref):
            ln = self.replay[c.ref].pop(0)
            extra: dict[str, Any] = {GIVEN_KEY: "the replay log"}
            if ln.measurements > 1:
                extra[REPLAY_MEASUREMENTS] = ln.measurements
            return (ProbeResult(c, ln.verdict, reason="from the replay log", signature=ln.signature,
                                extra=extra), "replay", "")
        key = probe_key(c.ref, self._build_key(c), self._repro_key(), tname, attempt)
        if self.replayed and not toggle and c.ref not in self.fresh_refs:
            # a candidate the log lacks (a line dropped from it) is probed again, never answered by
            # the ledger's verdict of the session the log came from
            return None, "cache", key
        stored = self._stored(key, c)
        cached = stored[0] if stored is not None else None
        if cached is not None and (self._retry(cached, key) or (not toggle and self._measured_elsewhere(cached, attempt))
                                   or self._other_host(cached, key)):
            return None, "cache", key
        if stored is not None and cached is not None:  # same ref and build: the verdict holds, the label is this stage's
            cached.candidate = c
            if not self.answered_here(cached):  # measured by another run: the report says so (issue 23)
                mark_cached(cached, stored[1])
        return cached, "cache", key

    def _stored(self, key: str, c: Candidate, say: bool = True) -> tuple[ProbeResult, str] | None:
        """The ledger's row under ``key`` when it is evidence (issue 35, input 6): a row that cannot
        be decoded, or whose verdict contradicts its own recorded evidence
        (:func:`bisectbot.verdict.record.contradiction`), is dropped (said) and probed again."""
        from ...verdict.record import contradiction

        try:
            stored = self.ledger.get_probe_stored(key)
        except Exception as e:  # noqa: BLE001 - a damaged row is no evidence, never a traceback
            if say:
                self.echo(f"{c.label or c.ref[:12]}: its cached verdict cannot be decoded "
                          f"({type(e).__name__}: {str(e)[:120]}): dropped, probing it again")
            return None
        if stored is None:
            return None
        why = contradiction(self.recipe, stored[0])
        if why is not None:
            if say:
                self.echo(f"{c.label or c.ref[:12]}: its cached verdict {stored[0].verdict.value} (stored {stored[1]}) "
                          f"contradicts its own record: {why}; dropped, probing it again")
            return None
        return stored

    def _other_host(self, cached: ProbeResult, key: str, say: bool = True) -> bool:
        """True when the ledger's ``cached`` row was measured on another host (issue 40:
        a verdict is taken from the ledger only where the same build -- the probe key holds its build
        key: image digest, overlay, patch stack -- was probed on this host): its recorded host facts
        (:func:`bisectbot.provenance.host_facts`: runner profile, host name, Python, kernel) differ from
        this host's, or it recorded none. The bot's own version and the server's package versions are
        not compared (the package versions are the build's, which the key already fixes). Said once
        per key (``say``). A row of the round session this prober replays is exempt: the fan-out's
        probes run on other runners by design (``round import``)."""
        if self.answered_here(cached) or cached.extra.get(GIVEN_KEY):
            return False
        from ...provenance import facts_diff

        theirs = cached.extra.get(HOST_KEY) if isinstance(cached.extra, dict) else None
        if self._host is None:  # this host's facts do not change during a run: read once
            self._host = host_facts(self.recipe.runner)
        mine = self._host
        if isinstance(theirs, dict):
            diff = facts_diff({k: v for k, v in theirs.items() if k not in _UNCOMPARED_FACTS},
                              {k: v for k, v in mine.items() if k not in _UNCOMPARED_FACTS})
            if not diff:
                return False
            why = "measured on another host (" + "; ".join(diff)[:200] + ")"
        else:
            why = "its host was not recorded"
        if say and key not in self._other_host_said:
            self._other_host_said.add(key)
            self.echo(f"{cached.candidate.ref[:12]}: its cached verdict {cached.verdict.value} was {why}: "
                      "probing it here")
        return True

    def _retry(self, cached: ProbeResult, key: str) -> bool:
        """True when a cached skip is probed again (``retry_errors``, once per key and run)."""
        if not self.retry_errors or cached.verdict is not Verdict.SKIP or key in self._retried:
            return False
        self._retried.add(key)
        self.echo(f"retrying cached skip of {cached.candidate.ref[:12]}: {cached.reason[:120]}")
        return True

    def answered_here(self, res: ProbeResult) -> bool:
        """True when ``res`` (from the ledger) was probed for the round session this prober
        replays (recorded by ``round import`` for it); False in a ``run`` and for verdicts cached
        before the session (another run or session): those are "cached" in the sense of issue 23,
        input 3, and a skip among them at an end of the search is probed once more."""
        return bool(self.round_session) and res.extra.get("round_session") == self.round_session

    def _store(self, res: ProbeResult) -> None:
        """Cache ``res`` in the ledger unless it is a transient error (never a verdict to reuse), with
        the session that measured it (``extra["session"]``, :mod:`bisectbot.provenance`)."""
        if res.extra.get("transient"):
            self.echo(f"{res.candidate.ref[:12]}: transient error, not cached: {res.reason[:120]}")
            return
        res.extra.pop(CACHED_KEY, None)  # measured now: never stored as a cache hit
        if self.session_id:
            res.extra.setdefault(SESSION_KEY, self.session_id)  # which run measured it (a later cache hit names it)
        # the host it was measured on (issue 35, item 3): a later contradiction names what differs
        res.extra.setdefault(HOST_KEY, host_facts(self.recipe.runner, res.extra.get("versions")))
        self.ledger.put_probe(res)

    def needs_probe(self, c: Candidate, attempts: dict[int, int], i: int) -> bool:
        """Whether candidate ``c`` (index ``i``, probed ``attempts[i]`` times so far) would really
        be probed next time: no replayed, maintainer or cached verdict answers it (for prefetch)."""
        if self.replay.get(c.ref) or self.human_verdict(c) is not None:
            return False
        if self.replayed and c.ref not in self.fresh_refs:
            return True
        attempt = attempts.get(i, 0) + 1
        key = probe_key(c.ref, self._build_key(c), self._repro_key(), "", attempt)
        stored = self._stored(key, c, say=False)
        cached = stored[0] if stored is not None else None
        return (cached is None or self._measured_elsewhere(cached, attempt) or self._other_host(cached, key, say=False)
                or (self.retry_errors and cached.verdict is Verdict.SKIP and key not in self._retried))

    # ------------------------------------------------------------------ probing
    @contextmanager
    def executor_for(self, prefetch: bool) -> Iterator[Executor]:
        """The executor of a round: the session's, or a :class:`LocalExecutor` with
        ``recipe.bisect.parallel`` slots (prefetching when ``prefetch``), closed after the block."""
        if self.executor is not None:
            yield self.executor
            return
        executor = LocalExecutor(self.context, self.recipe.bisect.parallel, prefetch)
        try:
            yield executor
        finally:
            executor.close()

    def run_probe(self, c: Candidate, key: str, attempt: int = 1, toggle: TriageToggle | None = None,
                  prefetcher: Prefetcher | None = None) -> ProbeResult:
        """Prepare, reproduce, judge and release one candidate (no ledger access: thread-safe)."""
        return run_probe(self.context.with_prefetcher(prefetcher), ProbeJob(c, key, attempt, toggle, self.focus))

    def probe(self, c: Candidate, attempt: int = 1, toggle: TriageToggle | None = None,
              prefetcher: Prefetcher | None = None) -> tuple[ProbeResult, str]:
        """Probe candidate ``c`` (or take it from the replay file or the cache); store fresh results.

        Returns the result and where it came from: ``probe``, ``cache``, ``replay`` or ``human``.
        """
        if self.executor is not None and prefetcher is None:  # rounds: it runs wherever the executor does
            return self.probe_batch([(c, attempt, toggle)], self.executor)[0]
        known, origin, key = self.lookup(c, attempt, toggle)
        if known is not None:
            self._observe(known)
            return known, origin
        self.fresh_probes += 1
        res = self.run_probe(c, key, attempt, toggle, prefetcher)
        self.fresh_refs.add(c.ref)
        self._store(res)
        self._observe(res)
        return res, "probe"

    def _observe(self, res: ProbeResult) -> None:
        """Hand ``res`` to the search's measured ends (:class:`bisectbot.verdict.measured.Baseline`), if any."""
        if self.baseline is not None:
            self.baseline.observe(res)

    def probe_batch(self, jobs: list[tuple[Any, ...]], executor: Executor) -> list[tuple[ProbeResult, str]]:
        """One round: ``jobs`` are ``(candidate, attempt[, toggle])``; known verdicts at once, the
        rest through ``executor``; each fresh result is stored in the ledger (by this thread)
        as it finishes. Results in the order of ``jobs``."""
        self.round_no += 1
        out: list[tuple[ProbeResult, str] | None] = []
        todo: list[ProbeJob] = []
        where: list[int] = []
        for c, a, *rest in jobs:
            toggle = rest[0] if rest else None
            known, origin, key = self.lookup(c, a, toggle)
            if known is not None:
                self._observe(known)
                out.append((known, origin))
            else:
                out.append(None)
                where.append(len(out) - 1)
                todo.append(ProbeJob(c, key, a, toggle, self.focus))
            if key:
                self.round_keys.setdefault(self.round_no, set()).add(key)
        for n, res in executor.run(todo):
            self.fresh_probes += 1
            self.fresh_refs.add(res.candidate.ref)
            self._store(res)
            self._observe(res)
            out[where[n]] = (res, "probe")
        assert all(x is not None for x in out)
        return out  # type: ignore[return-value]

    def probe_fresh(self, c: Candidate, attempt: int, executor: Executor) -> ProbeResult:
        """Probe ``c`` now whatever the cache holds (a cached skip at an end of the search, issue 23)
        and store the result as :meth:`probe_batch` does (it replaces the cached one)."""
        self.round_no += 1
        key = probe_key(c.ref, self._build_key(c), self._repro_key(), "", attempt)
        self.round_keys.setdefault(self.round_no, set()).add(key)
        self.echo(f"{c.label or c.ref[:12]}: its cached verdict is a skip at an end of the search: probing it again")
        for _n, res in executor.run([ProbeJob(c, key, attempt, None, self.focus, again=True)]):
            self.fresh_probes += 1
            self._store(res)
            self._observe(res)
            return res
        raise AssertionError("the executor returned no result")  # pragma: no cover

    # ------------------------------------------------------------------ sessions and events
    def prior_events(self) -> list[dict[str, Any]]:
        """Events the current session already logged (an interrupted run); its probe events are
        not logged again (:meth:`event`)."""
        prior = self.ledger.events(self.session_id)
        self._to_skip_logging = sum(1 for e in prior if e["kind"] == "probe")
        if self.replayed:  # an interrupted replay resumes without probing its own probes again
            self.fresh_refs.update(str(e["data"].get("ref")) for e in prior
                                   if e["kind"] == "probe" and e["data"].get("origin") == "probe")
        return prior

    def save_session(self, good: str, bad: str, status: str, data: dict[str, Any]) -> None:
        """The current session's row (ends as refs, status ``running`` or the stage's status)."""
        # the question the session asked, so a dashboard without the recipe file says it (new-user pass)
        data = {**data, "regress": str(self.recipe.regress),
                "kind": "fix" if self.recipe.regress.is_fix else "regression"}
        self.ledger.save_session(self.session_id, self.recipe.name, self.repro_key, good, bad, status, data)

    def log(self, kind: str, data: dict[str, Any]) -> None:
        """Append an event to the current session's log."""
        self.ledger.log_event(self.session_id, kind, data)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """:meth:`log`, except a probe event an earlier run of this session already logged."""
        if kind == "probe" and self._to_skip_logging > 0:
            self._to_skip_logging -= 1
            return
        self.log(kind, data)
