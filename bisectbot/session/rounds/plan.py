"""Round commands: plan a round from the ledger, write a verdict file anywhere, import it.

The state between calls is the ledger only. :func:`plan_round` replays the session
(:class:`bisectbot.session.Session` with a :class:`PlanningExecutor`): every verdict the
ledger holds is fed again, and the first round that needs a probe the ledger lacks stops
the replay; its missing probes are the plan. The search is deterministic given the
verdicts, so the round number (rounds so far, cached ones included) and the probe keys
are the same in every call until new verdicts are imported. A probe that never came
back is simply still missing: the next plan names it again.

:func:`make_verdict` turns one probe (run by ``bisectbot round probe``, no ledger) into a
verdict file; :func:`import_verdicts` records verdict files, idempotent by probe key, and
refuses (naming file and reason) a file of another session, another recipe hash, a stale
round or a probe that was not planned.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import jsonio as _jsonio
from ...errors import BadInput
from ...models import Candidate, CandidateKind, ProbeResult, PromptKey, Verdict
from ...recipe import Recipe
from ...run.probe import ProbeJob

VERDICT_FORMAT = "bisectbot-verdict/1"

#: Transient answers (server 5xx, connection refused) one probe key may give in a round session
#: before it is recorded as a skip: each retry is a round of GPU jobs, and a server that always
#: answers 500 made every plan the same round forever (issue 24, input 4). ``run`` feeds a
#: transient error as a skip within its one run; a round session keeps the count in its events.
TRANSIENT_LIMIT = 2


def rounds_session_id(recipe: Recipe, good: str, bad: str) -> str:
    """The id of a round-driven session: SHA-256 (hex, 12 chars) of recipe name, reproducer key
    (``recipe.verdict_hash()``) and the good/bad ends as given."""
    blob = f"rounds|{recipe.name}|{recipe.verdict_hash()}|{good}|{bad}"
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def plan_ref(c: Candidate) -> str:
    """The ref a plan prints and ``round probe --ref`` takes: the candidate's ref, or for a
    candidate of pinned component commits ``comp=SHA,comp=SHA`` (sorted)."""
    commits = c.meta.get("commits") if isinstance(c.meta, dict) else None
    if commits and (len(commits) > 1 or "=" in c.ref):
        return ",".join(f"{k}={v}" for k, v in sorted(commits.items()))
    return c.ref


class RoundPending(Exception):  # noqa: N818 -- control flow, not an error
    """Raised by :class:`PlanningExecutor`: the replay reached a round with missing probes."""

    def __init__(self, jobs: list[ProbeJob]):
        super().__init__(f"{len(jobs)} probes to run")
        self.jobs = jobs


class PlanningExecutor:
    """An executor that runs nothing: the first batch with a missing probe raises :class:`RoundPending`.
    ``runs_probes`` False: the run's reference is not started here either (issue 23, input 7,
    :func:`bisectbot.session.probing.oracles.reference_up`)."""

    runs_probes = False

    def __init__(self, slots: int):
        self.slots = max(1, slots)

    def run(self, jobs: list[ProbeJob]) -> Iterator[tuple[int, ProbeResult]]:
        if jobs:
            raise RoundPending(jobs)
        return iter(())

    def prefetch(self, keep: list[Candidate], want: list[Candidate]) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class RoundPlan:
    """One ``round plan`` answer (see :meth:`to_dict` for the printed JSON document)."""

    session: str
    round: int
    done: bool
    jobs: list[ProbeJob] = field(default_factory=list)
    result: str | None = None
    status: str = ""
    #: probe keys of each round so far, this one included (cached ones too; not printed): a file
    #: already recorded is a repeated import of a planned probe only when its round planned its key
    planned: dict[int, set[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"session", "round", "done", "probes": [{"ref", "component", "key", "focus", ...}], "result"}``:
        ``result`` is the path of ``result.json`` once done (else None). A probe's ``focus`` is the
        list of sizes (tokens) where the search's bad end failed, for ``round probe --focus`` (its
        threshold search asks them first, issue 23); ``[]`` before the bad end's verdict is known
        and for reproducers without sizes."""
        return {"session": self.session, "round": self.round, "done": self.done, "result": self.result,
                "status": self.status,
                "probes": [{"ref": plan_ref(j.candidate), "component": j.candidate.component, "key": j.key,
                            "label": j.candidate.label, "attempt": j.attempt,
                            "toggle": j.toggle.name if j.toggle else "",
                            "focus": [PromptKey.parse(k).json for k in j.focus]}
                           for j in self.jobs]}


