"""Orchestration of ``bisectbot run``: candidates -> probes -> search -> verification -> report.

One :class:`Session` drives :class:`bisectbot.bisect.Bisection` (the pure search) with
a :class:`bisectbot.run.base.CandidateRunner` (local worktrees or containers):

* **Stage 1** over the recipe's source (a git range here; nightlies and releases plug in
  through :func:`register_source`), then, when the first-bad and last-good candidates
  name their component commits (``meta["commits"]``), the **component stage**: mixed
  pairs attribute the regression to one component when several changed, and that
  component's first-parent commits are bisected with the others pinned.
* Every probe is cached in the ledger under (candidate ref, build key, reproducer key =
  ``recipe.verdict_hash()``, triage toggle, attempt number). The search is
  deterministic given the verdicts, so a run that was interrupted (Ctrl-C, ``kill -9``,
  reboot) re-runs from the start, takes every finished probe from the cache, and
  continues with the first one that never finished: no probe is repeated.
* Each verdict is appended to the session's event log (``bisectbot bisect log``), printed
  as a progress line, and a replay file (``--replay``) can force verdicts instead.
* While a candidate is probed, the two candidates that can come next are prepared in
  the background (prefetch); the one not needed is released.

Result: a :class:`bisectbot.models.RunResult`, written by :func:`write_report` as JSON
and Markdown to ``recipe.report.dir``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shlex
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .bisect import (
    Bisection,
    Judgement,
    is_patch_mode,
    judge_command,
    judge_patches,
    judge_threshold,
    may_blame,
    plausibility_flags,
)
from .errors import BadInput, ServerError
from .ledger import Ledger
from .models import Candidate, ProbeResult, RunResult, StageResult, Status, Verdict
from .recipe import GitSource, Recipe, TriageToggle
from .run.base import CandidateRunner, Prepared, PrepareFailed

log = logging.getLogger(__name__)

Echo = Callable[[str], None]


# --------------------------------------------------------------------------- candidate sources


class CandidateSource(Protocol):
    """Where stage-1 candidates come from (git range, nightlies, releases)."""

    component: str

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        """Ordered candidates from ``good`` to ``bad`` inclusive (oldest first). BadInput on bad refs."""
        ...

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        """Plausibility flags of a culprit (keys of :data:`bisectbot.bisect.FLAG_TEXT`)."""
        ...


class GitCandidates:
    """A git range of the recipe's :class:`GitSource` (first-parent by default)."""

    def __init__(self, src: GitSource, base_dir: Path | None = None):
        from .sources.git import GitRepo, local_repo

        path = local_repo(src.repo, base_dir)
        self.src = src
        self.repo = GitRepo(path, src.component or path.resolve().name)
        self.component = self.repo.component

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        return self.repo.commits(good, bad, first_parent=self.src.first_parent)

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        inputs = self.repo.plausibility_inputs(culprit.ref, predecessor.ref)
        return plausibility_flags(runtime_paths=self.src.runtime_paths, **inputs)


def _pypi_source(recipe: Recipe, base_dir: Path | None) -> CandidateSource:
    from .sources.pypi import PyPICandidates

    return PyPICandidates(recipe.source)  # type: ignore[arg-type]


class RegistryCandidates:
    """Nightly images of the recipe's registry source, oldest first, one candidate per digest.

    Tags are discovered live (and recorded in the ledger); when the registry cannot be
    reached, the nightlies the ledger has seen are used (``bisectbot nightlies`` records
    them). ``good``/``bad`` are tags (or digests) of that list.
    """

    component = "image"

    def __init__(self, recipe: Recipe, ledger: Ledger | None = None, registry_client: Any = None):
        self.src = recipe.source
        self.ledger = ledger
        self.client = registry_client

    def _tags(self) -> list[tuple[str, str]]:
        from .errors import RegistryError
        from .sources import registry as reg

        try:
            infos = reg.discover(self.src, registry_client=self.client)
            if self.ledger is not None:
                reg.record(self.ledger, infos)
            return [(t.tag, t.digest) for t in infos if t.digest]
        except RegistryError as e:
            if self.ledger is None:
                raise
            rows = self.ledger.nightlies(self.src.repository)  # type: ignore[union-attr]
            if not rows:
                raise BadInput(f"registry unreachable ({e}) and the ledger has no nightlies of "
                               f"{self.src.repository}") from None  # type: ignore[union-attr]
            log.warning("registry unreachable (%s): using the %d nightlies in the ledger", e, len(rows))
            infos = reg.order_tags(reg.TagInfo(r["repository"], r["tag"], r["digest"], r["last_updated"])
                                   for r in rows)
            pattern = self.src.tag_pattern  # type: ignore[union-attr]
            keep = set(reg.filter_tags([t.tag for t in infos], pattern))
            return [(t.tag, t.digest) for t in infos if t.tag in keep and t.digest]

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        from .models import CandidateKind
        from .sources.registry import image_ref

        cands: list[Candidate] = []
        for tag, digest in self._tags():
            if cands and cands[-1].ref == digest:
                continue  # the same image under the next tag: one candidate
            img = image_ref(self.src.registry, self.src.repository, digest)  # type: ignore[union-attr]
            cands.append(Candidate(CandidateKind.NIGHTLY, digest, tag, "image", {"image": img, "tag": tag}))

        def find(x: str) -> int:
            for i, c in enumerate(cands):
                if x in (c.label, c.ref):
                    return i
            raise BadInput(f"nightly {x!r} not found among {len(cands)} tags of "
                           f"{self.src.repository} matching {self.src.tag_pattern!r}")  # type: ignore[union-attr]

        gi, bi = find(good), find(bad)
        if gi >= bi:
            raise BadInput(f"good nightly {good} is not older than bad nightly {bad}")
        return cands[gi:bi + 1]

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        return ["no-op-build"] if culprit.ref == predecessor.ref else []

    def default_ends(self) -> tuple[str | None, str | None]:
        """``(oldest tag, newest tag)`` of the matching nightlies (by the date in the tag): a
        nightly recipe names its last-good nightly and bisects up to tonight's. ``(None, None)``
        when there are none."""
        tags = [t for t, _ in self._tags()]
        return (tags[0], tags[-1]) if tags else (None, None)


