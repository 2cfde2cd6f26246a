"""Prefetch: prepare the candidates that can come next while the current one is probed."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from ..models import Candidate
from ..run.base import CandidateRunner, Prepared, PrepareFailed

log = logging.getLogger(__name__)


class Prefetcher:
    """Prepares candidates in background threads; hands each prepared one out once.

    ``want(cands)`` starts preparing those not yet started; ``get(c)`` returns the prepared
    candidate (waiting, or preparing in this thread when it was not started);
    ``drop(keep)`` releases what was prepared and is not in ``keep``.
    """

    def __init__(self, runner: CandidateRunner, workers: int = 2):
        self.runner = runner
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prefetch")
        self.futures: dict[str, Future] = {}
        self.started: list[str] = []  # refs whose preparation was started in the background

    def want(self, cands: list[Candidate]) -> None:
        for c in cands:
            if c.ref not in self.futures:
                self.futures[c.ref] = self.pool.submit(self.runner.prepare, c)
                self.started.append(c.ref)

    def get(self, c: Candidate) -> Prepared | PrepareFailed:
        fut = self.futures.pop(c.ref, None)
        if fut is None:
            return self.runner.prepare(c)
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
            self._release_when_done(self.futures.pop(ref))

    def close(self) -> None:
        self.drop()
        self.pool.shutdown(wait=True)
