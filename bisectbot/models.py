"""Plain data passed between the stages of the pipeline.

Vocabulary (the field's terms): a *candidate* is one thing that can be probed
(a nightly image digest, a release, a commit); a *probe* runs the reproducer
against one candidate and yields a *verdict* (good / bad / skip); the search
ends at a *culprit* (first-bad) next to the *last-good* candidate.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from typing import Any

from .secrets import redact_data


class Verdict(str, enum.Enum):
    """Outcome of one probe of one candidate, as the bisection sees it."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"  # untestable: build failed, patch conflict, server never healthy


class Outcome(str, enum.Enum):
    """Outcome of one reproducer request (one prompt size) against a running server."""

    OK = "OK"
    GARBAGE = "GARBAGE"
    ERROR = "ERROR"  # HTTP error, timeout, dead server, context-length rejection
    INCONCLUSIVE = "INCONCLUSIVE"  # e.g. cut off by max_tokens inside the reasoning


@dataclass(frozen=True)
class PromptKey:
    """The identity of one prompt a probe sent (issue 35): what makes its text, so that two
    candidates asked the same key were asked the same question.

    A prompt of the HTTP reproducer is its filler ``seed`` and its number of filler ``words``
    (with the recipe's question and needle count, fixed by the reproducer key):
    :func:`bisectbot.reproduce.prompts.build_messages` of them is the text, whatever a
    candidate's tokenizer then counts. ``requested`` is the size (tokens) it was built for, a
    label only. A command reproducer's prompt is its ``{size}`` (``seed``/``words`` None; the
    argv is the recipe's). The per-request ``cache_salt`` is recorded with each size
    (``evidence["prefix_cache"]``) and is no part of the identity: it only keeps the prefill cold.
    """

    requested: int
    seed: int | None = None
    words: int | None = None

    @property
    def identity(self) -> tuple[Any, ...]:
        """What equal prompts share: ``(seed, words)``, or ``("size", requested)`` for a command's."""
        return (self.seed, self.words) if self.words is not None else ("size", self.requested)

    def __str__(self) -> str:
        return str(self.requested) if self.words is None else f"{self.requested}@seed{self.seed}w{self.words}"

    def text(self) -> str:
        """For messages: ``requested 21859 tokens (seed 0, 16,210 filler words)`` or ``{size} 21859``."""
        if self.words is None:
            return f"{{size}} {self.requested}"
        return f"requested {self.requested} tokens (filler seed {self.seed}, {self.words} words)"

    @property
    def json(self) -> int | str:
        """As a plan or verdict file holds it: the int of a size, else :meth:`__str__` (``parse`` reads both)."""
        return self.requested if self.words is None else str(self)

    @classmethod
    def parse(cls, x: Any) -> PromptKey:
        """A key from :attr:`json` (or a :class:`PromptKey`); ValueError for anything else."""
        import re

        if isinstance(x, PromptKey):
            return x
        if isinstance(x, int) and not isinstance(x, bool) and x > 0:
            return cls(x)
        m = re.fullmatch(r"([0-9]+)(?:@seed(-?[0-9]+)w([0-9]+))?", str(x).strip()) if isinstance(x, str) else None
        if m is None or int(m.group(1)) <= 0:
            raise ValueError(f"{str(x)[:80]!r} is not a prompt (N or N@seedSwW)")
        return cls(int(m.group(1)), int(m.group(2)) if m.group(2) else None, int(m.group(3)) if m.group(3) else None)

    @classmethod
    def of_row(cls, row: Any, default_seed: int | None = None) -> PromptKey | None:
        """The key of a size row (``SizeResult.to_dict()`` shape or a ``SizeResult``): ``requested``
        with the ``prompt_seed``/``prompt_words`` its evidence recorded (``default_seed`` for rows
        recorded before the seed was); None when the row has no requested size."""
        d = row.to_dict() if hasattr(row, "to_dict") else row
        if not isinstance(d, dict) or not isinstance(d.get("requested"), int):
            return None
        ev = d.get("evidence") if isinstance(d.get("evidence"), dict) else {}
        words = ev.get("prompt_words")
        if not isinstance(words, int):
            return cls(int(d["requested"]))
        seed = ev.get("prompt_seed", default_seed)
        conf = ev.get("confirmation")
        if "prompt_seed" not in ev and isinstance(conf, str) and conf.startswith("seed "):
            seed = int(conf[5:]) if conf[5:].isdigit() else None  # rows recorded before prompt_seed
        return cls(int(d["requested"]), int(seed) if isinstance(seed, int) else None, words)


