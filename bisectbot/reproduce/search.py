"""The threshold search, pure logic: at which prompt size (tokens) does ``probe(size)`` turn to garbage?

:func:`search` drives any ``probe(size) -> SizeResult`` callable (no I/O here):
:func:`bisectbot.reproduce.threshold.search_threshold` hands it a probe of one running
OpenAI-compatible server, :func:`bisectbot.reproduce.command.search_threshold_command` one
of a command reproducer, :func:`bisectbot.reproduce.focus.focused_search` asks the bad
end's failing sizes first and then calls it.

The search (every chat request is expensive -- a 100K-token prefill of a 754B model --
so the number of requests is the cost minimised):

1. With a fixed ladder (``spec.sizes``): sweep it upwards, as the classic script does;
   an OK size above a GARBAGE size makes the result ``non-monotone`` (reported, not
   hidden). Then refine between the largest OK size below the first GARBAGE size and
   that GARBAGE size.
2. Without one: probe ``max_size``. GARBAGE there: the first bisection point; only when that
   is GARBAGE is ``min_size`` probed (GARBAGE there -> ``all-garbage`` after 3 requests). Then
   refine. OK there: no claim yet (issue 37, input 4: garbage only in a band, 12K-20K, reads OK
   at 32K) -- the coarse ladder (:func:`coarse_ladder`, ratio at most :data:`LADDER_RATIO`)
   from ``min_size`` up is asked first; a GARBAGE size on it is a band (``non-monotone``,
   refined below it), none is ``ok`` at exactly the sizes asked
   (:attr:`ThresholdResult.ok_sizes`). Over 2K-32K a healthy server costs 5 requests, over
   1K-120K 8 (was 1): the price of saying "no garbage" about sizes that were asked.
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
5. An INCONCLUSIVE size (issue 37, input 6) is not the end: it is asked again with a sibling
   prompt (``probe.confirm``: another filler seed) and, when that is undecided too, at a
   neighbouring size (:func:`neighbour`); only then does the refinement stop there. Reasons
   that no other prompt changes (:data:`SYSTEMATIC`: a misrouted answer) are not retried.
   A size decided GARBAGE is a bad result even when every size below it stays undecided:
   status ``garbage`` with ``last_ok`` ``None`` and the undecided sizes in the notes.

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
from dataclasses import dataclass, field
from typing import Any

from ..models import Outcome
from ..recipe import ReproducerSpec
from .classify import Classification
from .client import Reply

#: Statuses of a :class:`ThresholdResult`.
STATUSES = ("ok", "garbage", "all-garbage", "non-monotone", "error", "inconclusive")
_SERVER_TROUBLE = ("connection", "timeout", "http", "bad-response")

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
    #: The sampling fields every request carried (issue 37; empty for a command reproducer).
    sampling: dict[str, Any] = field(default_factory=dict)

    @property
    def interval(self) -> tuple[int | None, int | None]:
        """``(last_ok, first_garbage)`` in prompt tokens."""
        return self.last_ok, self.first_garbage

    @property
    def found_garbage(self) -> bool:
        return self.status in ("garbage", "all-garbage", "non-monotone")

    @property
    def ok_sizes(self) -> list[int]:
        """Measured sizes (tokens, ascending, each once) of the sizes asked that came out OK: what an
        "OK" claim may name (issue 37, input 4) -- nothing between them was asked."""
        return sorted({r.size for r in self.table if r.outcome == Outcome.OK})

    @property
    def undecided_sizes(self) -> list[int]:
        """Measured sizes (tokens, ascending, each once) asked that stayed INCONCLUSIVE and were
        never decided by a sibling prompt at the same requested size."""
        decided = {r.requested for r in self.table if r.outcome in (Outcome.OK, Outcome.GARBAGE)}
        return sorted({r.size for r in self.table if r.outcome == Outcome.INCONCLUSIVE and r.requested not in decided})

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "last_ok": self.last_ok, "first_garbage": self.first_garbage,
                "threshold": [self.last_ok, self.first_garbage], "table": [r.to_dict() for r in self.table],
                "requests": self.requests, "wall_s": round(self.wall_s, 3), "reasons": self.reasons,
                "error": self.error, "notes": self.notes, "model": self.model, "endpoint": self.endpoint,
                "min_size": self.min_size, "max_size": self.max_size, "transient": self.transient,
                "flaky": self.flaky, "second_finding": self.second_finding, "sampling": self.sampling}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ThresholdResult:
        """Inverse of :meth:`to_dict` (e.g. a result stored in the ledger)."""
        return cls(status=d["status"], last_ok=d.get("last_ok"), first_garbage=d.get("first_garbage"),
                   table=[SizeResult.from_dict(r) for r in d.get("table") or []], requests=int(d.get("requests", 0)),
                   wall_s=float(d.get("wall_s", 0.0)), reasons=list(d.get("reasons") or []), error=d.get("error"),
                   notes=list(d.get("notes") or []), model=d.get("model"), endpoint=d.get("endpoint"),
                   min_size=d.get("min_size"), max_size=d.get("max_size"),
                   transient=bool(d.get("transient", False)), flaky=list(d.get("flaky") or []),
                   second_finding=d.get("second_finding"), sampling=dict(d.get("sampling") or {}))


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
#: Largest factor between two neighbouring sizes of the coarse ladder asked before an OK claim
#: (issue 37, input 4). Kernels are chosen by size range, and those ranges are power-of-two
#: buckets: aiter's tuned-config CSVs key rows by M rounded up to a power of two, Triton autotune
#: keys on ``triton.next_power_of_2``, and the engine's prefill chunking halves/doubles. A ladder
#: whose steps are at most 2x puts a size inside every range ``[a, 2a)`` it spans (the largest
#: ladder size below ``a`` times at most 2 lands in it), so a band as wide as one bucket is never
#: stepped over. A narrower band (tt-metal#55102's 12K-20K is 1.67x) may be; the OK claim names
#: the sizes asked, so it never says more than was seen.
LADDER_RATIO = 2.0
#: Reason prefixes of an INCONCLUSIVE size that no sibling prompt or neighbouring size changes
#: (the server routes the answer to the wrong field at every size): not retried (issue 37, input 6).
SYSTEMATIC = ("misrouted",)


def coarse_ladder(lo: int, hi: int, ratio: float = LADDER_RATIO) -> list[int]:
    """Sizes (tokens) from ``lo`` to ``hi`` (both included), geometric with the fewest steps whose
    factor is at most ``ratio``: 2K-32K -> 2K, 4K, 8K, 16K, 32K; 1K-120K -> 8 sizes, 1.98x apart."""
    if hi <= lo:
        return [hi]
    n = max(1, math.ceil(math.log(hi / lo) / math.log(ratio) - 1e-9))
    return sorted({round(lo * (hi / lo) ** (i / n)) for i in range(n + 1)})


def neighbour(size: int, lo: int | None, hi: int | None, spec: ReproducerSpec) -> int | None:
    """A size (tokens) near an undecided ``size`` to ask instead, strictly between the decided ends
    ``lo`` (OK, or ``None``) and ``hi`` (GARBAGE, or ``None``): halfway (on the :func:`split_point` scale)
    to the nearer end that leaves room, else one tolerance step below ``size``. ``None`` when no other
    size fits."""
    cands: list[int] = []
    if lo is not None and size - lo > 1:
        cands.append(split_point(lo, size, spec))
    if hi is not None and hi - size > 1:
        cands.append(split_point(size, hi, spec))
    step = max(int(spec.tolerance * size), spec.tolerance_tokens, 1)
    if not cands and size - step > (lo if lo is not None else 0):
        cands.append(size - step)
    cands = [c for c in cands if c != size]
    return min(cands, key=lambda c: abs(c - size)) if cands else None


def cheap_split(lo: int, hi: int, spec: ReproducerSpec, left: int) -> int:
    """The next refinement size (tokens) of ``(lo, hi)`` when ``left`` sizes may still be probed
    before the confirmation: the point at :data:`LOW_SHARE` of the interval when either outcome
    can still be narrowed by bisection within ``left - 1`` sizes, else :func:`split_point`."""
    x = split_at(lo, hi, spec, LOW_SHARE)
    if 1 + max(splits_needed(lo, x, spec), splits_needed(x, hi, spec)) <= left:
        return x
    return split_point(lo, hi, spec)


#: The result of the threshold search running (or last run) in this process, as far as it got
#: (:class:`SearchInterrupted`: a Ctrl-C that lands between two probes is not raised inside one).
LAST_SEARCH: list[ThresholdResult | None] = [None]


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a threshold search: ``partial`` is the :class:`ThresholdResult` so far (its
    ``table`` holds every size answered), so the caller can say what was learnt (issue 41, item 11:
    ``probe`` printed "aborted" and nothing else)."""

    def __init__(self, partial: ThresholdResult):
        super().__init__("interrupted")
        self.partial = partial

    def interval(self) -> str:
        """What the sizes answered so far say, in prompt tokens: ``OK up to X, garbage from Y``."""
        table = self.partial.table
        bad = [r.size for r in table if r.outcome == Outcome.GARBAGE]
        first_bad = min(bad) if bad else None
        ok = [r.size for r in table if r.outcome == Outcome.OK and (first_bad is None or r.size < first_bad)]
        parts = []
        if ok:
            parts.append(f"OK up to {max(ok)} prompt tokens")
        if first_bad is not None:
            parts.append(f"garbage from {first_bad} prompt tokens")
        said = ", ".join(parts) if parts else "no size decided yet"
        return f"interrupted after {len(table)} size(s), {self.partial.requests} request(s): {said}"


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
    LAST_SEARCH[0] = res  # Ctrl-C between two probes: the caller still finds what was answered
    say = log or (lambda _m: None)
    sibling = getattr(probe, "confirm", None)

    def do(size: int) -> SizeResult:
        try:
            r = probe(size)
        except KeyboardInterrupt:
            raise SearchInterrupted(res) from None
        res.table.append(r)
        res.requests += r.requests
        why = f" ({join_whole(r.reasons, 160)})" if r.reasons and r.outcome != Outcome.OK else ""
        agree = f" agreement {r.agreement:.0%}" if r.requests > 1 else ""
        say(f"probe {len(res.table)}: {r.requested} tokens -> {r.size} measured: {r.outcome.value}{agree}{why}")
        return r

    def settle(r: SizeResult, lo: int | None, hi: int | None, near: bool = True) -> SizeResult:
        """``r`` when decided (or ERROR); else the size asked again with a sibling prompt, then (``near``)
        a neighbouring size strictly between ``lo`` and ``hi`` (issue 37, input 6): the first decided
        answer, else the last undecided one. On the coarse ladder ``near`` is off: its other sizes are
        the neighbours."""
        if r.outcome != Outcome.INCONCLUSIVE or any(x.startswith(SYSTEMATIC) for x in r.reasons):
            return r
        if callable(sibling):
            try:
                r2 = sibling(r.requested)
            except KeyboardInterrupt:
                raise SearchInterrupted(res) from None
            r2.evidence["sibling_of"] = r.size  # asked again with another prompt: r was undecided
            res.table.append(r2)
            res.requests += r2.requests
            say(f"retry {r.requested} tokens with another prompt (inconclusive: {join_whole(r.reasons, 100)}) -> "
                f"{r2.size} measured: {r2.outcome.value}")
            if r2.outcome in (Outcome.OK, Outcome.GARBAGE) or \
                    (r2.outcome == Outcome.ERROR and r2.error_kind != "over-limit"):
                return r2
        n = neighbour(r.size, lo, hi, spec) if near else None
        if n is None or not lo_size <= n <= hi_size or n in {x.requested for x in res.table}:
            return r
        say(f"{r.size} tokens undecided: asking the neighbouring size {n} tokens")
        r3 = do(n)
        return r3 if r3.outcome != Outcome.INCONCLUSIVE else r

    def finish(status: str, error: str | None = None) -> ThresholdResult:
        res.status = status
        res.error = error
        res.wall_s = time.monotonic() - t0
        if res.first_garbage is not None:
            for r in res.table:
                if r.outcome == Outcome.GARBAGE and r.size == res.first_garbage:
                    res.reasons = list(r.reasons)
                    break
        undecided = res.undecided_sizes
        if undecided and status != "error":
            res.notes.append(f"undecided (INCONCLUSIVE{', also with a sibling prompt' if callable(sibling) else ''}"
                             f"): {', '.join(map(str, undecided))} prompt tokens -- no claim about them")
        if status == "ok":
            res.notes.append(f"OK claim covers exactly the sizes asked: {', '.join(map(str, res.ok_sizes))} prompt "
                             "tokens; sizes between them were not asked")
        return res

    def fail(r: SizeResult) -> ThresholdResult:
        res.transient = bool(r.evidence.get("transient"))
        return finish("error", f"at {r.requested} tokens: {'; '.join(r.reasons) or 'server error'}")

    def bad_without_ok(first_bad: SizeResult) -> ThresholdResult:
        """A decided GARBAGE size with no decided OK size below it: ``all-garbage`` when it is the
        smallest size, else ``garbage`` with ``last_ok`` unknown (the undecided part is said)."""
        res.first_garbage = first_bad.size
        if first_bad.requested <= lo_size:
            return finish("all-garbage")
        res.notes.append(f"GARBAGE at {first_bad.size} prompt tokens is decided; no size below it could be "
                         "decided OK, so the threshold is somewhere below it (a bad result all the same)")
        return finish("garbage")

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
        r_hi = settle(do(hi_size), lo_size, None, near=False)  # undecided: the coarse ladder is its neighbours
        if r_hi.outcome == Outcome.ERROR:
            return fail(r_hi)
        if r_hi.outcome == Outcome.INCONCLUSIVE and any(x.startswith(SYSTEMATIC) for x in r_hi.reasons):
            res.notes.append(f"largest size {hi_size} inconclusive: {'; '.join(r_hi.reasons)}")
            return finish("inconclusive")
        lo = hi = None
        if r_hi.outcome != Outcome.GARBAGE:
            # OK (or undecided) at the largest size: no claim before the coarse ladder below it (issue 37, input 4)
            ladder = [x for x in coarse_ladder(lo_size, hi_size) if x < r_hi.requested]
            if r_hi.outcome == Outcome.INCONCLUSIVE:
                res.notes.append(f"largest size {hi_size} undecided ({'; '.join(r_hi.reasons)}): the coarse ladder "
                                 "below it decides")
            say(f"{r_hi.outcome.value} at {r_hi.size} tokens: asking the coarse ladder "
                f"{', '.join(map(str, ladder))} tokens (steps <= {LADDER_RATIO:g}x) before any claim")
            band: SizeResult | None = None
            prev_ok: int | None = None
            for x in ladder:
                seen = next((t for t in res.table if t.requested == x), None)
                r = seen or settle(do(x), prev_ok, None, near=False)
                if r.outcome == Outcome.ERROR:
                    if r.error_kind == "over-limit":
                        break
                    return fail(r)
                if r.outcome == Outcome.OK:
                    prev_ok = max(prev_ok or 0, r.size)
                elif r.outcome == Outcome.GARBAGE:
                    band = r
                    break
            if band is None:
                oks = res.ok_sizes
                if not oks:
                    return finish("inconclusive")
                res.last_ok = max(oks)
                return finish("ok")
            if r_hi.outcome == Outcome.OK:
                non_monotone = True
                res.notes.append(f"OK at {r_hi.size} above GARBAGE at {band.size} prompt tokens: garbage in a band "
                                 "of sizes, not from a threshold on")
            if prev_ok is None or prev_ok >= band.size:
                if non_monotone:
                    res.first_garbage = band.size
                    return finish("non-monotone")
                return bad_without_ok(band)
            lo, hi = prev_ok, band.size
        else:
            if not narrow_enough(lo_size, r_hi.size, spec) and lo_size < r_hi.size - 1:
                # the first bisection point before min_size: when it is OK, min_size is never needed
                r_mid = settle(do(split_point(lo_size, r_hi.size, spec)), None, r_hi.size)
                if r_mid.outcome == Outcome.ERROR:
                    return fail(r_mid)
                if r_mid.outcome == Outcome.OK and r_mid.size < r_hi.size:
                    lo, hi = r_mid.size, r_hi.size
                elif r_mid.outcome == Outcome.GARBAGE and r_mid.size < r_hi.size:
                    r_hi = r_mid
            if lo is None:
                r_lo = settle(do(lo_size), None, r_hi.size)
                if r_lo.outcome == Outcome.ERROR:
                    return fail(r_lo)
                if r_lo.outcome == Outcome.GARBAGE:
                    if r_lo.requested <= lo_size or r_lo.size <= lo_size:
                        res.first_garbage = r_lo.size
                        return finish("all-garbage")
                    return bad_without_ok(r_lo if r_lo.size < r_hi.size else r_hi)
                if r_lo.outcome == Outcome.INCONCLUSIVE:
                    res.notes.append(f"smallest size {lo_size} inconclusive: {'; '.join(r_lo.reasons)}")
                    return bad_without_ok(r_hi)
                lo, hi = r_lo.size, r_hi.size
                if lo >= hi:
                    res.first_garbage = hi
                    return finish("all-garbage")
    # refine between lo (OK) and hi (GARBAGE), both measured
    while not narrow_enough(lo, hi, spec):
        target = (split_point(lo, hi, spec) if size_budget is None
                  else cheap_split(lo, hi, spec, size_budget - len(res.table) - 2))  # 2: the confirmation
        r = settle(do(target), lo, hi)
        if r.outcome == Outcome.ERROR:
            res.last_ok, res.first_garbage = lo, hi
            return fail(r)
        if r.outcome == Outcome.INCONCLUSIVE:
            res.notes.append(f"{r.size} tokens inconclusive ({'; '.join(r.reasons)}), also with another prompt and "
                             "at a neighbouring size; refinement stopped")
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


def join_whole(items: list[str], limit: int = 160) -> str:
    """``items`` joined with ``; `` up to about ``limit`` characters, never cutting one mid-value:
    whole items only (the first always), then ``(+N more)`` for those left out (issue 14)."""
    out: list[str] = []
    for k, item in enumerate(items):
        if out and len("; ".join([*out, item])) > limit:
            return "; ".join(out) + f" (+{len(items) - k} more)"
        out.append(item)
    return "; ".join(out)
