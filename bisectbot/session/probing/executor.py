"""Running probes: one probe anywhere (:func:`run_probe`), and executors that run a round's batch.

A *probe* prepares one candidate with a :class:`bisectbot.run.base.CandidateRunner`
(worktree, image build, release install), runs the recipe's reproducer on it, judges the
verdict by the recipe's regress mode and releases the candidate. :func:`run_probe` never
touches the ledger, so it runs in a thread, another process (``bisectbot round probe``) or
another machine.

An :class:`Executor` runs a batch of :class:`ProbeJob` and yields each result as it
finishes; the session (the one ledger writer) stores it. :class:`LocalExecutor` runs them
in ``slots`` threads of this host (one GPU slot each); with one slot it prefetches the
candidates that can come next.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from ... import sandbox
from ...change import change_of
from ...errors import BadInput, HostFailure, ServerError
from ...models import Candidate, ProbeResult, Verdict
from ...recipe import Recipe
from ...run.base import CandidateRunner, Prepared, PrepareFailed
from ...run.host import check_host, exception_cause, host_message
from ...run.probe import ProbeContext, ProbeJob
from ...run.starts import START_RETRIES, backoff_s, is_start_failure, transient_cause
from ...verdict.judge import judge
from .prefetch import Prefetcher

Echo = Callable[[str], None]  # receives progress lines


def probe_key(ref: str, build_key: str, reproducer_key: str, toggle: str = "", attempt: int = 1) -> str:
    """Probe cache key: SHA-256 (hex, 32 chars) of candidate, build key, reproducer key, toggle, attempt."""
    blob = f"{ref}|{build_key}|{reproducer_key}|{toggle}|#{attempt}"
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def reproducer_key(recipe: Recipe) -> str:
    """The reproducer part of every probe key: ``recipe.verdict_hash()`` (16 hex chars), then
    ``|cmd:<SHA-256, 16 hex>`` when the reproducer's argv names files by absolute path (a
    script kept outside the candidate's tree, e.g. ``command: [/opt/repro/run.sh]``): the
    recipe names the script, not its content, so an edited script must not reuse the old
    script's cached verdicts. A relative path runs from the candidate's tree, whose content
    is in the build key already. A file that cannot be read is left out. A reproducer that
    builds prompts (every kind but ``command``) adds ``|p<N>``,
    :data:`bisectbot.reproduce.prompts.PROMPT_FORMAT`: verdicts measured on other prompt text
    are not reused.
    """
    from ...reproduce.prompts import PROMPT_FORMAT

    h = hashlib.sha256()
    seen = False
    for arg in recipe.reproducer.command or []:
        if not arg.startswith("/") or "{" in arg:
            continue
        p = Path(arg)
        try:
            if p.is_file() and p.stat().st_size <= 16 * 1024 * 1024:
                h.update(arg.encode() + b"\0" + p.read_bytes() + b"\0")
                seen = True
        except OSError:
            continue
    fmt = f"|p{PROMPT_FORMAT}" if recipe.reproducer.kind != "command" else ""
    return recipe.verdict_hash() + fmt + (f"|cmd:{h.hexdigest()[:16]}" if seen else "")


def focused_key(repro_key: str, focus: tuple[Any, ...] | list[Any]) -> str:
    """The reproducer key of a probe whose threshold search asks ``focus`` (tokens, the bad end's
    failing sizes, issue 23) first: ``repro_key`` then ``|focus:N,M`` (unchanged without focus)."""
    return repro_key + (f"|focus:{','.join(map(str, focus))}" if focus else "")


def build_key(runner: CandidateRunner, c: Candidate) -> str:
    """The runner's build key of ``c`` (``""`` when the runner has none): part of the probe key.
    Raises :class:`bisectbot.errors.BadInput` for a candidate with a change under test (issue 42) on a
    runner that cannot apply one (a release or a prebuilt wheel is installed as published): its
    verdict would be the unchanged candidate's."""
    if change_of(c) is not None and not getattr(runner, "supports_change", False):
        raise BadInput(f"{type(runner).__name__} cannot apply a change to a candidate (releases and prebuilt "
                       "wheels are installed as published): use a git source (local runner) or images")
    fn = getattr(runner, "build_key", None)
    return fn(c) if callable(fn) else ""