class CandidateKind(str, enum.Enum):
    NIGHTLY = "nightly"
    RELEASE = "release"
    COMMIT = "commit"


@dataclass(frozen=True)
class Candidate:
    """One probe-able point of history.

    ``ref`` is the stable identity (image digest, release version, commit SHA);
    ``label`` is what a human reads (tag, version, short SHA + subject).
    ``component`` names what varies along this list (``vllm``, ``aiter``, ``base``,
    ``image``, a package name, or a git repository name).
    """

    kind: CandidateKind
    ref: str
    label: str = ""
    component: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``kind`` as its value; ``meta`` copied). Hand-written rather than
        ``dataclasses.asdict``, which deep-copies field by field: 50,000 candidates of a
        ``run --dry-run --json`` took 7 s that way (issue 15)."""
        return {"kind": self.kind.value, "ref": self.ref, "label": self.label, "component": self.component,
                "meta": {k: (copy.deepcopy(v) if isinstance(v, (dict, list, tuple, set)) else v)
                         for k, v in self.meta.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        return cls(kind=CandidateKind(d["kind"]), ref=d["ref"], label=d.get("label", ""),
                   component=d.get("component", ""), meta=dict(d.get("meta") or {}))


@dataclass
class ProbeResult:
    """What one probe of one candidate found.

    ``threshold`` is ``[last_ok, first_garbage]`` in prompt **tokens** (either end may be
    ``None`` when not measured). ``signature`` is the failure signature that the
    bisection compares across bad probes (regress mode, threshold band, reasons).
    ``duration_s`` is wall time in seconds.
    """

    candidate: Candidate
    verdict: Verdict
    reason: str = ""
    threshold: tuple[int | None, int | None] | None = None
    signature: str = ""
    table: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    log_paths: list[str] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)
    cache_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; every string passes :func:`bisectbot.secrets.redact` (results are stored
        in the ledger and in ``result.json`` artifacts, and carry text printed by candidates)."""
        return redact_data({
            "candidate": self.candidate.to_dict(),
            "verdict": self.verdict.value,
            "reason": self.reason,
            "threshold": list(self.threshold) if self.threshold is not None else None,
            "signature": self.signature,
            "table": self.table,
            "duration_s": self.duration_s,
            "log_paths": self.log_paths,
            "patches": self.patches,
            "cache_key": self.cache_key,
            "extra": self.extra,
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeResult:
        thr = d.get("threshold")
        return cls(
            candidate=Candidate.from_dict(d["candidate"]),
            verdict=Verdict(d["verdict"]),
            reason=d.get("reason", ""),
            threshold=(thr[0], thr[1]) if thr is not None else None,
            signature=d.get("signature", ""),
            table=list(d.get("table") or []),
            duration_s=float(d.get("duration_s") or 0.0),
            log_paths=list(d.get("log_paths") or []),
            patches=list(d.get("patches") or []),
            cache_key=d.get("cache_key", ""),
            extra=dict(d.get("extra") or {}),
        )


FULL_RANGE_MAX = 64
"""A stage's candidates are listed in full in ``result.json`` up to this many (a demo, a nightly
week, a release series); a longer range keeps its ends, the probed candidates and the final range."""

FINAL_RANGE_MAX = 1024
"""The final range (last good through first bad; skips between them) is listed in full up to this
many candidates, else by its two ends."""


class Status(str, enum.Enum):
    """How a bisection ended."""

    CULPRIT = "culprit"  # one first-bad candidate, verified
    RANGE = "range"  # only skipped candidates separate last-good and first-bad
    INCONCLUSIVE = "inconclusive"  # verification failed, budget spent, low confidence
    NO_REGRESSION = "no-regression"  # the bad end is not bad (or nothing reproduces)
    BOUNDARY_FAILED = "boundary-failed"  # good end not good / bad end not bad


@dataclass
class StageResult:
    """One stage of a bisection (nightlies, releases, or one component's commits).

    ``candidates`` is the ordered list searched; ``first_bad``/``last_good`` are
    candidates of it; ``culprits`` has one entry for a single culprit, several for a
    skip-bounded range. ``confidence`` is the posterior probability (0..1) of the culprit.
    ``flags`` are plausibility flags (merge commit, docs-only, outside runtime paths, no-op build).
    """

    name: str
    component: str
    status: Status
    candidates: list[Candidate] = field(default_factory=list)
    probes: list[ProbeResult] = field(default_factory=list)
    last_good: Candidate | None = None
    first_bad: Candidate | None = None
    culprits: list[Candidate] = field(default_factory=list)
    confidence: float = 0.0
    flags: list[str] = field(default_factory=list)
    message: str = ""
    count: int = 0
    positions: list[int] = field(default_factory=list)

    @property
    def range_size(self) -> int:
        """How many candidates the stage searched (``count`` when the list is abridged, else
        ``len(candidates)``)."""
        return self.count or len(self.candidates)

    def position_map(self) -> dict[str, int]:
        """Each listed candidate's index in the searched range (0 = the good end): ``positions``
        for an abridged list (read back from ``result.json``), else its index in ``candidates``."""
        if self.positions and len(self.positions) == len(self.candidates):
            return {c.ref: i for c, i in zip(self.candidates, self.positions, strict=True)}
        return {c.ref: i for i, c in enumerate(self.candidates)}

    def kept_positions(self) -> list[int]:
        """Indices (into ``candidates``, ascending) of what ``result.json`` lists: every candidate of
        a range up to :data:`FULL_RANGE_MAX`; beyond it the range's two ends, every probed
        candidate, the last good through the first bad (the final range, in full up to
        :data:`FINAL_RANGE_MAX`, else its ends) and the culprits (issue 25, input 7: a report
        grows with the work, not the range)."""
        n = len(self.candidates)
        if n <= FULL_RANGE_MAX or self.positions:
            return list(range(n))
        at = {c.ref: i for i, c in enumerate(self.candidates)}
        keep = {0, n - 1}
        keep.update(at[p.candidate.ref] for p in self.probes if p.candidate.ref in at)
        keep.update(at[c.ref] for c in self.culprits if c.ref in at)
        lo = at.get(self.last_good.ref) if self.last_good else None
        hi = at.get(self.first_bad.ref) if self.first_bad else None
        for end in (lo, hi):
            if end is not None:
                keep.add(end)
        if lo is not None and hi is not None and 0 <= hi - lo <= FINAL_RANGE_MAX:
            keep.update(range(lo, hi + 1))
        return sorted(keep)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict. ``candidates`` lists what :meth:`kept_positions` keeps; when that is
        not the whole range, ``count`` is the range's size and ``positions`` each listed
        candidate's index in it."""
        keep = self.kept_positions()
        whole = len(keep) == len(self.candidates) and not self.positions
        extra: dict[str, Any] = {} if whole else {
            "count": self.range_size,
            "positions": [self.positions[i] for i in keep] if self.positions else keep}
        return {
            "name": self.name,
            "component": self.component,
            "status": self.status.value,
            "candidates": [self.candidates[i].to_dict() for i in keep],
            **extra,
            "probes": [p.to_dict() for p in self.probes],
            "last_good": self.last_good.to_dict() if self.last_good else None,
            "first_bad": self.first_bad.to_dict() if self.first_bad else None,
            "culprits": [c.to_dict() for c in self.culprits],
            "confidence": self.confidence,
            "flags": self.flags,
            "message": self.message,
        }


@dataclass
class ChainLink:
    """One link of a descent through dependency pins (issue 26), outermost first.

    ``role`` is ``vehicle`` (a first-bad whose change only moves pins: the regression came in
    with a pinned component) or ``culprit`` (the innermost stage's first bad). ``component`` and
    ``stage`` name the stage (``vllm``, ``stage 1``; ``aiter``, ``aiter commits``); ``first_bad`` /
    ``last_good`` are its ends, ``range`` the first and last candidate refs it searched, ``probes`` the
    probes it ran (cached ones included), ``confidence`` its posterior (0..1). A vehicle lists the pins
    it ``moves`` (:class:`bisectbot.pins.PinMove` dicts: component, name, path, kind, old, new,
    repo_url); ``held`` maps the outer components to the refs they were held at while this stage
    ran (the first-bad of each outer stage); ``note`` says how the range was found (a mapping across
    a rewritten history)."""

    role: str
    component: str
    stage: str
    first_bad: Candidate | None = None
    last_good: Candidate | None = None
    range: tuple[str, str] | None = None
    probes: int = 0
    confidence: float = 0.0
    moves: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "component": self.component, "stage": self.stage,
                "first_bad": self.first_bad.to_dict() if self.first_bad else None,
                "last_good": self.last_good.to_dict() if self.last_good else None,
                "range": list(self.range) if self.range else None, "probes": self.probes,
                "confidence": self.confidence, "moves": [dict(m) for m in self.moves],
                "held": dict(self.held), "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChainLink:
        rng = d.get("range")
        return cls(role=d["role"], component=d.get("component", ""), stage=d.get("stage", ""),
                   first_bad=Candidate.from_dict(d["first_bad"]) if d.get("first_bad") else None,
                   last_good=Candidate.from_dict(d["last_good"]) if d.get("last_good") else None,
                   range=(rng[0], rng[1]) if rng else None, probes=int(d.get("probes") or 0),
                   confidence=float(d.get("confidence") or 0.0), moves=list(d.get("moves") or []),
                   held=dict(d.get("held") or {}), note=d.get("note", ""))


@dataclass
class RunResult:
    """Everything one ``bisectbot run`` found, the input of the report stage.

    ``kind`` is ``regression`` or ``fix``. ``environment`` maps names (image, digest,
    vllm, aiter, torch, rocm, gpu_arch ...) to strings. ``triage`` maps a toggle name to
    the verdict with it applied. ``reproduce`` is the exact command to reproduce.
    ``findings`` are searches beside the culprit's (e.g. where the threshold drifted inside
    the bad range, issue 12); they never change ``final``. ``reproduction`` holds what the
    report's Reproduce section needs without the bot (issue 25): the recipe's name and text,
    its source, server and reproducer settings (:func:`bisectbot.report.reproduce_kit.facts`).
    ``chain`` is the descent through dependency pins (issue 26): vehicle(s) then the
    culprit, empty when the run did not descend. ``pages_url`` is the dashboard's published
    address (recipe ``report.pages_url`` or ``$BISECTBOT_PAGES_URL``), where the issue embeds the
    threshold chart; ``""`` when none (the issue then says where the PNG is).
    """

    recipe: str
    kind: str
    status: Status
    stages: list[StageResult] = field(default_factory=list)
    model: str = ""
    tp: int = 1
    runner: str = ""
    regress: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    patch_stack: list[dict[str, Any]] = field(default_factory=list)
    triage: dict[str, str] = field(default_factory=dict)
    reproduce: str = ""
    notes: list[str] = field(default_factory=list)
    session_id: str = ""
    findings: list[StageResult] = field(default_factory=list)
    reproduction: dict[str, Any] = field(default_factory=dict)
    chain: list[ChainLink] = field(default_factory=list)
    pages_url: str = ""
    #: ``run --minimize`` (issue 42): the smallest failing part of the culprit
    #: (:class:`bisectbot.session.stages.minimize.MinimizeStage`); empty when not asked
    minimized: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> StageResult | None:
        """The deepest stage (the one that names the culprit)."""
        return self.stages[-1] if self.stages else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``result.json``); every string passes :func:`bisectbot.secrets.redact`."""
        return redact_data({
            "recipe": self.recipe,
            "kind": self.kind,
            "status": self.status.value,
            "stages": [s.to_dict() for s in self.stages],
            "model": self.model,
            "tp": self.tp,
            "runner": self.runner,
            "regress": self.regress,
            "environment": self.environment,
            "patch_stack": self.patch_stack,
            "triage": self.triage,
            "reproduce": self.reproduce,
            "notes": self.notes,
            "session_id": self.session_id,
            "findings": [s.to_dict() for s in self.findings],
            "reproduction": self.reproduction,
            "chain": [c.to_dict() for c in self.chain],
            "pages_url": self.pages_url,
            **({"minimized": self.minimized} if self.minimized else {}),
        })


#: The regress modes judged from patch states instead of a server (issue 8).
PATCH_MODES = ("patch-upstream", "patch-conflict")


def regress_mode(regress: Any) -> tuple[str, Any]:
    """``(mode, arg)`` of a recipe's ``regress`` (a :class:`bisectbot.recipe.Regress` or its
    string form ``"mode: arg"``); ``arg`` is None when the mode takes none."""
    if isinstance(regress, str):
        mode, _, arg = regress.partition(":")
        return mode.strip(), (arg.strip() or None)
    return regress.mode, regress.arg


def is_patch_mode(regress: Any) -> bool:
    """True for the regress modes judged from patch states instead of a server (:data:`PATCH_MODES`)."""
    return regress_mode(regress)[0] in PATCH_MODES
