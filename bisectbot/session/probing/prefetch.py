"""Prefetch: prepare the candidates the next step can need while the current one is probed.

While candidate ``i`` is probed, the next probe is one of two candidates -- the search's next
pick if ``i`` turns out good, or if it turns out bad (:meth:`bisectbot.bisect.Bisection.lookahead`).
:func:`next_candidates` lists them most likely first (by the search's posterior), and the
:class:`Prefetcher` prepares them one at a time in that order (mozregression's background
download with its ``cancel`` policy): once the verdict is known, the one not needed is cancelled
if it has not started, and released -- a *wasted* build -- if it has.

The less likely one is prepared ahead only while preparing is costly next to probing (mean
preparation >= :data:`SECOND_SHARE` x mean probe, both measured during the run; an image build of
20 minutes beside a 10-minute probe): then having it ready saves a real share of the step. When
preparations are cheaper (a worktree and a small build, the demo's 0.3 s beside 0.7 s) it is
prepared on demand instead, and at most the likely one can be wasted. ``stats`` counts what was prepared ahead, used, wasted and cancelled; the session reports
it at the end of each stage.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ... import progress
from ...models import Candidate, Verdict
from ...run.base import CandidateRunner, Prepared, PrepareFailed

log = logging.getLogger(__name__)

SECOND_SHARE = 0.5
"""Prepare the less likely next candidate ahead only when a preparation takes at least this share
of a probe (issue 15: "prepare only the candidates the next step can need"). The second branch is
needed about half the time, so it saves about half a preparation a step and wastes about as much:
worth it when a preparation is a large part of the step, not when it is a small one."""


def next_candidates(search: Any, index: int) -> list[int]:
    """Indices the step after probing ``index`` can probe, most likely first (at most two).

    ``search`` is a :class:`bisectbot.bisect.Bisection`; candidate ``index`` is bad with the
    posterior probability that the first bad lies at or before it.
    """
    la = search.lookahead(index)
    try:
        p_bad = float(search.posterior[: index + 1].sum())
    except Exception:  # a search without a posterior: good first
        p_bad = 0.0
    order = (Verdict.BAD, Verdict.GOOD) if p_bad >= 0.5 else (Verdict.GOOD, Verdict.BAD)
    out: list[int] = []
    for v in order:
        j = la.get(v)
        if j is not None and j != index and j not in out:
            out.append(j)
    return out


class Prefetcher:
    """Prepares candidates in the background, ``workers`` at a time (default 1: in the order
    wanted, so the less likely one starts only when the likely one is ready); hands each
    prepared one out once.

    ``want(cands)`` queues those not yet queued; ``get(c)`` returns the prepared candidate
    (waiting for it when it is being prepared, preparing it in this thread when it is still
    queued or was never wanted); ``drop(keep)`` cancels or releases what is not in ``keep``.
    """

    def __init__(self, runner: CandidateRunner, workers: int = 1, second_share: float = SECOND_SHARE):
        self.runner = runner
        self.second_share = second_share
        self._prepare_s: list[float] = []
        self._probe_s: list[float] = []
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prefetch")
        self.futures: dict[str, Future] = {}
        self.started: list[str] = []  # refs whose preparation was queued in the background
        self._lock = threading.Lock()
        self._stats = {"ahead": 0, "used": 0, "wasted": 0, "cancelled": 0}

    @property
    def stats(self) -> dict[str, int]:
        """``ahead``: preparations that ran in the background; ``used``: of them, probed;
        ``wasted``: prepared (or being prepared) and released unprobed; ``cancelled``: queued
        and dropped before they started (no cost)."""
        with self._lock:
            return dict(self._stats)

    def timings(self) -> dict[str, float]:
        """Mean seconds of a preparation and of a probe so far (0 when none was timed)."""
        with self._lock:
            return {"prepare_s": round(sum(self._prepare_s) / len(self._prepare_s), 3) if self._prepare_s else 0.0,
                    "probe_s": round(sum(self._probe_s) / len(self._probe_s), 3) if self._probe_s else 0.0}

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def _timed_prepare(self, c: Candidate) -> Prepared | PrepareFailed:
        t0 = time.monotonic()
        try:
            return self.runner.prepare(c)
        finally:
            with self._lock:
                self._prepare_s.append(time.monotonic() - t0)

    def _prepare(self, c: Candidate) -> Prepared | PrepareFailed:
        self._count("ahead")
        # its progress lines name the candidate prepared ahead (they were bare "build ..." lines
        # among the probes' own; new-user pass, issue 41)
        with progress.probe(f"{(c.label or c.ref)[:40]} (ahead)"):
            return self._timed_prepare(c)

    def observe_probe(self, seconds: float) -> None:
        """The wall time of one probe (seconds), for the cost rule of the less likely candidate."""
        with self._lock:
            self._probe_s.append(seconds)

    def second_worth_it(self) -> bool:
        """True when preparing costs at least ``second_share`` of probing (means so far); False until
        one preparation and one probe have been timed."""
        with self._lock:
            if not self._prepare_s or not self._probe_s:
                return False
            prep = sum(self._prepare_s) / len(self._prepare_s)
            probe = sum(self._probe_s) / len(self._probe_s)
        return prep >= self.second_share * probe

    def want(self, cands: list[Candidate]) -> None:
        """Queue ``cands`` (most likely first): the first always, the rest when :meth:`second_worth_it`."""
        if len(cands) > 1 and not self.second_worth_it():
            cands = cands[:1]
        for c in cands:
            if c.ref not in self.futures:
                self.futures[c.ref] = self.pool.submit(self._prepare, c)
                self.started.append(c.ref)

    def get(self, c: Candidate) -> Prepared | PrepareFailed:
        fut = self.futures.pop(c.ref, None)
        if fut is None:
            return self._timed_prepare(c)
        if fut.cancel():  # still queued behind another preparation: do not wait for that one
            self._count("cancelled")
            return self._timed_prepare(c)
        self._count("used")
        return fut.result()

    def _release_when_done(self, fut: Future) -> None:
        def done(f: Future) -> None:
            try:
                res = f.result()
            except Exception as e:  # a failed prefetch is only logged
                log.debug("prefetch failed: %s", e)
                return
            if isinstance(res, Prepared):
                self.runner.release(res)
        fut.add_done_callback(done)

    def drop(self, keep: set[str] | None = None) -> None:
        keep = keep or set()
        for ref in [r for r in self.futures if r not in keep]:
            fut = self.futures.pop(ref)
            if fut.cancel():
                self._count("cancelled")
                continue
            self._count("wasted")
            self._release_when_done(fut)

    def close(self) -> None:
        self.drop()
        self.pool.shutdown(wait=True)