def run_probe(ctx: ProbeContext, job: ProbeJob) -> ProbeResult:
    """Prepare, reproduce, judge and release ``job``'s candidate with what the stage shares
    (``ctx``: recipe, runner, oracle, prefetcher); no ledger access: thread-safe.
    ``job.focus``: sizes (tokens) a threshold search asks first (:func:`bisectbot.verdict.judge.judge`).

    A candidate that cannot be prepared, or whose server fails, is a SKIP with the reason. A
    server start that fails with a transient cause in its log (HTTP 429/5xx, a reset
    connection, a timed-out download: :func:`bisectbot.run.starts.transient_cause`) is started
    again with backoff up to :data:`bisectbot.run.starts.START_RETRIES` times; when it keeps
    failing so the skip is ``extra["transient"]`` (never cached).
    ``duration_s`` is wall-clock seconds of the whole probe. Every process of the probe (marked
    by :func:`bisectbot.reaper.probe_scope`) is killed before the result is returned.
    """
    from ... import progress
    from ...reaper import probe_scope

    # the probe's processes (setsid'd ones too) are killed before its verdict returns; its phases
    # report progress under its label (issue 24, input 7)
    c = job.candidate
    with probe_scope(), progress.probe((c.label or c.ref)[:40]):
        return _run_probe(ctx, job)


def _run_probe(ctx: ProbeContext, job: ProbeJob) -> ProbeResult:
    from ...reproduce.oracle import reference_start

    c, runner = job.candidate, ctx.runner
    name = c.label or c.ref[:12]
    t0 = time.monotonic()
    # the reference is a server of this very build: its first probe runs there (no second start)
    o = ctx.oracle  # (the build key only for the reference's own candidate: a local runner's key costs git work)
    shared = (reference_start(o, c.ref, build_key(runner, c), job.attempt, job.toggle is not None)
              if getattr(o, "serves", "") == c.ref else None)
    prepared = shared.prepared if shared is not None else _prepare(ctx, c, name)
    builds, build_cause = 0, None
    while isinstance(prepared, PrepareFailed):
        check_host(f"preparing {name}", prepared.reason, prepared.log_paths,  # issue 35: no skip of the host
                   _probe_dirs(ctx), _devices(ctx))
        build_cause = transient_cause(prepared.reason, prepared.log_paths, ("build-",))
        if build_cause is None or builds >= START_RETRIES:
            break
        builds += 1  # issue 35: a build whose output names a 429/5xx, a reset, a timeout is tried again
        time.sleep(backoff_s(builds))
        prepared = _prepare(ctx, c, name)
    res = ProbeResult(c, Verdict.SKIP, cache_key=job.key)
    try:
        if isinstance(prepared, PrepareFailed):
            if build_cause is not None:
                res.extra["transient"] = True  # never cached: a later run builds it again
            res.reason = prepared.reason + (f" (transient build failure after {builds + 1} builds: {build_cause})"
                                            if build_cause is not None else "")
            res.log_paths = list(prepared.log_paths)
            res.patches = list(prepared.patches)
        else:
            res.patches = list(prepared.patches)
            retry = 0
            while True:
                try:
                    j, extra = judge(ctx, prepared, job)
                    res.verdict, res.reason = j.verdict, j.reason
                    res.signature = str(j.signature) if j.signature else ""
                    res.threshold = extra.pop("threshold", None)
                    res.table = extra.pop("table", [])
                    res.extra = extra
                except ServerError as e:
                    check_host(f"starting {name}", str(e), prepared.log_paths, _probe_dirs(ctx), _devices(ctx))
                    cause = transient_cause(str(e), prepared.log_paths) if is_start_failure(str(e)) else None
                    if cause is not None and retry < START_RETRIES:
                        retry += 1  # issue 23, input 3: a hub rate limit at start passes on its own
                        time.sleep(backoff_s(retry))
                        continue
                    res.reason = f"server error, not a verdict: {e}"
                    if cause is not None:
                        res.extra["transient"] = True  # never cached: a later run starts it again
                        res.reason += f" (transient start failure after {retry + 1} starts: {cause})"
                if retry:
                    res.extra["start_retries"] = retry
                break
            res.log_paths = list(prepared.log_paths)
            res.extra["build_key"] = prepared.build_key
            if prepared.meta.get("built_from"):  # issue 40: a prebuilt wheel or a source build, said
                res.extra["built_from"] = str(prepared.meta["built_from"])
            if prepared.meta.get("pins_rewritten"):  # issue 38: the holding tree's pin set to this candidate
                res.extra["pins_rewritten"] = list(prepared.meta["pins_rewritten"])
    finally:
        if isinstance(prepared, Prepared) and shared is None:  # the reference's build stays for the reference
            runner.release(prepared)
    if shared is not None:
        res.extra["server"] = f"the reference's start ({shared.base_url}): the same build, no start of its own"
    res.duration_s = time.monotonic() - t0
    res.extra["attempt"] = job.attempt
    if builds:
        res.extra["build_retries"] = builds
    if job.toggle:
        res.extra["toggle"] = job.toggle.name
    return res