def plan_round(session: Any, good: str, bad: str, session_id: str, slots: int) -> tuple[RoundPlan, Any]:
    """Replay ``session`` (a :class:`Session` whose executor is a :class:`PlanningExecutor`)
    from the ledger. Returns the plan and, when done, the :class:`RunResult` (else None)."""
    session.log_resume = False
    session.prober.round_session = session_id  # its own verdicts are not "cached" ones (issue 23, input 3)
    try:
        result = session.run(good, bad)
    except RoundPending as p:
        return RoundPlan(session_id, session.round_no, False, p.jobs, planned=session.prober.round_keys), None
    return RoundPlan(session_id, session.round_no, True, status=result.status.value,
                     planned=session.prober.round_keys), result


# --------------------------------------------------------------------------- verdict files


def make_verdict(res: ProbeResult, *, session: str, round_no: int | None, key: str, ref: str,
                 recipe: Recipe, attempt: int, toggle: str, runner: str, started: float,
                 focus: tuple[int, ...] | list[int] = ()) -> dict[str, Any]:
    """The verdict file of one probe: probe key, verdict, threshold table, evidence (reason,
    signature, logs, patch states), runner name, timings (POSIX seconds and ISO UTC) and the
    focus sizes (tokens) its threshold search asked first (``[]``: none; issue 23)."""
    fin = time.time()
    return {
        "format": VERDICT_FORMAT, "session": session, "round": round_no, "key": key, "ref": ref,
        "recipe": recipe.name, "recipe_hash": recipe.verdict_hash(), "attempt": attempt, "toggle": toggle,
        "focus": [PromptKey.parse(x).json for x in focus],
        "verdict": res.verdict.value, "reason": res.reason, "signature": res.signature,
        "threshold": list(res.threshold) if res.threshold else None, "table": res.table,
        "evidence": {"log_paths": res.log_paths, "patches": res.patches, "extra": res.extra},
        "runner": runner or socket.gethostname(),
        "timings": {"started": _iso(started), "finished": _iso(fin), "duration_s": round(res.duration_s, 3)},
        "probe": res.to_dict(),
    }


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def read_verdict(path: Path, digests: dict[str, str] | None = None) -> dict[str, Any]:
    """Load and check a verdict file (:mod:`.verdict_file`: a regular file under the size cap).
    ``digests`` (``{file name: sha256}``, from the probe jobs): the file's SHA-256 must match its
    entry. Refused: a file whose top-level ``verdict`` differs from its probe record's (issue 24,
    input 3). BadInput names the file and what is wrong."""
    from .verdict_file import read_verdict_bytes, sha256

    raw = read_verdict_bytes(Path(path))
    if digests is not None:
        want = digests.get(Path(path).name)
        if want is None:
            raise BadInput(f"{path}: no digest from the probe job for this file: refused")
        if sha256(raw) != want:
            raise BadInput(f"{path}: SHA-256 {sha256(raw)[:16]}... differs from the probe job's {want[:16]}... "
                           "(the file changed after the probe wrote it): refused")
    try:
        d = _jsonio.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise BadInput(f"{path}: not a JSON verdict file: {str(e)[:200]}") from None
    if not isinstance(d, dict) or d.get("format") != VERDICT_FORMAT:
        raise BadInput(f"{path}: not a bisectbot verdict file (format {VERDICT_FORMAT!r} expected)")
    for k in ("session", "key", "ref", "recipe_hash", "verdict", "probe"):
        if not d.get(k):
            raise BadInput(f"{path}: verdict file has no {k!r}")
        if k != "probe" and not isinstance(d[k], str):
            raise BadInput(f"{path}: {k!r} is not a string")
    for k, typ in (("runner", str), ("timings", dict), ("probe", dict)):
        if d.get(k) is not None and not isinstance(d[k], typ):
            raise BadInput(f"{path}: {k!r} is not a {'string' if typ is str else 'JSON object'}")
    if d["verdict"] not in {v.value for v in Verdict}:
        raise BadInput(f"{path}: verdict {d['verdict']!r} is not good, bad or skip")
    if d.get("round") is not None and not isinstance(d["round"], int):
        raise BadInput(f"{path}: round {d['round']!r} is not a number")
    focus = d.get("focus")  # absent in files of a bisectbot before issue 23's rounds: no focus was asked
    if focus is not None and (not isinstance(focus, list) or not all(_is_prompt(x) for x in focus)):
        raise BadInput(f"{path}: focus {str(focus)[:80]} is not a list of prompts (sizes in tokens, or N@seedSwW)")
    probe = d["probe"]
    if not isinstance(probe, dict) or probe.get("verdict") != d["verdict"]:
        inner = probe.get("verdict") if isinstance(probe, dict) else None
        raise BadInput(f"{path}: the file's two verdicts differ (verdict {d['verdict']!r}, probe record "
                       f"{inner!r}): refused")
    if probe.get("cache_key") not in (None, "", d["key"]):
        raise BadInput(f"{path}: the probe record is of key {str(probe.get('cache_key'))[:40]!r}, the file says "
                       f"{str(d['key'])[:40]!r}: refused")
    return d


