"""A threshold search that asks first where the bad end failed (issue 23, input 2).

A bisection compares candidates with its bad end. The ordinary search
(:func:`bisectbot.reproduce.search.search`) opens at ``max_size``; a candidate whose
server dies at a large prompt (a crash above the threshold, aiter#5049) then ends as an
``error`` -- a skip -- although it could answer at the sizes that matter. With ``focus``
(the bad end's first-garbage size and its confirmation size, tokens) :func:`focused_search`
probes those sizes first:

* GARBAGE at the first focus size: the threshold is refined below it (the ordinary search
  with ``max_size`` = that size), never asking above it;
* OK at every focus size: the ordinary search runs for the rest of the range; when it ends
  in a server error above the focus sizes (a crash reads as a refused connection), the result is ``ok`` up to the
  largest focus size and the failure is a *second finding*
  (:attr:`bisectbot.reproduce.search.ThresholdResult.second_finding`), not a reason to
  skip the candidate;
* an error at a focus size: status ``error`` (the candidate cannot be asked where the bad
  end fails).

Focus sizes outside ``[min_size, max_size]`` are left out; with none left it is the
ordinary search (the session's scope rule, :mod:`bisectbot.verdict.scope`, then says the
candidate was not tested at the failing size).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..models import Outcome
from ..recipe import ReproducerSpec
from .search import SIZE_BUDGET, SizeResult, ThresholdResult, search


class _Memo:
    """``probe(size)`` that answers a size asked before (by requested tokens) with the same
    :class:`SizeResult` object (deduplicated from the table afterwards); ``confirm`` passes through."""

    def __init__(self, probe: Callable[[int], SizeResult]):
        self.inner = probe
        self.seen: dict[int, SizeResult] = {}
        if callable(getattr(probe, "confirm", None)):
            self.confirm = probe.confirm  # type: ignore[attr-defined]

    def __call__(self, size: int) -> SizeResult:
        if size not in self.seen:
            self.seen[size] = self.inner(size)
        return self.seen[size]


def _merge(first: list[SizeResult], res: ThresholdResult) -> ThresholdResult:
    """``first`` (the focus probes, in order) then the search's table, each result once;
    ``requests`` recounted from the table."""
    table: list[SizeResult] = []
    ids: set[int] = set()
    for r in [*first, *res.table]:
        if id(r) not in ids:
            ids.add(id(r))
            table.append(r)
    res.table = table
    res.requests = sum(r.requests for r in table)
    return res


def focused_search(probe: Callable[[int], SizeResult], spec: ReproducerSpec, min_size: int, max_size: int,
                   focus: Sequence[int], log: Callable[[str], None] | None = None,
                   size_budget: int | None = SIZE_BUDGET) -> ThresholdResult:
    """The threshold search asking the ``focus`` sizes (tokens, the bad end's first failing
    size first) before anything else; see the module docstring. Never raises for server
    trouble (an ``error`` status instead), as :func:`search`."""
    say = log or (lambda _m: None)
    sizes = sorted({int(s) for s in focus if min_size <= int(s) <= max_size})
    if not sizes:
        return search(probe, spec, min_size, max_size, log=say, size_budget=size_budget)
    memo = _Memo(probe)
    asked: list[SizeResult] = []
    for s in sizes:
        r = memo(s)
        asked.append(r)
        say(f"focus: requested {s} tokens (taken from the bad end's measured failing sizes) -> measured "
            f"{r.size} ({r.counted_by}): {r.outcome.value}")
        if r.outcome == Outcome.ERROR and r.error_kind != "over-limit":
            res = ThresholdResult(status="error", table=list(asked), requests=sum(x.requests for x in asked),
                                  min_size=min_size, max_size=max_size,
                                  error=f"at {s} tokens (where the bad end failed): "
                                        f"{'; '.join(r.reasons) or 'server error'}",
                                  transient=bool(r.evidence.get("transient")))
            return res
        if r.outcome == Outcome.GARBAGE:
            # refine below the failing size only: nothing above it is this comparison's question
            below = spec
            if spec.sizes:  # a fixed ladder: its sizes below the failing size, then the failing size itself
                below = spec.model_copy(update={"sizes": sorted({x for x in spec.sizes if x < s} | {s})})
            res = _merge(asked, search(memo, below, min_size, s, log=say, size_budget=size_budget))
            res.max_size = max_size
            res.notes.append(f"asked first at {s} tokens, where the bad end failed: garbage; refined below it")
            return res
        if r.outcome != Outcome.OK:
            break  # inconclusive / over the limit: the ordinary search decides
    res = _merge(asked, search(memo, spec, min_size, max_size, log=say, size_budget=size_budget))
    oks = [r.size for r in asked if r.outcome == Outcome.OK]
    if res.status == "error" and len(oks) == len(sizes):
        # the candidate answered where the bad end failed; a failure above is a second finding
        res.second_finding = res.error or "server error"
        res.notes.append(f"second finding (above the bad end's failing sizes {', '.join(map(str, sizes))} tokens, "
                         f"not this comparison's question): {res.second_finding}")
        say(res.notes[-1])
        res.status, res.error, res.transient = "ok", None, False
        res.last_ok, res.first_garbage = max(oks), None
    return res


def focus_sizes(table: Sequence[Any], first_garbage: int | None) -> list[int]:
    """The sizes (tokens) where a bad end failed, to ask a candidate first: its first garbage
    size and the smallest larger GARBAGE size of its table (the boundary confirmation's), from
    rows of :meth:`SizeResult.to_dict` shape or :class:`SizeResult`."""
    if first_garbage is None:
        return []
    out = [int(first_garbage)]
    larger: list[int] = []
    for t in table:
        d = t.to_dict() if hasattr(t, "to_dict") else t
        if not isinstance(d, dict) or d.get("outcome") != Outcome.GARBAGE.value:
            continue
        size = d.get("prompt_tokens") or d.get("requested")
        if isinstance(size, int) and size > first_garbage:
            larger.append(size)
    if larger:
        out.append(min(larger))
    return out


__all__ = ["focus_sizes", "focused_search"]