def _probe_dirs(ctx: ProbeContext) -> list[Path]:
    """The directories a probe writes, where a host failure is measured (:func:`bisectbot.run.host.observe`):
    the runner's work and log directories and what the sandbox lets a candidate write (its caches)."""
    r = ctx.runner
    base = [Path(d) for d in (getattr(r, "workdir", None), getattr(r, "log_dir", None)) if d]
    return [*base, *sandbox.writable_paths(base[0])] if base else []


def _devices(ctx: ProbeContext) -> list[str]:
    """The device nodes the runner's profile requires (``HOST[:CONTAINER[:PERMS]]``); none without a profile."""
    profile = getattr(ctx.runner, "profile", None)
    return list(getattr(profile, "devices", None) or [])


def _prepare(ctx: ProbeContext, c: Candidate, name: str) -> Prepared | PrepareFailed:
    """``ctx.prepare(c)``; an exception that names a host failure (a full disk under the worktrees, a
    daemon gone) becomes :class:`bisectbot.errors.HostFailure`: the host, never a verdict (issue 35)."""
    try:
        return ctx.prepare(c)
    except Exception as e:
        cause = exception_cause(e, _probe_dirs(ctx))
        if cause is None:
            raise
        raise HostFailure(host_message(f"preparing {name}", cause)) from None


class Executor(Protocol):
    """Runs a round's probes somewhere (threads here, processes, other machines)."""

    slots: int  # probes it runs at once

    def run(self, jobs: list[ProbeJob]) -> Iterator[tuple[int, ProbeResult]]:
        """Run ``jobs``; yield ``(index into jobs, result)`` as each finishes (any order)."""
        ...

    def prefetch(self, keep: list[Candidate], want: list[Candidate]) -> None:
        """Hint: ``want`` may be probed next (prepare them); release prepared ones not in ``keep``."""
        ...

    def close(self) -> None:
        """Wait for running probes and release what was prepared."""
        ...


class LocalExecutor:
    """Probes in ``slots`` threads of this host with one runner (one slot: serial, prefetching)."""

    def __init__(self, ctx: ProbeContext, slots: int = 1, prefetch: bool = True):
        self.slots = max(1, slots)
        self.prefetcher = Prefetcher(ctx.runner) if prefetch and self.slots == 1 else None
        self.ctx = ctx.with_prefetcher(self.prefetcher)  # the stage's context (issue 18: its oracle)
        self.pool = ThreadPoolExecutor(max_workers=self.slots) if self.slots > 1 else None

    def prefetch(self, keep: list[Candidate], want: list[Candidate]) -> None:
        if self.prefetcher is not None:
            self.prefetcher.drop(keep={c.ref for c in keep})
            self.prefetcher.want(want)

    def run(self, jobs: list[ProbeJob]) -> Iterator[tuple[int, ProbeResult]]:
        if self.pool is None:
            for n, j in enumerate(jobs):
                res = run_probe(self.ctx, j)
                if self.prefetcher is not None:
                    self.prefetcher.observe_probe(res.duration_s)
                yield n, res
            return
        futs: dict[Future, int] = {self.pool.submit(run_probe, self.ctx, j): n for n, j in enumerate(jobs)}
        pending = set(futs)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=lambda f: futs[f]):
                yield futs[f], f.result()

    @property
    def has_prefetch(self) -> bool:
        return self.prefetcher is not None

    def prefetch_stats(self) -> dict[str, float] | None:
        """What prefetch prepared ahead, used, wasted and cancelled (see :class:`Prefetcher`); None without."""
        return {**self.prefetcher.stats, **self.prefetcher.timings()} if self.prefetcher is not None else None

    def close(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.close()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