@dataclass
class ImportOutcome:
    """Per file: ``recorded``, ``already recorded``, ``not recorded`` (a transient error) or
    ``refused`` with the reason."""

    path: str
    action: str
    message: str
    key: str = ""
    #: the session moved: a verdict recorded, or a transient answer counted towards its skip; for
    #: ``already recorded``: the probe its round planned (a repeated import, see :func:`made_progress`)
    progress: bool = False


def import_verdicts(ledger: Any, plan: RoundPlan, recipe: Recipe, files: list[Path],
                    digests: dict[str, str] | None = None) -> list[ImportOutcome]:
    """Record verdict files for the pending round ``plan`` (from :func:`plan_round`).

    Idempotent by probe key: a key the ledger already holds is ``already recorded``. A file
    of another session or recipe hash, of a stale round, or for a probe the plan does not
    name is ``refused`` (nothing stored from it), and so is each unreadable, malformed, oversized
    or non-regular file and, with ``digests``, a file whose SHA-256 is not the probe job's
    (:func:`read_verdict`), and a file probed with other focus sizes than the plan's (issue 23:
    its key claims them). A planned re-probe (``ProbeJob.again``) replaces the key's cached skip.
    Each recorded verdict carries ``extra["round_session"]`` (:meth:`Prober.answered_here`).
    Files that pass are stored together.
    """
    pending = {j.key: j for j in ([] if plan.done else plan.jobs)}
    out: list[ImportOutcome] = []
    store: list[ProbeResult] = []
    seen: set[str] = set()
    for f in files:
        try:
            d = read_verdict(f, digests)
        except BadInput as e:
            out.append(ImportOutcome(str(f), "refused", str(e)))
            continue
        key = str(d["key"])
        if d["session"] != plan.session:
            out.append(ImportOutcome(str(f), "refused", f"{f}: verdict of session {d['session']}, not "
                                     f"{plan.session}", key))
            continue
        if d["recipe_hash"] != recipe.verdict_hash():
            out.append(ImportOutcome(str(f), "refused", (
                f"{f}: probed with recipe hash {d['recipe_hash']}, but {recipe.name} now has "
                f"{recipe.verdict_hash()} (the recipe's reproducer changed): probe again"), key))
            continue
        job = pending.get(key)
        if key in seen or (ledger.get_probe(key) is not None and not (job is not None and job.again)):
            # (a planned re-probe of a cached skip at an end replaces that skip: issue 23, input 3)
            rnd = d.get("round")
            planned = isinstance(rnd, int) and key in plan.planned.get(rnd, ())
            out.append(ImportOutcome(str(f), "already recorded", f"{f}: probe {key} already recorded" + (
                f" (planned in round {rnd})" if planned else
                f"; no round planned it as this file says (attempt {d.get('attempt')} of {d['ref'][:40]}, round "
                f"{rnd if rnd is not None else 'not given'}; e.g. a 'round probe' by hand without the plan's key and "
                "attempt)"),
                key, progress=planned))
            continue
        rnd = d.get("round")
        if job is None:
            why = (f"round {rnd} is stale (the session is at round {plan.round})"
                   if rnd is not None and rnd != plan.round else
                   f"probe {key} ({d['ref']}) is not planned in round {plan.round}"
                   + (" (the session is done)" if plan.done else ""))
            out.append(ImportOutcome(str(f), "refused", f"{f}: {why}", key))
            continue
        if rnd is not None and rnd != plan.round:  # the probe is planned, but not in the round the file names
            out.append(ImportOutcome(str(f), "refused", (
                f"{f}: round {rnd} is stale: the file says round {rnd} ('round probe --round {rnd}'), the session "
                f"is at round {plan.round}, which plans probe {key} ({d['ref'][:40]}): probe again with "
                f"--round {plan.round}, or without --round (the plan's round where this ledger is)"), key))
            continue
        if d["ref"] != plan_ref(job.candidate):
            out.append(ImportOutcome(str(f), "refused", f"{f}: probe {key} is of {plan_ref(job.candidate)}, "
                                     f"the file says {d['ref']}", key))
            continue
        got = tuple(PromptKey.parse(x) for x in d.get("focus") or ())
        if got != tuple(PromptKey.parse(x) for x in job.focus):
            # the key says "asked first where the bad end fails"; a file probed otherwise claims
            # what it did not test (issue 23: a crash at the largest sizes read as a skip)
            out.append(ImportOutcome(str(f), "refused", f"{f}: {d['ref'][:40]} "
                                     + focus_mismatch(got, tuple(job.focus), plan.round), key))
            continue
        try:
            res = ProbeResult.from_dict(d["probe"])
        except (KeyError, TypeError, ValueError) as e:
            out.append(ImportOutcome(str(f), "refused", f"{f}: malformed probe record: {e}", key))
            continue
        if res.extra.get("transient"):  # a transient error is no verdict: the probe stays planned ...
            tlog = f"{plan.session}:transient"  # its own event stream: the stages' logs stay as they were
            seen_before = {e["data"].get("file_key") for e in ledger.events(tlog)
                           if e["kind"] == "transient" and e["data"].get("key") == key}
            fkey = f"{d.get('attempt')}|{d.get('runner', '')}|{(d.get('timings') or {}).get('finished', '')}"
            count = len(seen_before | {fkey})
            if fkey not in seen_before:
                ledger.log_event(tlog, "transient", {"key": key, "file_key": fkey, "reason": res.reason[:200]})
            if count < TRANSIENT_LIMIT:
                out.append(ImportOutcome(str(f), "not recorded", f"{f}: transient error {count} of {TRANSIENT_LIMIT}, "
                                         f"not a verdict ({res.reason[:120]}); the next plan names the probe again",
                                         key, progress=fkey not in seen_before))
                continue
            # ... until TRANSIENT_LIMIT of them: then it is a recorded skip, as within one `run`
            res.extra = {k: v for k, v in res.extra.items() if k != "transient"}
            res.reason = f"{TRANSIENT_LIMIT} transient errors, recorded as a skip: {res.reason}"[:400]
            d = {**d, "verdict": Verdict.SKIP.value}
        res.candidate = job.candidate
        res.verdict = Verdict(d["verdict"])
        res.cache_key = key
        res.extra = {**res.extra, "runner": d.get("runner", ""), "timings": d.get("timings", {}),
                     "imported_from": Path(f).name, "round_session": plan.session}
        store.append(res)
        seen.add(key)
        out.append(ImportOutcome(str(f), "recorded", f"{f}: {d['ref'][:40]} {res.verdict.value} "
                                 f"(round {plan.round}, runner {d.get('runner', '?')})"
                                 + (f"; {res.reason[:80]}" if res.reason.startswith(f"{TRANSIENT_LIMIT} transient")
                                    else ""), key, progress=True))
    if store:
        ledger.put_probes(store)
    return out


