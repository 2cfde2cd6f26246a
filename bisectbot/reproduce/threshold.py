"""Threshold search: at which prompt size (tokens) does a server's output turn to garbage?

:func:`search_threshold` drives one running OpenAI-compatible server;
:func:`bisectbot.reproduce.command.search_threshold_command` runs the same search over
a command reproducer. Both use :func:`search`, which is pure logic over a
``probe(size) -> SizeResult`` callable.

The search (every chat request is expensive -- a 100K-token prefill of a 754B model --
so the number of requests is the cost minimised):

1. With a fixed ladder (``spec.sizes``): sweep it upwards, as the classic script does;
   an OK size above a GARBAGE size makes the result ``non-monotone`` (reported, not
   hidden). Then refine between the largest OK size below the first GARBAGE size and
   that GARBAGE size.
2. Without one: probe ``max_size`` (OK -> status ``ok``, 1 request), then the first
   bisection point; only when that is GARBAGE is ``min_size`` probed (GARBAGE there ->
   ``all-garbage`` after 3 requests). Then refine.
3. Refine by bisection on a scale where the wanted interval width is uniform: linear
   below ``tolerance_tokens / tolerance`` tokens, logarithmic above (pure log-space
   bisection when ``tolerance_tokens`` is small). While the budget of 12 sizes
   (:data:`SIZE_BUDGET`, confirmation included) has room, a split lies a little below the
   middle (:func:`cheap_split`): sizes above the threshold are the expensive ones. It stops when
   ``first_garbage - last_ok <= max(tolerance * last_ok, tolerance_tokens)``. Both
   interval ends are sizes that were actually requested, with the server's own
   ``prompt_tokens``.
4. Confirm the boundary (issue 11): ``first_garbage`` once more with a second prompt
   (another filler seed) and one larger size; a disagreement marks the size flaky
   (``ThresholdResult.flaky`` and a note) -- evidence, not an automatic INCONCLUSIVE.
   Over [1K, 120K] to 2 % / 64 tokens the whole search takes 10-11 requests against the
   reference engine (``benchmarks/reproducer_cost.py``; budget 12).

With ``repeats > 1``, ``temperature > 0`` (at least 3 then) or ``concurrency > 1``
several identical requests are sent per size and they combine one-sidedly (issue 12):
the size is GARBAGE when any reply is garbage -- a healthy build essentially never
produces garbage, so a majority vote would only hide a bug that shows in a minority of
runs. The table reports the share of replies that agreed with the outcome. Sequential
repeats stop at the first garbage reply.
A server error (connection refused, HTTP 5xx, timeout) stops the search with status
``error`` -- never ``garbage``. A rejection as longer than the context is recorded as
"over the limit" (``ERROR``); ``max_size`` is clamped below ``max_model_len`` when the
server reports it (``/tokenize`` or ``/v1/models``).
"""

from __future__ import annotations

import math
import time
import unicodedata
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..models import Outcome
from ..recipe import ReproducerSpec
from .classify import Classification, classify
from .client import Client, Reply
from .prompts import Prompt, PromptBuilder

#: Statuses of a :class:`ThresholdResult`.
STATUSES = ("ok", "garbage", "all-garbage", "non-monotone", "error", "inconclusive")
#: Tokens kept free below ``max_model_len`` besides ``max_tokens`` (template, rounding).
CONTEXT_MARGIN = 64
#: Largest default ``max_size`` (tokens) when the recipe sets none: min(max_model_len - max_tokens
#: - CONTEXT_MARGIN, this) (issue 15; the longest prompts in public reports are ~137K).
DEFAULT_MAX_SIZE_CAP = 128 * 1024
#: ``usage.prompt_tokens`` and ``/tokenize`` may differ by this share (and 16 tokens) before
#: the probe calls it a disagreement (a chat template counted differently, BOS...).
USAGE_AGREEMENT = 0.03
#: Plausible characters per token of the filler prompts (real BPE tokenizers: ~1.5-6).
CHARS_PER_TOKEN_RANGE = (0.5, 16.0)
_SERVER_TROUBLE = ("connection", "timeout", "http", "bad-response")
#: Start of the reason of a size whose reply came from the server's prefix cache (``INCONCLUSIVE``).
CACHED_REASON = "served from the prefix cache"


def excerpt(text: str, limit: int = 120) -> str:
    """First ``limit`` characters of ``text`` on one line, control characters escaped."""
    out = []
    for ch in text[:limit]:
        if ch in "\n\r\t":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn"):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    s = "".join(out)
    return s + ("…" if len(text) > limit else "")