_SOURCES: dict[str, Callable[[Recipe, Path | None, Ledger | None], CandidateSource]] = {
    "git": lambda r, base, led: GitCandidates(r.source, base),  # type: ignore[arg-type]
    "registry": lambda r, base, led: RegistryCandidates(r, led),
    "pypi": lambda r, base, led: _pypi_source(r, base),
}


def register_source(kind: str, factory: Callable[[Recipe, Path | None, Ledger | None], CandidateSource]) -> None:
    """Plug in a stage-1 source for ``recipe.source.kind`` (e.g. ``pypi``): ``factory(recipe, base_dir, ledger)``."""
    _SOURCES[kind] = factory


def resolve_ends(recipe: Recipe, good: str | None, bad: str | None,
                 source: CandidateSource | None = None) -> tuple[str | None, str | None]:
    """Good/bad ends: the arguments, else ``recipe.bisect.good``/``bad``, else the source's
    ``default_ends()`` when it has one (releases: oldest and newest in range). May stay None."""
    good = good or recipe.bisect.good
    bad = bad or recipe.bisect.bad
    if not good or not bad:
        ends = getattr(source, "default_ends", None)
        if callable(ends):
            g, b = ends()
            good, bad = good or g, bad or b
    return good, bad


def make_source(recipe: Recipe, base_dir: Path | None = None, ledger: Ledger | None = None) -> CandidateSource:
    """The candidate source of a recipe; BadInput when its kind has no source here."""
    kind = recipe.source.kind
    if kind not in _SOURCES:
        raise BadInput(f"source kind '{kind}' has no candidate source in this bisectbot "
                       f"(available: {', '.join(sorted(_SOURCES))})")
    return _SOURCES[kind](recipe, base_dir, ledger)


# --------------------------------------------------------------------------- replay files


@dataclass
class LogLine:
    """One verdict line of a session log: ``good|bad|skip REF [sig=SIGNATURE]  # comment``."""

    verdict: Verdict
    ref: str
    signature: str = ""
    note: str = ""  # why this verdict is forced (e.g. "maintainer verdict by alice in #12")

    def matches(self, c: Candidate) -> bool:
        """True when this line names candidate ``c``: its full ref, a SHA prefix (>= 7 characters)
        or its label (tag, version) or the label's first word (short SHA)."""
        r = self.ref
        if r == c.ref or (len(r) >= 7 and c.ref.startswith(r)):
            return True
        return bool(c.label) and (r == c.label or r == c.label.split()[0])


def parse_replay(text: str, name: str = "<replay>") -> list[LogLine]:
    """Parse a ``bisectbot bisect log`` file. BadInput names the line of a malformed entry."""
    out: list[LogLine] = []
    for no, raw in enumerate(text.splitlines(), 1):
        try:
            parts = shlex.split(raw, comments=True)
        except ValueError as e:
            raise BadInput(f"{name}:{no}: cannot parse: {e}") from None
        if not parts:
            continue
        if parts[0] not in ("good", "bad", "skip") or len(parts) < 2:
            raise BadInput(f"{name}:{no}: expected 'good|bad|skip REF [sig=SIGNATURE]', got {raw.strip()!r}")
        sig = next((p[4:] for p in parts[2:] if p.startswith("sig=")), "")
        out.append(LogLine(Verdict(parts[0]), parts[1], sig))
    return out