def _is_prompt(x: Any) -> bool:
    """True when ``x`` is a focus prompt as files hold it (:attr:`PromptKey.json`)."""
    try:
        PromptKey.parse(x)
    except ValueError:
        return False
    return True


def focus_mismatch(got: tuple[Any, ...], want: tuple[Any, ...], round_no: int) -> str:
    """Why a verdict file probed asking sizes ``got`` (tokens) first is refused where round ``round_no``
    plans ``want``, and what to run instead (issue 24: after ``round probe --focus ""`` the message
    blamed a missing --focus, the very thing that would have taken the plan's)::

        probed with focus none (--focus '', ...), but round 2 plans focus 1021,2001: probe again ...
    """
    def name(sizes: tuple[Any, ...]) -> str:
        return ",".join(map(str, sizes)) if sizes else "none"

    how = ("--focus '', or no ledger with the plan where it ran, or a bisectbot before focus sizes" if not got
           else f"--focus {name(got)}")
    fix = ("probe again without --focus where this ledger is (the plan's focus is the default) or with "
           f"--focus {name(want)} (where the bad end fails)") if want else \
        "probe again without --focus (or with --focus '')"
    return f"probed with focus {name(got)} ({how}), but round {round_no} plans focus {name(want)}: {fix}"


def made_progress(outcomes: list[ImportOutcome]) -> bool:
    """Whether an import (its :class:`ImportOutcome` list) moved its round:
    a verdict recorded or a transient answer counted now, or -- when no file is refused -- files
    already recorded that are the probes their round planned (a repeated import of a round that an
    earlier import recorded: a re-run of reduce, issue 24). Files already recorded that no round
    planned as they say (a hand-run probe of attempt 1 where attempt 2 was planned) never count."""
    if any(o.progress and o.action != "already recorded" for o in outcomes):
        return True
    return any(o.progress for o in outcomes) and not any(o.action == "refused" for o in outcomes)


def candidate_for(recipe: Recipe, ref: str, base_dir: Path | None = None) -> Candidate:
    """The candidate named by a plan's ``ref`` (:func:`plan_ref`), built from the recipe alone
    (no ledger): a commit of the git source, a nightly digest of the registry source, or
    pinned component commits ``comp=SHA,...``. BadInput when the ref cannot be resolved."""
    if "=" in ref:
        from ...pins import parse_pins

        pins = parse_pins(ref)
        return Candidate(CandidateKind.COMMIT, ref, ref, "+".join(sorted(pins)), {"commits": pins})
    kind = recipe.source.kind
    if kind == "git":
        from ..sources import GitCandidates

        return GitCandidates(recipe.source, base_dir).repo.candidate(ref)  # type: ignore[arg-type]
    if kind == "registry":
        from ...sources.registry import image_ref

        src = recipe.source
        img = image_ref(src.registry, src.repository, ref)  # type: ignore[union-attr]
        return Candidate(CandidateKind.NIGHTLY, ref, ref, "image", {"image": img, "tag": ""})
    raise BadInput(f"round probe: source kind {kind!r} is not supported (git, registry, component pins)")