@dataclass
class SizeResult:
    """The outcome at one prompt size.

    ``requested`` is the target size (tokens); ``prompt_tokens`` the server's real count
    (``usage.prompt_tokens``, else ``/tokenize``; for a command reproducer the size
    passed). ``votes`` counts outcomes of the ``requests`` sent (combined one-sidedly,
    :func:`one_sided`); ``agreement`` is the share of replies equal to the outcome (0..1). ``seconds`` is wall time; ``excerpt`` the start of one reply.
    ``error_kind`` is set for ``ERROR`` (``over-limit`` = longer than the context).
    """

    requested: int
    prompt_tokens: int | None
    outcome: Outcome
    reasons: list[str] = field(default_factory=list)
    agreement: float = 1.0
    votes: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    seconds: float = 0.0
    excerpt: str = ""
    error_kind: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """The measured size (tokens): ``prompt_tokens`` when known, else ``requested``."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.requested

    def to_dict(self) -> dict[str, Any]:
        d = {"requested": self.requested, "prompt_tokens": self.prompt_tokens, "outcome": self.outcome.value,
             "reasons": self.reasons, "agreement": round(self.agreement, 3), "votes": self.votes,
             "requests": self.requests, "seconds": round(self.seconds, 3), "excerpt": self.excerpt}
        if self.error_kind:
            d["error_kind"] = self.error_kind
        if self.evidence:
            d["evidence"] = self.evidence
        return d

    @property
    def counted_by(self) -> str:
        """What :attr:`size` is: ``usage.prompt_tokens`` or ``/tokenize`` (the server's count), or
        ``requested`` when nothing measured it (:func:`counted_by`)."""
        return counted_by(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SizeResult:
        """Inverse of :meth:`to_dict`."""
        return cls(requested=int(d["requested"]), prompt_tokens=d.get("prompt_tokens"),
                   outcome=Outcome(d["outcome"]), reasons=list(d.get("reasons") or []),
                   agreement=float(d.get("agreement", 1.0)), votes=dict(d.get("votes") or {}),
                   requests=int(d.get("requests", 0)), seconds=float(d.get("seconds", 0.0)),
                   excerpt=d.get("excerpt", ""), error_kind=d.get("error_kind"),
                   evidence=dict(d.get("evidence") or {}))


def counted_by(row: dict[str, Any]) -> str:
    """Where a size row's (:meth:`SizeResult.to_dict`) measured size comes from: ``usage.prompt_tokens``
    (the reply's usage), ``/tokenize`` (the server counted the prompt, the reply had no usage), or
    ``requested`` (no count: the requested size stands in, e.g. a command reproducer's ``{size}``)."""
    ev = row.get("evidence") if isinstance(row.get("evidence"), dict) else {}
    if ev.get("usage_prompt_tokens"):
        return "usage.prompt_tokens"
    if row.get("prompt_tokens") is None:
        return "requested"
    return "/tokenize" if "prompt_words" in ev else "requested"


@dataclass
class ThresholdResult:
    """Result of one threshold search.

    ``status`` is one of :data:`STATUSES`: ``ok`` (no garbage up to the largest size),
    ``garbage`` (threshold found: ``last_ok < T <= first_garbage``), ``all-garbage``
    (bad at the smallest size), ``non-monotone`` (an OK size above a GARBAGE size; the
    interval is the lowest transition), ``error`` (server died / HTTP error; ``error``
    says why), ``inconclusive`` (no size could be decided, e.g. cut by ``max_tokens``).
    ``last_ok``/``first_garbage`` are measured prompt tokens of requested sizes.
    ``table`` is in probe order; ``requests`` counts chat requests (or command runs);
    ``wall_s`` seconds; ``reasons`` the classifier reasons at ``first_garbage``.
    ``transient`` (status ``error`` only): the error may pass on its own (connection,
    timeout, HTTP 429/5xx after the bounded retries) -- never cache it as a verdict.
    ``flaky``: sizes (tokens) whose boundary confirmation disagreed (evidence of a flaky
    corruption for the search; the status stays what the combined replies said).
    ``second_finding``: a server failure above the sizes a focused search was asked about
    (:func:`bisectbot.reproduce.focus.focused_search`, issue 23): evidence, not the verdict.
    """

    status: str
    last_ok: int | None = None
    first_garbage: int | None = None
    table: list[SizeResult] = field(default_factory=list)
    requests: int = 0
    wall_s: float = 0.0
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    model: str | None = None
    endpoint: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    transient: bool = False
    flaky: list[int] = field(default_factory=list)
    second_finding: str | None = None

    @property
    def interval(self) -> tuple[int | None, int | None]:
        """``(last_ok, first_garbage)`` in prompt tokens."""
        return self.last_ok, self.first_garbage

    @property
    def found_garbage(self) -> bool:
        return self.status in ("garbage", "all-garbage", "non-monotone")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "last_ok": self.last_ok, "first_garbage": self.first_garbage,
                "threshold": [self.last_ok, self.first_garbage], "table": [r.to_dict() for r in self.table],
                "requests": self.requests, "wall_s": round(self.wall_s, 3), "reasons": self.reasons,
                "error": self.error, "notes": self.notes, "model": self.model, "endpoint": self.endpoint,
                "min_size": self.min_size, "max_size": self.max_size, "transient": self.transient,
                "flaky": self.flaky, "second_finding": self.second_finding}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ThresholdResult:
        """Inverse of :meth:`to_dict` (e.g. a result stored in the ledger)."""
        return cls(status=d["status"], last_ok=d.get("last_ok"), first_garbage=d.get("first_garbage"),
                   table=[SizeResult.from_dict(r) for r in d.get("table") or []], requests=int(d.get("requests", 0)),
                   wall_s=float(d.get("wall_s", 0.0)), reasons=list(d.get("reasons") or []), error=d.get("error"),
                   notes=list(d.get("notes") or []), model=d.get("model"), endpoint=d.get("endpoint"),
                   min_size=d.get("min_size"), max_size=d.get("max_size"),
                   transient=bool(d.get("transient", False)), flaky=list(d.get("flaky") or []),
                   second_finding=d.get("second_finding"))


# --------------------------------------------------------------------------- pure search


def narrow_enough(lo: int, hi: int, spec: ReproducerSpec) -> bool:
    """True when ``hi - lo <= max(tolerance * lo, tolerance_tokens)`` (tokens)."""
    return hi - lo <= max(spec.tolerance * lo, spec.tolerance_tokens)


def _size_scale(spec: ReproducerSpec) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """``(u, inverse of u)``: the scale with du/dx = 1/max(tolerance*x, tolerance_tokens) on
    sizes x (tokens), linear below ``x0 = tolerance_tokens/tolerance``, logarithmic above."""
    tol, tt = spec.tolerance, float(spec.tolerance_tokens)
    x0 = tt / tol

    def u(x: float) -> float:
        return x / tt if x <= x0 else x0 / tt + math.log(x / x0) / tol

    def inv(v: float) -> float:
        return v * tt if v <= x0 / tt else x0 * math.exp((v - x0 / tt) * tol)

    return u, inv


def split_point(lo: int, hi: int, spec: ReproducerSpec) -> int:
    """Midpoint of ``(lo, hi)`` on the scale u with du/dx = 1/max(tolerance*x, tolerance_tokens):
    linear below ``x0 = tolerance_tokens/tolerance``, logarithmic above. Strictly inside."""
    u, inv = _size_scale(spec)
    mid = round(inv((u(lo) + u(hi)) / 2))
    return min(max(mid, lo + 1), hi - 1)


def split_at(lo: int, hi: int, spec: ReproducerSpec, share: float) -> int:
    """The size (tokens) at ``share`` (0..1) of the way from ``lo`` to ``hi`` on the scale of
    :func:`split_point` (0.5: :func:`split_point` itself). Strictly inside when possible."""
    u, inv = _size_scale(spec)
    x = round(inv(u(lo) + share * (u(hi) - u(lo))))
    return min(max(x, lo + 1), hi - 1)


def splits_needed(lo: int, hi: int, spec: ReproducerSpec) -> int:
    """Probes that bisection by :func:`split_point` needs, at worst, to narrow ``(lo, hi)``
    (tokens) until :func:`narrow_enough`."""
    if narrow_enough(lo, hi, spec) or hi - lo <= 1:
        return 0
    mid = split_point(lo, hi, spec)
    return 1 + max(splits_needed(lo, mid, spec), splits_needed(mid, hi, spec))


#: Share of the interval (on the :func:`split_point` scale) where a refinement splits when the
#: size budget leaves room (issue 15): below the middle, because every size at or above the
#: threshold costs at least the threshold in prompt tokens. Chosen on a simulation over
#: 1,000 thresholds from 1K to 120K (mean prompt tokens 2 % lower than the middle, the
#: budget kept; 0.25-0.4 or a lower first split saved less or cost more at some thresholds).
LOW_SHARE = 0.45
#: Sizes (prompts) one search may take over the default range, boundary confirmation included (issue 11).
SIZE_BUDGET = 12


def cheap_split(lo: int, hi: int, spec: ReproducerSpec, left: int) -> int:
    """The next refinement size (tokens) of ``(lo, hi)`` when ``left`` sizes may still be probed
    before the confirmation: the point at :data:`LOW_SHARE` of the interval when either outcome
    can still be narrowed by bisection within ``left - 1`` sizes, else :func:`split_point`."""
    x = split_at(lo, hi, spec, LOW_SHARE)
    if 1 + max(splits_needed(lo, x, spec), splits_needed(x, hi, spec)) <= left:
        return x
    return split_point(lo, hi, spec)


def search(probe: Callable[[int], SizeResult], spec: ReproducerSpec, min_size: int | None = None,
           max_size: int | None = None, log: Callable[[str], None] | None = None,
           size_budget: int | None = SIZE_BUDGET) -> ThresholdResult:
    """Run the sweep-and-refine search with ``probe(size) -> SizeResult`` (sizes in tokens).

    ``min_size``/``max_size`` default to the spec's. ``size_budget``: sizes the whole search
    may take (confirmation included) for :func:`cheap_split` to spend on lower splits; None:
    plain bisection (fewest sizes, for probes whose cost hardly depends on the size). Never
    raises for server trouble: ``probe`` reports it as an ``ERROR`` size. See the module
    docstring for the strategy.
    """
    t0 = time.monotonic()
    lo_size = min_size if min_size is not None else spec.min_size
    hi_size = max_size if max_size is not None else spec.max_size
    res = ThresholdResult(status="inconclusive", min_size=lo_size, max_size=hi_size)
    say = log or (lambda _m: None)

    def do(size: int) -> SizeResult:
        r = probe(size)
        res.table.append(r)
        res.requests += r.requests
        why = f" ({join_whole(r.reasons, 160)})" if r.reasons and r.outcome != Outcome.OK else ""
        agree = f" agreement {r.agreement:.0%}" if r.requests > 1 else ""
        say(f"probe {len(res.table)}: {r.requested} tokens -> {r.size} measured: {r.outcome.value}{agree}{why}")
        return r

    def finish(status: str, error: str | None = None) -> ThresholdResult:
        res.status = status
        res.error = error
        res.wall_s = time.monotonic() - t0
        if res.first_garbage is not None:
            for r in res.table:
                if r.outcome == Outcome.GARBAGE and r.size == res.first_garbage:
                    res.reasons = list(r.reasons)
                    break
        return res

    def fail(r: SizeResult) -> ThresholdResult:
        res.transient = bool(r.evidence.get("transient"))
        return finish("error", f"at {r.requested} tokens: {'; '.join(r.reasons) or 'server error'}")

    non_monotone = False
    if spec.sizes:
        ladder = sorted({s for s in spec.sizes if s <= hi_size})
        dropped = sorted({s for s in spec.sizes if s > hi_size})
        if dropped:
            res.notes.append(f"sizes above the usable maximum {hi_size} skipped: {dropped} (too long for this server: "
                             "a fact about the candidate, not a verdict)")
        for s in ladder:
            r = do(s)
            if r.outcome == Outcome.ERROR:
                if r.error_kind == "over-limit":
                    res.notes.append(f"over the limit at {s} tokens: larger sizes not probed (too long for this server: "
                                     "a fact about the candidate, not a verdict)")
                    break
                return fail(r)
        oks = [r.size for r in res.table if r.outcome == Outcome.OK]
        bads = [r.size for r in res.table if r.outcome == Outcome.GARBAGE]
        if not bads:
            res.last_ok = max(oks) if oks else None
            return finish("ok" if oks else "inconclusive")
        first_bad = min(bads)
        below = [s for s in oks if s < first_bad]
        non_monotone = any(s > first_bad for s in oks)
        if non_monotone:
            res.notes.append(f"OK at {sorted(s for s in oks if s > first_bad)} above GARBAGE at {first_bad}")
        if not below:
            res.first_garbage = first_bad
            return finish("non-monotone" if non_monotone else "all-garbage")
        lo, hi = max(below), first_bad
    else:
        r_hi = do(hi_size)
        if r_hi.outcome == Outcome.ERROR:
            return fail(r_hi)
        if r_hi.outcome == Outcome.OK:
            res.last_ok = r_hi.size
            return finish("ok")
        if r_hi.outcome == Outcome.INCONCLUSIVE:
            res.notes.append(f"largest size {hi_size} inconclusive: {'; '.join(r_hi.reasons)}")
            return finish("inconclusive")
        lo = hi = None
        if not narrow_enough(lo_size, r_hi.size, spec) and lo_size < r_hi.size - 1:
            # the first bisection point before min_size: when it is OK, min_size is never needed
            r_mid = do(split_point(lo_size, r_hi.size, spec))
            if r_mid.outcome == Outcome.ERROR:
                return fail(r_mid)
            if r_mid.outcome == Outcome.OK and r_mid.size < r_hi.size:
                lo, hi = r_mid.size, r_hi.size
            elif r_mid.outcome == Outcome.GARBAGE:
                r_hi = r_mid
        if lo is None:
            r_lo = do(lo_size)
            if r_lo.outcome == Outcome.ERROR:
                return fail(r_lo)
            if r_lo.outcome == Outcome.GARBAGE:
                res.first_garbage = r_lo.size
                return finish("all-garbage")
            if r_lo.outcome == Outcome.INCONCLUSIVE:
                res.first_garbage = r_hi.size
                res.notes.append(f"smallest size {lo_size} inconclusive: {'; '.join(r_lo.reasons)}")
                return finish("inconclusive")
            lo, hi = r_lo.size, r_hi.size
            if lo >= hi:
                res.first_garbage = hi
                return finish("all-garbage")
    # refine between lo (OK) and hi (GARBAGE), both measured
    while not narrow_enough(lo, hi, spec):
        target = (split_point(lo, hi, spec) if size_budget is None
                  else cheap_split(lo, hi, spec, size_budget - len(res.table) - 2))  # 2: the confirmation
        r = do(target)
        if r.outcome == Outcome.ERROR:
            res.last_ok, res.first_garbage = lo, hi
            return fail(r)
        if r.outcome == Outcome.INCONCLUSIVE:
            res.notes.append(f"{r.size} tokens inconclusive ({'; '.join(r.reasons)}); refinement stopped")
            break
        if not lo < r.size < hi:
            # the prompt could not be sized strictly inside the interval: it is as fine as it gets
            res.notes.append(f"asked {target} tokens, got {r.size}: cannot split [{lo}, {hi}] further")
            if r.outcome == Outcome.OK and r.size >= hi or r.outcome == Outcome.GARBAGE and r.size <= lo:
                non_monotone = True
                res.notes.append(f"{r.outcome.value} at {r.size} contradicts [{lo}, {hi}]")
            break
        if r.outcome == Outcome.OK:
            lo = r.size
        else:
            hi = r.size
    res.last_ok, res.first_garbage = lo, hi
    if not non_monotone:
        err = _confirm(probe, do, res, lo, hi, hi_size, spec, say)
        if err is not None:
            return fail(err)
    return finish("non-monotone" if non_monotone else "garbage")


def _confirm(probe: Callable[[int], SizeResult], do: Callable[[int], SizeResult], res: ThresholdResult,
             lo: int, hi: int, hi_size: int, spec: ReproducerSpec, say: Callable[[str], None]) -> SizeResult | None:
    """Boundary confirmation (issue 11): ask ``first_garbage`` again with a second prompt
    (``probe.confirm(size)``, another filler seed, when the probe has one) and one larger
    size (skipped when a GARBAGE size within the next step above is already known). A
    confirmation that comes back OK marks the size flaky (``res.flaky`` + a note): evidence
    for the search, not a verdict -- the status stays ``garbage``. A confirmation that
    lands inside the interval narrows it. Returns the ERROR size when one failed."""
    step = max(hi - lo, math.ceil(spec.tolerance * hi), 1)
    disagree: list[str] = []
    confirm = getattr(probe, "confirm", None)
    if callable(confirm):
        r = confirm(hi)
        res.table.append(r)
        res.requests += r.requests
        say(f"confirm {hi} tokens with another prompt -> {r.size} measured: {r.outcome.value}")
        if r.outcome == Outcome.ERROR:
            return r
        if r.outcome == Outcome.GARBAGE and lo < r.size < hi:
            res.first_garbage = hi = r.size
        elif r.outcome == Outcome.OK and lo < r.size < hi:
            res.last_ok = lo = r.size
        elif r.outcome == Outcome.OK and r.size >= hi:
            disagree.append(f"OK at {r.size} tokens with another prompt")
        elif r.outcome == Outcome.GARBAGE and r.size <= lo:
            disagree.append(f"GARBAGE at {r.size} tokens with another prompt, below last OK {lo}")
    known_above = [x for x in res.table if x.outcome == Outcome.GARBAGE and hi < x.size <= hi + 2 * step]
    larger = min(hi_size, hi + step)
    if not known_above and larger > hi:
        r = do(larger)
        if r.outcome == Outcome.ERROR:
            return None if r.error_kind == "over-limit" else r
        if r.outcome == Outcome.OK and r.size > hi:
            disagree.append(f"OK at the larger size {r.size}")
    if disagree:
        res.flaky.append(hi)
        res.notes.append(f"boundary at {hi} tokens is flaky: {'; '.join(disagree)} (GARBAGE at {hi}); "
                         "treat as a flaky observation, not a clean threshold")
    return None


# --------------------------------------------------------------------------- votes


def effective_repeats(spec: ReproducerSpec) -> int:
    """Requests per size: ``max(repeats, concurrency)``, and at least 3 when ``temperature > 0``."""
    n = max(spec.repeats, spec.concurrency)
    if spec.temperature > 0:
        n = max(n, 3)
    return n


def hit_counts(table: list[SizeResult], first_garbage: int | None) -> tuple[int, int]:
    """``(runs, hits)`` on the garbage side of a threshold search: over the sizes at or above
    ``first_garbage`` (tokens), the OK and GARBAGE replies sent and how many were garbage.

    For the bad end's per-run hit rate when the recipe gives no flake rates (issue 12,
    :func:`bisectbot.bisect.estimate_hit_rate`). Sequential repeats stop at the first
    garbage reply; ``hits / runs`` stays the maximum-likelihood estimate under such a
    stopping rule (the likelihood is ``h ** hits * (1 - h) ** (runs - hits)`` either way).
    ``(0, 0)`` when no garbage was seen."""
    if first_garbage is None:
        return 0, 0
    runs = hits = 0
    for r in table:
        if r.size >= first_garbage and r.outcome in (Outcome.OK, Outcome.GARBAGE):
            g = int(r.votes.get(Outcome.GARBAGE.value, 0))
            runs += g + int(r.votes.get(Outcome.OK.value, 0))
            hits += g
    return runs, hits


def one_sided(outcomes: list[Outcome]) -> tuple[Outcome, float]:
    """(outcome, agreement) of identical requests at one size, combined one-sidedly (issue 12):
    GARBAGE when any reply is garbage (a healthy build essentially never produces it, so one
    garbage reply is evidence of the bug; the search's flake rates are per probe after this
    combination), else OK when any reply is OK, else INCONCLUSIVE (no votes). ``agreement``
    is the share of OK/GARBAGE replies equal to the outcome."""
    g = sum(o == Outcome.GARBAGE for o in outcomes)
    k = sum(o == Outcome.OK for o in outcomes)
    if g:
        return Outcome.GARBAGE, g / (g + k)
    if k:
        return Outcome.OK, 1.0
    return Outcome.INCONCLUSIVE, 0.0


def vote(classes: list[Classification], replies: list[Reply], requested: int, prompt_tokens: int | None,
         seconds: float) -> SizeResult:
    """Combine the classifications of identical requests at one size into a :class:`SizeResult`."""
    votes: dict[str, int] = {}
    for c in classes:
        votes[c.outcome.value] = votes.get(c.outcome.value, 0) + 1
    errors = [(c, r) for c, r in zip(classes, replies) if c.outcome == Outcome.ERROR]
    trouble = [(c, r) for c, r in errors if r.error_kind in _SERVER_TROUBLE]
    if trouble or (errors and len(errors) == len(classes)):
        c, r = (trouble or errors)[0]
        ev: dict[str, Any] = {"attempts": sum(x.attempts for x in replies)}
        if r.transient:
            ev["transient"] = True
        return SizeResult(requested, prompt_tokens, Outcome.ERROR, c.reasons, 1.0, votes, len(replies), seconds,
                          "", error_kind=r.error_kind, evidence=ev)
    outcome, agreement = one_sided([c.outcome for c in classes])
    pick = next((i for i, c in enumerate(classes) if c.outcome == outcome), 0)
    reasons = classes[pick].reasons if outcome != Outcome.OK else []
    text = replies[pick].content or replies[pick].reasoning
    return SizeResult(requested, prompt_tokens, outcome, reasons, agreement, votes, len(replies), seconds,
                      excerpt(text))


# --------------------------------------------------------------------------- HTTP probe


class HttpProbe:
    """``probe(size)`` against one server: build a prompt of ``size`` tokens, send the
    identical request ``effective_repeats(spec)`` times (``concurrency`` at once), classify, combine
    one-sidedly (:func:`one_sided`).
    A size that comes out ``INCONCLUSIVE`` (cut off inside the reasoning) is asked once more
    with ``max_tokens * inconclusive_retry_factor`` (default 4; 1 = no retry). Without
    ``/tokenize`` the first prompt is sized by a guess; when the server's ``prompt_tokens``
    differ by more than the tolerance it is re-sent once calibrated. The first rejection as
    over the context length that names the limit is retried once at the largest accepted size.
    Both cases are listed in ``notes``."""

    def __init__(self, client: Client, spec: ReproducerSpec, builder: PromptBuilder,
                 inconclusive_retry_factor: int = 4):
        self.notes: list[str] = []
        self._limit_learnt = False
        self._tokenize_dropped_now = False
        self._alt: PromptBuilder | None = None
        self.client = client
        self.spec = spec
        self.builder = builder
        self.inconclusive_retry_factor = inconclusive_retry_factor
        #: Sizes whose cold prefill could be checked (``/metrics`` or ``cached_tokens``) and the
        #: ``[hits, queries]`` prompt tokens ``/metrics`` counted over them.
        self.cache_checked = 0
        self.cache_totals = [0, 0]

    def cache_note(self) -> str:
        """One line for the result's notes: whether the probe's prefills were checked cold."""
        if not self.cache_checked:
            return ("prefix cache: not checked (the server exposes no vllm:prefix_cache_* counters on /metrics and "
                    "no usage.prompt_tokens_details.cached_tokens); every request carried its own cache_salt -- where "
                    "a server ignores it, turn its prefix cache off (vLLM: --no-enable-prefix-caching)")
        hits, queries = self.cache_totals
        return (f"prefix cache: checked at {self.cache_checked} size(s): {hits} of {queries} queried prompt tokens "
                f"were cache hits ({'cold prefills' if hits == 0 else 'NOT all cold: those sizes are inconclusive'};"
                " a fresh cache_salt per request)")

    def _chat(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        return self.client.chat(messages, max_tokens=max_tokens, temperature=self.spec.temperature,
                                seed=self.spec.seed)

    def _ask(self, size: int, prompt: Prompt, max_tokens: int) -> SizeResult:
        t0 = time.monotonic()
        before = self.client.prefix_cache()  # /metrics counters around this size's requests (issue 22)
        n = effective_repeats(self.spec)
        replies: list[Reply] = []
        classes: list[Classification] = []
        conc = max(1, self.spec.concurrency)
        with ThreadPoolExecutor(max_workers=conc) as pool:
            while len(replies) < n:
                batch = min(conc, n - len(replies))
                got = list(pool.map(lambda _i: self._chat(prompt.messages, max_tokens), range(batch)))
                for r in got:
                    replies.append(r)
                    classes.append(classify(r, self.spec, prompt.needles))
                if any(c.outcome in (Outcome.ERROR, Outcome.GARBAGE) for c in classes):
                    break  # an error ends the size; one garbage reply decides it (one-sided)
        usage = next((r.prompt_tokens for r in replies if r.prompt_tokens), None)
        measured = usage or prompt.measured_tokens
        res = vote(classes, replies, size, measured, time.monotonic() - t0)
        if usage:
            res.evidence["usage_prompt_tokens"] = usage
        res.evidence["prompt_words"] = prompt.words  # with the seed: the prompt again (issue 25's request.json)
        self._check_cold(res, replies, before)
        return res

    def _check_cold(self, res: SizeResult, replies: list[Reply], before: tuple[int, int] | None) -> None:
        """Record whether this size's requests were cold prefills and turn a reply served from the
        prefix cache into ``INCONCLUSIVE`` (issue 22; issue 23, input 6): a cached prefill never ran
        the code path the probe tests, so its reply is not evidence. Two sources, either enough:
        the server's ``/metrics`` counters read before and after the size's requests (hits in
        tokens; the candidate serves only the probe) and each reply's
        ``usage.prompt_tokens_details.cached_tokens``."""
        after = self.client.prefix_cache() if before is not None else None
        cached = [r.cached_tokens for r in replies if r.cached_tokens is not None]
        info: dict[str, Any] = {"cache_salt": self.client.cold}
        hits = None
        if before is not None and after is not None:
            hits, queries = after[0] - before[0], after[1] - before[1]
            info.update(metrics_hits=hits, metrics_queries=queries)
            self.cache_totals[0] += max(0, hits)
            self.cache_totals[1] += max(0, queries)
        if cached:
            info["cached_tokens"] = sum(cached)
        checked = hits is not None or bool(cached)
        info["checked"] = checked
        served = (hits or 0) > 0 or sum(cached) > 0
        info["served_from_cache"] = served
        if checked:
            self.cache_checked += 1
        res.evidence["prefix_cache"] = info
        if served and res.outcome != Outcome.ERROR:
            how = (f"{hits} of {info['metrics_queries']} queried prompt tokens were prefix-cache hits "
                   f"(/metrics)" if (hits or 0) > 0 else f"usage.prompt_tokens_details.cached_tokens {sum(cached)}")
            res.outcome = Outcome.INCONCLUSIVE
            res.reasons = [f"{CACHED_REASON}: {how}; a cached reply is not evidence (the server ignores "
                           "cache_salt? turn its prefix cache off: vLLM --no-enable-prefix-caching)"]

    def __call__(self, size: int) -> SizeResult:
        """``SizeResult`` at ``size`` tokens; never raises (an unexpected failure is an ``ERROR``)."""
        from .. import progress

        t0 = time.monotonic()
        try:
            res = self._probe(size)
        except Exception as e:  # noqa: BLE001 - an odd reply must end as a verdict, never a traceback
            res = SizeResult(size, None, Outcome.ERROR, [f"probe failed: {type(e).__name__}: {e}"[:300]],
                             error_kind="bad-response")
        progress.request(size, res.outcome.value, time.monotonic() - t0,
                         measured=res.prompt_tokens, counted_by=res.counted_by)
        return res

    def _probe(self, size: int) -> SizeResult:
        first = not self.builder.calibrated
        guessed = first and not self.builder.has_tokenizer
        prompt = self.builder.build(size)
        res = self._ask(size, prompt, self.spec.max_tokens)
        limit = _context_limit(res)
        if limit and res.error_kind == "over-limit" and not self._limit_learnt:
            self._limit_learnt = True
            # the server told its context length: retry once at the largest size it accepts
            # 1 % below: a prompt sized by interpolating usage counts may be off by a few tenths of a percent
            usable = int((limit - self.spec.max_tokens - CONTEXT_MARGIN) * 0.99)
            if 0 < usable < size:
                self.notes.append(f"server context is {limit} tokens: {size} tokens probed as {usable}")
                return self._redo(size, usable, res)
        usage = res.evidence.get("usage_prompt_tokens")
        if usage:
            bad = self._cross_check(prompt, usage)
            if bad:
                res = SizeResult(size, usage, Outcome.ERROR, [bad], 1.0, res.votes, res.requests, res.seconds,
                                 error_kind="bad-response", evidence=res.evidence)
                return res
            self.builder.calibrate(prompt, usage)
        if (guessed or self._tokenize_dropped_now) and usage and res.outcome != Outcome.ERROR \
                and abs(usage - size) > self.spec.tolerance * size:
            self._tokenize_dropped_now = False
            # sized by a guess (or by a /tokenize found wrong); now calibrated: ask at the real size
            self.notes.append(f"prompt measured {usage} tokens for {size} asked: re-sent after calibration")
            return self._redo(size, size, res)
        return self._finish(size, prompt, res)

    def _cross_check(self, prompt: Prompt, usage: int) -> str | None:
        """Compare the server's ``usage.prompt_tokens`` with ``/tokenize`` and with the prompt's
        characters (issue 11, input 5). ``None`` when they agree; drops a ``/tokenize`` whose
        count is implausible while usage is plausible (sizes then come from usage); else the
        reason of an ``ERROR`` that names both figures."""
        chars = max(1, prompt.chars)

        def plausible(n: int) -> bool:
            return CHARS_PER_TOKEN_RANGE[0] <= chars / max(1, n) <= CHARS_PER_TOKEN_RANGE[1]

        tok = prompt.measured_tokens
        if tok is not None and abs(tok - usage) > max(USAGE_AGREEMENT * usage, 16):
            if plausible(usage) and not plausible(tok):
                self.notes.append(f"/tokenize counted {tok} tokens, usage.prompt_tokens {usage}, for a prompt of "
                                  f"{chars} characters: /tokenize not trusted, sizes from usage.prompt_tokens")
                self.builder.drop_tokenizer()
                self._tokenize_dropped_now = True
                return None
            return (f"prompt size disagreement: /tokenize counts {tok} tokens, usage.prompt_tokens {usage} "
                    f"({chars} characters)")
        if not plausible(usage):
            return (f"usage.prompt_tokens {usage} is implausible for a prompt of {chars} characters "
                    f"(expected {chars // CHARS_PER_TOKEN_RANGE[1]}..{chars // CHARS_PER_TOKEN_RANGE[0]})")
        return None

    def confirm(self, size: int) -> SizeResult:
        """``SizeResult`` of a second prompt at about ``size`` tokens: another filler seed and
        other needle codes (:meth:`PromptBuilder.sibling`: sized with ``/tokenize`` when the
        server has a trusted one, else from this probe's usage calibration); the prompt aims a
        hair above ``size`` so its measured size is not below it."""
        try:
            if self._alt is None:
                self._alt = self.builder.sibling(self.spec.seed + 1)
            slack = max(4, size // 1000) if self._alt.has_tokenizer else max(4, size // 200)
            prompt = self._alt.build(size + slack)
            res = self._ask(size, prompt, self.spec.max_tokens)
            res.evidence["confirmation"] = f"seed {self.spec.seed + 1}"
            return self._finish(size, prompt, res)
        except Exception as e:  # noqa: BLE001 - never a traceback
            return SizeResult(size, None, Outcome.ERROR, [f"probe failed: {type(e).__name__}: {e}"[:300]],
                              error_kind="bad-response")

    def _redo(self, size: int, target: int, before: SizeResult) -> SizeResult:
        prompt = self.builder.build(target)
        res = self._ask(size, prompt, self.spec.max_tokens)
        res.requests += before.requests
        res.seconds += before.seconds
        return self._finish(size, prompt, res)

    def _finish(self, size: int, prompt: Prompt, res: SizeResult) -> SizeResult:
        # more room changes nothing for a misrouted reply or one served from the prefix cache
        misrouted = any(r.startswith(("misrouted", CACHED_REASON)) for r in res.reasons)
        if res.outcome == Outcome.INCONCLUSIVE and self.inconclusive_retry_factor > 1 and not misrouted:
            # cut off inside the reasoning: ask once more with more room before giving up on this size
            more = self.spec.max_tokens * self.inconclusive_retry_factor
            again = self._ask(size, prompt, more)
            again.requests += res.requests
            again.seconds += res.seconds
            for k, v in res.votes.items():
                again.votes[k] = again.votes.get(k, 0) + v
            if again.outcome == Outcome.INCONCLUSIVE:
                again.reasons = [f"{r} (also with max_tokens {more})" for r in again.reasons]
            return again
        return res


def _context_limit(res: SizeResult) -> int | None:
    """The context length named in an over-limit rejection ("maximum context length is N tokens")."""
    import re

    for r in res.reasons:
        m = re.search(r"maximum context length is (\d+)", r)
        if m:
            return int(m.group(1))
    return None



def join_whole(items: list[str], limit: int = 160) -> str:
    """``items`` joined with ``; `` up to about ``limit`` characters, never cutting one mid-value:
    whole items only (the first always), then ``(+N more)`` for those left out (issue 14)."""
    out: list[str] = []
    for k, item in enumerate(items):
        if out and len("; ".join([*out, item])) > limit:
            return "; ".join(out) + f" (+{len(items) - k} more)"
        out.append(item)
    return "; ".join(out)

def search_threshold(endpoint: str, spec: ReproducerSpec, model: str | None = None,
                     log: Callable[[str], None] | None = None, timeout_s: float = 600.0,
                     api_key: str | None = None,
                     wrap_probe: Callable[[HttpProbe], Callable[[int], SizeResult]] | None = None,
                     focus: list[int] | None = None) -> ThresholdResult:
    """Find the prefill threshold of the OpenAI-compatible server at ``endpoint``.

    ``endpoint`` is ``http://host:port`` (a trailing ``/v1`` is accepted); ``model``
    ``None`` = the first model of ``/v1/models``. ``timeout_s`` bounds each chat request
    (seconds). ``log`` receives one line per probe. ``wrap_probe`` may wrap the HTTP probe
    (issue 18: :class:`bisectbot.reproduce.reference.ReferenceProbe`). ``focus``: sizes (tokens)
    where the bisection's bad end failed, asked first (:func:`bisectbot.reproduce.focus.focused_search`,
    issue 23). Returns a :class:`ThresholdResult`;
    never raises for server trouble (status ``error`` with the reason instead).
    """
    t0 = time.monotonic()
    say = log or (lambda _m: None)
    client = Client(endpoint, model=model, timeout_s=timeout_s, api_key=api_key)
    try:
        name = client.model_name()
    except Exception as e:  # noqa: BLE001 - ServerError and anything the server's reply breaks
        return ThresholdResult(status="error", error=f"server not ready: {e}", endpoint=client.base_url,
                               wall_s=time.monotonic() - t0, min_size=spec.min_size, max_size=spec.max_size)
    builder = PromptBuilder(spec.question, needles=spec.needles, seed=spec.seed, tokenize=client.tokenize)
    notes: list[str] = []

    def error(msg: str) -> ThresholdResult:
        return ThresholdResult(status="error", error=msg, notes=notes + client.problems + builder.problems, model=name,
                               endpoint=client.base_url, wall_s=time.monotonic() - t0, min_size=spec.min_size,
                               max_size=spec.max_size)

    try:
        builder.learn()  # tokens per filler word and max_model_len (2 /tokenize calls)
    except Exception as e:  # noqa: BLE001 - a server reply must never end the run with a traceback
        return error(f"sizing prompts failed: {type(e).__name__}: {e}")
    hi = spec.max_size
    if client.max_model_len:
        usable = client.max_model_len - spec.max_tokens - CONTEXT_MARGIN
        if usable < 1:
            return error(f"server max_model_len {client.max_model_len} leaves no room for a prompt "
                         f"(max_tokens {spec.max_tokens} + {CONTEXT_MARGIN})")
        if "max_size" not in spec.model_fields_set:
            hi = min(usable, DEFAULT_MAX_SIZE_CAP)
            notes.append(f"max_size {hi} = min(max_model_len {client.max_model_len} - max_tokens "
                         f"{spec.max_tokens} - {CONTEXT_MARGIN}, {DEFAULT_MAX_SIZE_CAP})")
            say(notes[-1])
        elif usable < hi:
            notes.append(f"max_size {hi} clamped to {usable}: longer prompts are too long for this server "
                         f"(max_model_len {client.max_model_len} "
                         f"- max_tokens {spec.max_tokens} - {CONTEXT_MARGIN})")
            say(notes[-1])
            hi = usable
    elif "max_size" not in spec.model_fields_set:
        notes.append(f"server reports no max_model_len: max_size {hi} (the default; set reproducer.max_size)")
    lo = min(spec.min_size, hi)
    if spec.min_size > hi:  # issue 23: said, not silently clamped
        notes.append(f"min_size {spec.min_size} is above the largest usable size {hi} tokens"
                     + (f" (server max_model_len {client.max_model_len})" if client.max_model_len else "")
                     + f": only {hi} tokens probed")
        say(notes[-1])
    if not builder.has_tokenizer:
        notes.append("server has no usable /tokenize: sizes calibrated from usage.prompt_tokens")
    probe = HttpProbe(client, spec, builder)
    if focus:
        from .focus import focused_search

        res = focused_search(wrap_probe(probe) if wrap_probe else probe, spec, lo, hi, focus, log=say)
    else:
        res = search(wrap_probe(probe) if wrap_probe else probe, spec, lo, hi, log=say)
    res.notes = notes + client.problems + builder.problems + probe.notes + res.notes + [probe.cache_note()]
    res.model = name
    res.endpoint = client.base_url
    res.wall_s = time.monotonic() - t0
    return res