def format_log(session: dict[str, Any] | None, events: list[dict[str, Any]]) -> str:
    """A session's events as a readable log whose verdict lines ``--replay`` accepts."""
    lines: list[str] = []
    if session:
        lines.append(f"# bisectbot session {session['id']}: recipe {session['recipe']}, "
                     f"good {session.get('good')}, bad {session.get('bad')}, status {session['status']}")
    for ev in events:
        d, kind = ev["data"], ev["kind"]
        if kind == "start":
            lines.append(f"# {ev['at']} stage {d.get('stage')}: {d.get('n')} candidates, "
                         f"{'noisy' if d.get('noisy') else 'exact'} search")
        elif kind == "resume":
            lines.append(f"# {ev['at']} resumed ({d.get('cached', 0)} probes already done)")
        elif kind == "probe":
            sig = f" sig={shlex.quote(d['signature'])}" if d.get("signature") and d.get("verdict") == "bad" else ""
            thr = d.get("threshold")
            thr_s = f" threshold {thr[0]}..{thr[1]}" if thr else ""
            eff = f" (used as {d['effective']})" if d.get("effective") and d["effective"] != d["verdict"] else ""
            lines.append(f"{d['verdict']} {d['ref']}{sig}  # [{d.get('phase', '')}] {d.get('label', '')}: "
                         f"{d.get('reason', '')}{thr_s}{eff} ({d.get('duration_s', 0):.1f}s)")
        elif kind == "triage":
            lines.append(f"# triage {d.get('toggle')}: {d.get('verdict')} ({d.get('reason', '')})")
        elif kind == "result":
            lines.append(f"# {ev['at']} result of stage {d.get('stage')}: {d.get('status')} "
                         f"{d.get('culprits', '')} confidence {d.get('confidence', 0):.1%} {d.get('message', '')}")
        else:
            lines.append(f"# {ev['at']} {kind}: {json.dumps(d, sort_keys=True)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- prefetch


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


# --------------------------------------------------------------------------- the session


def probe_key(ref: str, build_key: str, reproducer_key: str, toggle: str = "", attempt: int = 1) -> str:
    """Probe cache key: SHA-256 (hex, 32 chars) of candidate, build key, reproducer key, toggle, attempt."""
    blob = f"{ref}|{build_key}|{reproducer_key}|{toggle}|#{attempt}"
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _fmt_thr(thr: tuple[int | None, int | None] | None) -> str:
    if not thr or thr == (None, None):
        return ""
    lo, hi = thr
    return f", threshold {lo if lo is not None else '-'}..{hi if hi is not None else '-'} tokens"


class Session:
    """One ``bisectbot run``. ``echo`` receives progress lines (None: silent).

    ``replay`` forces verdicts per candidate ref (in order) instead of probing.
    ``human`` are maintainers' verdicts (``/bisectbot good|bad REF``, ``retract`` as skip):
    they hold for every probe of the candidates they name and are never overridden by a probe.
    ``base_dir`` resolves relative repository paths of the recipe (its directory).
    """

    def __init__(self, recipe: Recipe, ledger: Ledger, runner: CandidateRunner, *,
                 echo: Echo | None = None, replay: list[LogLine] | None = None,
                 base_dir: Path | None = None, prefetch: bool = True, recipe_path: str = "",
                 human: list[LogLine] | None = None):
        self.recipe = recipe
        self.recipe_path = recipe_path or f"{recipe.name}.yaml"
        self.ledger = ledger
        self.runner = runner
        self.echo: Echo = echo or (lambda s: None)
        self.base_dir = base_dir
        self.repro_key = recipe.verdict_hash()
        self.replay: dict[str, list[LogLine]] = {}
        for ln in replay or []:
            self.replay.setdefault(ln.ref, []).append(ln)
        self.replayed = bool(replay)
        self.human: list[LogLine] = list(human or [])
        # a runner whose prepare is costly to waste (a release download) can opt out of prefetch
        self.prefetch_enabled = prefetch and getattr(runner, "supports_prefetch", True)
        self.fresh_probes = 0  # probes really run (not from cache or replay) in this process
        self.t0 = time.monotonic()
        self.session_id = ""
        self._logged = 0
        self._to_skip_logging = 0

    # ------------------------------------------------------------------ keys and ids
    def _build_key(self, c: Candidate) -> str:
        fn = getattr(self.runner, "build_key", None)
        return fn(c) if callable(fn) else ""

    def _session_id(self, stage: str, good: str, bad: str) -> str:
        human = ",".join(f"{ln.verdict.value}:{ln.ref}" for ln in self.human)
        blob = (f"{self.recipe.name}|{self.repro_key}|{stage}|{good}|{bad}|{'replay' if self.replayed else ''}"
                + (f"|human={human}" if human else ""))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    # ------------------------------------------------------------------ one probe
    def judge(self, prepared: Prepared, env: dict[str, str] | None,
              args: list[str] | None) -> tuple[Judgement, dict[str, Any]]:
        """Run the reproducer on a prepared candidate and decide the verdict (regress mode)."""
        r = self.recipe
        if is_patch_mode(r.regress):
            return judge_patches(r.regress, prepared.patches), {}
        if r.regress.mode == "command":
            if not r.reproducer.command:
                raise BadInput("regress mode 'command' needs reproducer.command (an argv; exit 0 good, "
                               "1..127 bad, 125 skip)")
            run_command = self.runner.run_command
            argv = list(r.reproducer.command) + list(args or [])
            try:
                cr = run_command(prepared, argv, r.reproducer.command_timeout_s, env=env)  # type: ignore[call-arg]
            except TypeError:  # runners without an env argument
                cr = run_command(prepared, argv, r.reproducer.command_timeout_s)
            j = judge_command(cr.returncode, cr.timed_out)
            extra = {"returncode": cr.returncode, "stderr_tail": cr.stderr_tail[-500:]}
            if j.verdict is not Verdict.GOOD and cr.stderr_tail.strip():
                j.reason += ": " + cr.stderr_tail.strip().splitlines()[-1][:200]
            return j, extra
        if r.reproducer.kind == "command":
            from .reproduce.command import search_threshold_command, substitute

            argv0 = list(r.reproducer.command or [])

            def run_size(size: int):  # -> CommandRun
                argv = substitute(argv0, size, prepared.source) + list(args or [])
                try:
                    return self.runner.run_command(prepared, argv, r.reproducer.command_timeout_s,
                                                   env=env)  # type: ignore[call-arg]
                except TypeError:  # runners without an env argument
                    return self.runner.run_command(prepared, argv, r.reproducer.command_timeout_s)

            tr = search_threshold_command(run_size, r.reproducer)
        else:
            from .reproduce.threshold import search_threshold  # the reproducer area (issue 3)

            with self.runner.server(prepared, env=env, args=args) as srv:
                tr = search_threshold(srv.base_url, r.reproducer, model=r.model or None,
                                      timeout_s=r.server.request_timeout_s)
        j = judge_threshold(r.regress, tr.status, tr.last_ok, tr.first_garbage, list(tr.reasons or []), tr.error)
        table = [t.to_dict() if hasattr(t, "to_dict") else t for t in (tr.table or [])]
        return j, {"threshold": (tr.last_ok, tr.first_garbage), "table": table, "requests": tr.requests,
                   "status": tr.status}

    def lookup(self, c: Candidate, attempt: int = 1,
               toggle: TriageToggle | None = None) -> tuple[ProbeResult | None, str, str]:
        """A verdict known without probing: ``(result, origin, cache_key)``; result None when unknown.

        ``origin`` is ``replay`` (forced by the replay log) or ``cache`` (the ledger).
        """
        tname = toggle.name if toggle else ""
        hv = None if toggle else self.human_verdict(c)
        if hv is not None:
            return ProbeResult(c, hv.verdict, reason=hv.note or "maintainer verdict"), "human", ""
        if not toggle and self.replay.get(c.ref):
            ln = self.replay[c.ref].pop(0)
            return ProbeResult(c, ln.verdict, reason="from the replay log", signature=ln.signature), "replay", ""
        key = probe_key(c.ref, self._build_key(c), self.repro_key, tname, attempt)
        cached = self.ledger.get_probe(key)
        if cached is not None:  # same ref and build: the verdict holds, the label is this stage's
            cached.candidate = c
        return cached, "cache", key

    def run_probe(self, c: Candidate, key: str, attempt: int = 1, toggle: TriageToggle | None = None,
                  prefetcher: Prefetcher | None = None) -> ProbeResult:
        """Prepare, reproduce, judge and release one candidate (no ledger access: thread-safe)."""
        t0 = time.monotonic()
        prepared = prefetcher.get(c) if prefetcher else self.runner.prepare(c)
        res = ProbeResult(c, Verdict.SKIP, cache_key=key)
        try:
            if isinstance(prepared, PrepareFailed):
                res.reason = prepared.reason
                res.log_paths = list(prepared.log_paths)
                res.patches = list(prepared.patches)
            else:
                res.patches = list(prepared.patches)
                try:
                    j, extra = self.judge(prepared, toggle.env if toggle else None, toggle.args if toggle else None)
                    res.verdict, res.reason = j.verdict, j.reason
                    res.signature = str(j.signature) if j.signature else ""
                    res.threshold = extra.pop("threshold", None)
                    res.table = extra.pop("table", [])
                    res.extra = extra
                except ServerError as e:
                    res.reason = f"server error, not a verdict: {e}"
                res.log_paths = list(prepared.log_paths)
                res.extra["build_key"] = prepared.build_key
        finally:
            if isinstance(prepared, Prepared):
                self.runner.release(prepared)
        res.duration_s = time.monotonic() - t0
        res.extra["attempt"] = attempt
        if toggle:
            res.extra["toggle"] = toggle.name
        return res

    def probe(self, c: Candidate, attempt: int = 1, toggle: TriageToggle | None = None,
              prefetcher: Prefetcher | None = None) -> tuple[ProbeResult, str]:
        """Probe candidate ``c`` (or take it from the replay file or the cache); store fresh results.

        Returns the result and where it came from: ``probe``, ``cache`` or ``replay``.
        """
        known, origin, key = self.lookup(c, attempt, toggle)
        if known is not None:
            return known, origin
        self.fresh_probes += 1
        res = self.run_probe(c, key, attempt, toggle, prefetcher)
        self.ledger.put_probe(res)
        return res, "probe"

    def probe_many(self, jobs: list[tuple[Candidate, int]], pool: ThreadPoolExecutor) -> list[tuple[ProbeResult, str]]:
        """Probe several candidates at once (k free runners); ledger access stays in this thread."""
        out: list[Any] = []
        for c, a in jobs:
            known, origin, key = self.lookup(c, a)
            out.append((known, origin) if known is not None else pool.submit(self.run_probe, c, key, a))
        results: list[tuple[ProbeResult, str]] = []
        for item in out:
            if isinstance(item, Future):
                res = item.result()
                self.fresh_probes += 1
                self.ledger.put_probe(res)
                results.append((res, "probe"))
            else:
                results.append(item)
        return results

    # ------------------------------------------------------------------ one stage
    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "probe" and self._to_skip_logging > 0:
            self._to_skip_logging -= 1
            return
        self.ledger.log_event(self.session_id, kind, data)

    def search(self, name: str, candidates: list[Candidate], component: str,
               flags_fn: Callable[[Candidate, Candidate], list[str]] | None = None,
               check_boundary: bool = True) -> StageResult:
        """Bisect one ordered candidate list (index 0 good end, last bad end); returns the stage."""
        r = self.recipe
        bs = r.bisect
        noisy = bs.flake.false_positive > 0 or bs.flake.false_negative > 0
        good, bad = candidates[0], candidates[-1]
        self.session_id = self._session_id(name, good.ref, bad.ref)
        cleanup = getattr(self.runner, "cleanup_stale", None)
        if callable(cleanup):
            cleanup()  # worktrees a killed run left behind
        prior = self.ledger.events(self.session_id)
        done_before = sum(1 for e in prior if e["kind"] == "probe")
        self._to_skip_logging = done_before
        self.ledger.save_session(self.session_id, r.name, self.repro_key, good.ref, bad.ref, "running",
                                 {"stage": name, "component": component, "n": len(candidates),
                                  "candidates": [c.ref for c in candidates]})
        if prior:
            self.ledger.log_event(self.session_id, "resume", {"cached": done_before})
            self.echo(f"resuming session {self.session_id}: {done_before} probes already done")
        else:
            self.ledger.log_event(self.session_id, "start", {
                "stage": name, "component": component, "n": len(candidates), "good": good.ref, "bad": bad.ref,
                "noisy": noisy})
        b = Bisection(len(candidates), false_positive=bs.flake.false_positive,
                      false_negative=bs.flake.false_negative, confidence=bs.confidence,
                      max_probes=bs.max_probes, check_boundary=check_boundary, verify=bs.verify)
        self.echo(f"{name}: {len(candidates)} candidates ({component}), good {good.label or good.ref}, "
                  f"bad {bad.label or bad.ref}; ~{b.steps_left()} probes")
        probes: list[ProbeResult] = []
        attempts: dict[int, int] = {}
        prefetcher = Prefetcher(self.runner) if self.prefetch_enabled and bs.parallel == 1 else None
        pool = ThreadPoolExecutor(max_workers=bs.parallel) if bs.parallel > 1 else None
        try:
            while not b.done:
                batch = b.next_probes(bs.parallel)
                if not batch:
                    break
                if prefetcher is not None and len(batch) == 1:
                    nxt = [j for j in b.lookahead(batch[0]).values() if j is not None and j != batch[0]]
                    prefetcher.drop(keep={candidates[i].ref for i in batch + nxt})
                    prefetcher.want([candidates[j] for j in nxt if self._needs_probe(candidates[j], attempts, j)])
                jobs = []
                for i in batch:
                    attempts[i] = attempts.get(i, 0) + 1
                    jobs.append((i, attempts[i]))
                if pool is not None:
                    results = self.probe_many([(candidates[i], a) for i, a in jobs], pool)
                else:
                    results = [self.probe(candidates[i], a, prefetcher=prefetcher) for i, a in jobs]
                for (i, a), (res, origin) in zip(jobs, results):
                    phase = ("boundary" if i in b._ends_left else "verify" if i in b._verify_targets else "search")
                    eff = b.feed(i, res.verdict, res.signature or None)
                    probes.append(res)
                    note = b.history[-1].note
                    self._event("probe", {
                        "index": i, "ref": candidates[i].ref, "label": candidates[i].label, "attempt": a,
                        "verdict": res.verdict.value, "effective": eff.value, "reason": res.reason + (
                            f"; {note}" if note else ""),
                        "signature": res.signature, "threshold": list(res.threshold) if res.threshold else None,
                        "duration_s": round(res.duration_s, 3), "origin": origin, "phase": phase})
                    self._progress(b, candidates[i], res, eff, origin)
        finally:
            if prefetcher is not None:
                prefetcher.close()
            if pool is not None:
                pool.shutdown(wait=True)
        sr = b.result()
        st = StageResult(name=name, component=component, status=sr.status, candidates=list(candidates),
                         probes=probes, confidence=sr.confidence, message=sr.message)
        if sr.last_good is not None:
            st.last_good = candidates[sr.last_good]
        if sr.first_bad is not None:
            st.first_bad = candidates[sr.first_bad]
        st.culprits = [candidates[i] for i in sr.culprits]
        if st.status is Status.CULPRIT and flags_fn and st.first_bad and st.last_good:
            try:
                st.flags = flags_fn(st.first_bad, st.last_good)
            except Exception as e:  # flags are advisory
                log.warning("plausibility flags failed: %s", e)
        self.ledger.log_event(self.session_id, "result", {
            "stage": name, "status": st.status.value, "culprits": [c.ref for c in st.culprits],
            "confidence": st.confidence, "message": st.message, "flags": st.flags})
        self.ledger.save_session(self.session_id, r.name, self.repro_key, good.ref, bad.ref, st.status.value,
                                 {"stage": name, "component": component, "n": len(candidates),
                                  "candidates": [c.ref for c in candidates],
                                  "culprits": [c.ref for c in st.culprits]})
        return st

    def human_verdict(self, c: Candidate) -> LogLine | None:
        """The newest maintainer verdict naming ``c`` (see ``human``), or None."""
        for ln in reversed(self.human):
            if ln.matches(c):
                return ln
        return None

    def _needs_probe(self, c: Candidate, attempts: dict[int, int], i: int) -> bool:
        if self.replay.get(c.ref) or self.human_verdict(c) is not None:
            return False
        key = probe_key(c.ref, self._build_key(c), self.repro_key, "", attempts.get(i, 0) + 1)
        return self.ledger.get_probe(key) is None

    def _progress(self, b: Bisection, c: Candidate, res: ProbeResult, eff: Verdict, origin: str) -> None:
        v = res.verdict.value if eff is res.verdict else f"{res.verdict.value} -> {eff.value}"
        src = "" if origin == "probe" else f" [{origin}]"
        left = b.steps_left()
        self.echo(f"[{b.probes}] {c.label or c.ref}: {v}{_fmt_thr(res.threshold)}; {res.reason} "
                  f"({res.duration_s:.1f}s, elapsed {time.monotonic() - self.t0:.0f}s){src}"
                  + ("" if b.done else f"; ~{left} probe{'' if left == 1 else 's'} left"))

    # ------------------------------------------------------------------ triage
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

    # ------------------------------------------------------------------ components
    def components(self, old: dict[str, str], new: dict[str, str], *, stage1_done: bool = False,
                   repos: dict[str, Any] | None = None, base: Candidate | None = None) -> list[StageResult]:
        """Attribute a regression between two component tuples, then bisect the guilty component.

        ``old``/``new`` map component -> commit (last-good and first-bad). When several
        components changed, the mixed pairs (one component new, the others old) are probed
        first: the component whose change alone is bad is bisected over its first-parent
        commits with the others pinned at ``old``. ``repos`` maps components to
        :class:`bisectbot.sources.git.GitRepo` (default: the runner's ``repos``). ``base`` is
        the last-good nightly when the components live in images: candidates then carry
        ``meta["base"]`` (that image) for overlay builds, and ``ref`` is the overlaid commit.
        """
        from .models import CandidateKind

        repos = repos or getattr(self.runner, "repos", {})
        changed = [c for c in new if old.get(c) != new[c]]
        if not changed:
            return [StageResult("components", "", Status.NO_REGRESSION,
                                message="no component changed between last-good and first-bad")]

        base_img = base.meta.get("image") if base is not None else None

        def combo(commits: dict[str, str], label: str, overlay: str | None = None) -> Candidate:
            if base_img and overlay:  # an overlay of one component's commit on the last-good image
                return Candidate(CandidateKind.COMMIT, commits[overlay], label, overlay,
                                 {"commits": commits, "base": base_img, "base_commit": old.get(overlay)})
            ref = ",".join(f"{k}={v}" for k, v in sorted(commits.items()))
            return Candidate(CandidateKind.COMMIT, ref, label, "+".join(sorted(commits)), {"commits": commits})

        stages: list[StageResult] = []
        guilty = changed
        if len(changed) > 1:
            att = StageResult("attribution", "+".join(changed), Status.INCONCLUSIVE)
            self.session_id = self._session_id("attribution", combo(old, "").ref, combo(new, "").ref)
            self._to_skip_logging = sum(1 for e in self.ledger.events(self.session_id) if e["kind"] == "probe")
            ends = [] if stage1_done else [(combo(old, "all old"), Verdict.GOOD), (combo(new, "all new"), Verdict.BAD)]
            mixes = [(combo({**old, x: new[x]}, f"new {x} + old {', '.join(c for c in changed if c != x)}", x),
                      None) for x in changed]
            bad_alone: list[str] = []
            for (cand, expect), x in zip(ends + mixes, [None] * len(ends) + changed):
                res, origin = self.probe(cand)
                att.probes.append(res)
                self._event("probe", {"ref": cand.ref, "label": cand.label, "verdict": res.verdict.value,
                                      "reason": res.reason, "signature": res.signature, "origin": origin,
                                      "phase": "attribution", "duration_s": round(res.duration_s, 3)})
                self.echo(f"attribution {cand.label}: {res.verdict.value}; {res.reason}")
                if expect is not None and res.verdict is not expect:
                    att.status = Status.BOUNDARY_FAILED
                    att.message = f"{cand.label} is {res.verdict.value}, expected {expect.value}"
                    return [att]
                if x is not None and res.verdict is Verdict.BAD:
                    bad_alone.append(x)
            if len(bad_alone) == 1:
                att.status = Status.CULPRIT
                att.message = f"the regression comes with {bad_alone[0]} alone"
                guilty = bad_alone
            elif not bad_alone:
                att.message = "no single component reproduces alone: the regression needs the changes together"
                return [att]
            else:
                att.message = f"each of {', '.join(bad_alone)} is bad alone; bisecting {bad_alone[0]} first"
                guilty = bad_alone[:1]
            att.confidence = 1.0 if att.status is Status.CULPRIT else 0.0
            stages.append(att)
        g = guilty[0]
        repo = repos[g]
        commits = repo.commits(old[g], new[g], first_parent=True)
        pinned = {k: v for k, v in old.items() if k != g}
        extra = {"base": base_img, "base_commit": old[g]} if base_img else {}
        cands = [Candidate(c.kind, c.ref, c.label, g, {**c.meta, "commits": {g: c.ref, **pinned}, **extra})
                 for c in commits]

        def flags(cul: Candidate, pred: Candidate) -> list[str]:
            src = self.recipe.bisect.components.get(g)
            return plausibility_flags(runtime_paths=src.runtime_paths if src else (),
                                      **repo.plausibility_inputs(cul.ref, pred.ref))

        stages.append(self.search(f"{g} commits", cands, g, flags))
        return stages

    def image_components(self, lg: Candidate, fb: Candidate, result: RunResult) -> list[StageResult]:
        """Diff the last-good and first-bad nightlies; bisect the changed components' commits.

        Components without a git source in ``recipe.bisect.components`` or without a commit
        range in the images are reported in the notes, not bisected.
        """
        from .components import diff_images, image_info
        from .sources.git import GitRepo

        a = image_info(str(lg.meta["image"]), self.ledger)
        b = image_info(str(fb.meta["image"]), self.ledger)
        for comp in ("vllm", "aiter", "torch"):
            if (a.get(comp) or {}).get("version"):
                result.environment[f"{comp} (last good)"] = str(a[comp]["version"])
            if (b.get(comp) or {}).get("version"):
                result.environment[f"{comp} (first bad)"] = str(b[comp]["version"])
        old: dict[str, str] = {}
        new: dict[str, str] = {}
        for ch in diff_images(a, b):
            if not ch.changed:
                continue
            if ch.component not in self.recipe.bisect.components or not ch.range:
                result.notes.append(f"{ch.component} changed ({ch.old} -> {ch.new}) but has no commit stage"
                                    f"{': ' + ch.note if ch.note else ''}")
                continue
            old[ch.component], new[ch.component] = ch.range
        if not old:
            return []
        repos = {c: GitRepo(self.recipe.bisect.components[c].repo, c) for c in old}
        for c in old:  # resolve refs (tags, short SHAs) to full commits in the clones
            old[c], new[c] = repos[c].resolve(old[c]), repos[c].resolve(new[c])
        return self.components(old, new, stage1_done=True, repos=repos, base=lg)

    # ------------------------------------------------------------------ whole run
    def run(self, good: str | None = None, bad: str | None = None,
            source: CandidateSource | None = None) -> RunResult:
        """Stage 1 over the recipe's source (plus the component stage when possible), triage, result."""
        r = self.recipe
        good = good or r.bisect.good
        bad = bad or r.bisect.bad
        if (not good or not bad) and r.source.kind != "git":
            source = source or make_source(r, self.base_dir, self.ledger)
            good, bad = resolve_ends(r, good, bad, source)
        if not good or not bad:
            raise BadInput("a bisection needs a good and a bad end: --good/--bad or bisect.good/bisect.bad "
                           "in the recipe")
        result = self._new_result()
        if "=" in good or "=" in bad:
            old, new = parse_pins(good), parse_pins(bad)
            result.stages = self.components(old, new)
        else:
            source = source or make_source(r, self.base_dir, self.ledger)
            cands = source.candidates(good, bad)
            st = self.search("stage 1", cands, source.component, source.flags)
            result.stages.append(st)
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
        return self._finish_result(result)

    def _new_result(self) -> RunResult:
        r = self.recipe
        return RunResult(recipe=r.name, kind="fix" if r.regress.is_fix else "regression", status=Status.INCONCLUSIVE,
                         model=r.model, tp=r.tp, runner=r.runner, regress=str(r.regress),
                         patch_stack=[{"id": p} for p in r.patches])

    def _finish_result(self, result: RunResult) -> RunResult:
        final = result.final
        assert final is not None
        result.status = final.status
        result.session_id = self.session_id
        fill_patch_states(result)
        if (final.status is Status.CULPRIT and final.message == "" and final.first_bad
                and is_patch_mode(self.recipe.regress)):
            # which release, which patch state: the report's headline for patch questions
            final.message = patch_summary(final, self.recipe.regress)
        ok, why = may_blame(final.status, final.confidence, final.flags, self.recipe.bisect.blame_confidence)
        result.notes.append(("may blame: " if ok else "will not blame: ") + why)
        if final.last_good and final.first_bad:
            result.reproduce = (f"bisectbot run {shlex.quote(self.recipe_path)} "
                                f"--good {shlex.quote(final.last_good.ref)} --bad {shlex.quote(final.first_bad.ref)}")
        if self.fresh_probes == 0 and not self.replayed:
            result.notes.append("every verdict came from the probe cache")
        return result


def fill_patch_states(result: RunResult) -> None:
    """Give each ``result.patch_stack`` entry (``{"id"}``) the patch's state on the final stage's
    first-bad candidate (``state``: e.g. ``applies [variant v1]``, ``detail``), taken from that
    candidate's probe (``ProbeResult.patches``). Entries stay as they are when no probe has them."""
    final = result.final
    if final is None or final.first_bad is None or not result.patch_stack:
        return
    recs: dict[str, dict[str, Any]] = {}
    for p in reversed(final.probes):
        if p.candidate.ref == final.first_bad.ref and p.patches:
            recs = {str(x.get("id")): x for x in p.patches}
            break
    where = final.first_bad.label or final.first_bad.ref
    for entry in result.patch_stack:
        rec = recs.get(str(entry.get("id")))
        if rec and not entry.get("state"):
            entry["state"] = str(rec.get("label") or rec.get("state") or "")
            entry["detail"] = str(rec.get("detail") or f"on first bad {where}")


def parse_pins(text: str) -> dict[str, str]:
    """``vllm=SHA,aiter=SHA`` -> ``{"vllm": "SHA", "aiter": "SHA"}``; BadInput when malformed."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, eq, ref = part.partition("=")
        if not eq or not name.strip() or not ref.strip():
            raise BadInput(f"expected component=commit[,component=commit], got {text!r}")
        out[name.strip()] = ref.strip()
    return out


# --------------------------------------------------------------------------- report


def exit_code(result: RunResult) -> int:
    """0 culprit found, 3 anything else (range, inconclusive, boundary failed, no regression)."""
    from .errors import EXIT_INCONCLUSIVE, EXIT_OK

    return EXIT_OK if result.status is Status.CULPRIT else EXIT_INCONCLUSIVE


def patch_summary(stage: StageResult, regress: Any) -> str:
    """``first-bad: vllm 0.23.0 (vllm-sparse-mla-workspace already upstream); last-good: vllm 0.22.1``.

    For a patch regress mode: the patch's state on the first-bad candidate comes from its
    probe (``ProbeResult.patches``).
    """
    pid = str(getattr(regress, "arg", "") or str(regress).partition(":")[2].strip())
    fb, lg = stage.first_bad, stage.last_good
    state = ""
    for p in reversed(stage.probes):
        if fb is not None and p.candidate.ref == fb.ref and p.verdict is Verdict.BAD:
            st = next((x for x in p.patches if x.get("id") == pid), None)
            if st:
                state = f" ({pid} {st.get('label') or st.get('state')})"
            break
    out = f"first-bad: {fb.label or fb.ref if fb else '-'}{state}"
    if lg is not None:
        out += f"; last-good: {lg.label or lg.ref}"
    return out


def write_report(result: RunResult, out_dir: str | Path, blame_confidence: float = 0.66,
                 mentions: list[str] | None = None) -> list[Path]:
    """Write a run's result into ``out_dir``: ``result.json`` (:meth:`RunResult.to_dict`) and,
    through :func:`bisectbot.report.write_report` (Jinja2 templates), ``report.md``,
    ``report.json``, the would-be GitHub issue ``issue.md`` and, in GitHub Actions, the job
    summary. Returns the paths written. Raises ``OSError`` when a file cannot be written.

    The one place where a run's result is written. ``blame_confidence`` (0..1, recipe
    ``bisect.blame_confidence``): below it the issue names a range, not a culprit.
    """
    from .report import write_report as render_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jp = out / "result.json"
    jp.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths = render_report(result, out, nightly_history(result), mentions=mentions or (),
                          blame_confidence=blame_confidence)
    return [jp, *paths.all()]


def nightly_history(result: RunResult):  # -> bisectbot.report.NightlyResult | None
    """The nightlies stage 1 probed, oldest first, one probe each (the last): the input of the
    report's nightly status (first bad / last good nightly, flips) and threshold-over-nightlies
    chart. None when stage 1 was not over nightlies."""
    from .models import CandidateKind
    from .report import NightlyResult

    if not result.stages or not result.stages[0].candidates:
        return None
    st = result.stages[0]
    if st.candidates[0].kind is not CandidateKind.NIGHTLY:
        return None
    last: dict[str, ProbeResult] = {}
    for p in st.probes:
        if p.verdict is not Verdict.SKIP or p.candidate.ref not in last:
            last[p.candidate.ref] = p
    probes = [last[c.ref] for c in st.candidates if c.ref in last]
    below = None
    if result.regress.startswith("threshold-below"):
        with contextlib.suppress(ValueError):
            below = int(result.regress.split(":", 1)[1])
    return NightlyResult(recipe=result.recipe, probes=probes, kind=result.kind, regress=result.regress,
                         threshold_below=below)


def plan_text(recipe: Recipe, candidates: list[Candidate], k: int = 1) -> str:
    """The ``--dry-run`` plan: range size, search mode, the first probes and what comes next."""
    bs = recipe.bisect
    b = Bisection(len(candidates), false_positive=bs.flake.false_positive,
                  false_negative=bs.flake.false_negative, confidence=bs.confidence,
                  max_probes=bs.max_probes, verify=bs.verify)
    noisy = not b.exact
    lines = [f"plan: {len(candidates)} candidates from {candidates[0].label} (good) to {candidates[-1].label} (bad)",
             f"search: {'noisy (Bayesian, confidence ' + format(bs.confidence, '.0%') + ')' if noisy else 'exact'}"
             f", ~{b.steps_left()} probes, budget {bs.max_probes}, {k} at a time",
             f"regress: {recipe.regress}; reproducer key {recipe.verdict_hash()}"]
    # the boundary probes, assumed to come out as expected, then the first search probes
    step = 0
    while not b.done and step < 3:
        batch = b.next_probes(k)
        if not batch:
            break
        for i in batch:
            expect = Verdict.BAD if i == len(candidates) - 1 else Verdict.GOOD if i == 0 else None
            if expect is None:
                la = b.lookahead(i)
                nxt = ", ".join(f"if {v.value}: {candidates[j].label}" for v, j in la.items() if j is not None)
                lines.append(f"probe {candidates[i].label}   (next {nxt})")
            else:
                lines.append(f"probe {candidates[i].label}   (boundary: expect {expect.value})")
                b.feed(i, expect)
        if any(i not in (0, len(candidates) - 1) for i in batch):
            break
        step += 1
    return "\n".join(lines)


__all__ = [
    "CandidateSource", "GitCandidates", "LogLine", "Prefetcher", "Session", "exit_code", "fill_patch_states",
    "format_log",
    "make_source", "parse_pins", "parse_replay", "patch_summary", "plan_text", "probe_key", "register_source",
    "resolve_ends",
    "nightly_history", "write_report",
]
