"""A threshold search that asks first the prompts on which the bad end failed (issues 23 and 35).

A bisection compares each candidate with its bad end **on the same prompts**
(:mod:`bisectbot.verdict`). ``focus`` names those prompts
(:class:`bisectbot.models.PromptKey`: filler seed and words, the text itself, for the HTTP
reproducer; ``{size}`` for a command's; a bare int is a requested size) and
:func:`focused_search` asks them first, exactly (``probe.ask(key)``, the same text whatever the
candidate's tokenizer counts), before anything else:

* GARBAGE at the first focus prompt: the threshold is refined below it (the ordinary search
  with ``max_size`` = its requested size), never asking above it;
* OK at every focus prompt: the ordinary search runs for the rest of the range; when it ends
  in a server error above them (a crash reads as a refused connection), the result is ``ok`` up
  to the largest focus prompt and the failure is a *second finding*
  (:attr:`bisectbot.reproduce.search.ThresholdResult.second_finding`), not a reason to
  skip the candidate;
* an error at a focus prompt (not "over the limit"): status ``error`` (the candidate cannot be
  asked where the bad end fails).

A focus prompt whose requested size lies outside ``[min_size, max_size]`` (a server whose
``max_model_len`` cannot hold it) is not asked; the verdict module then calls the candidate a
skip: it could not be asked where the bad end fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..models import Outcome, PromptKey
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


def _cut_focus(asked: list[SizeResult], res: ThresholdResult) -> tuple[SizeResult, int] | None:
    """``(focus result, limit)`` when a request of this probe showed that the server silently cuts
    prompts at ``limit`` tokens (``evidence["truncated_at"]``, :mod:`bisectbot.reproduce.threshold`)
    and a focus prompt answered OK while measuring at least that many: the server may have seen only
    its end, so it was not asked the bad end's prompt (issue 35: a truncating candidate read good and
    the next commit was named). No constant: a prompt that measured the limit is a prompt that may
    have been cut."""
    limits = [int(t.evidence["truncated_at"]) for t in res.table if t.evidence.get("truncated_at")]
    if not limits:
        return None
    limit = min(limits)
    for r in asked:
        if r.outcome == Outcome.OK and r.size >= limit:
            return r, limit
    return None


def as_key(item: int | PromptKey) -> PromptKey:
    """A focus item as a :class:`PromptKey` (a bare int: a requested size)."""
    return item if isinstance(item, PromptKey) else PromptKey(int(item))


def focused_search(probe: Callable[[int], SizeResult], spec: ReproducerSpec, min_size: int, max_size: int,
                   focus: Sequence[int | PromptKey], log: Callable[[str], None] | None = None,
                   size_budget: int | None = SIZE_BUDGET) -> ThresholdResult:
    """The threshold search asking the ``focus`` prompts (the bad end's failing prompts, its first
    failing prompt first) before anything else; see the module docstring. Never raises for server trouble (an
    ``error`` status instead), as :func:`search`."""
    say = log or (lambda _m: None)
    keys = list(dict.fromkeys(as_key(k) for k in focus if min_size <= as_key(k).requested <= max_size))
    if not keys:
        return search(probe, spec, min_size, max_size, log=say, size_budget=size_budget)
    memo = _Memo(probe)
    ask = getattr(probe, "ask", None)
    asked: list[SizeResult] = []
    sizes = sorted({k.requested for k in keys})
    for key in keys:
        s = key.requested
        if key.words is not None and callable(ask):
            r = ask(key)  # the very prompt the bad end failed on
            memo.seen.setdefault(s, r)
        else:
            r = memo(s)
        asked.append(r)
        say(f"focus: {key.text()} (a prompt on which the bad end failed) -> measured "
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
    cut = _cut_focus(asked, res)
    if cut is not None:
        r, limit = cut
        res.status, res.second_finding = "error", None
        res.error = (f"at {r.requested} tokens (where the bad end failed): silent truncation: this prompt measured "
                     f"{r.size} tokens and the server keeps at most {limit} tokens of a prompt (a longer one "
                     f"measured as much), so its OK is no answer to the prompt the bad end failed on")
        res.notes.append(res.error)
        say(res.error)
        return res
    oks = [r.size for r in asked if r.outcome == Outcome.OK]
    if res.status == "error" and len(oks) == len(keys):
        # the candidate answered where the bad end failed; a failure above is a second finding
        res.second_finding = res.error or "server error"
        res.notes.append(f"second finding (above the bad end's failing sizes {', '.join(map(str, sizes))} tokens, "
                         f"not this comparison's question): {res.second_finding}")
        say(res.notes[-1])
        res.status, res.error, res.transient = "ok", None, False
        res.last_ok, res.first_garbage = max(oks), None
    return res


def failing_prompts(table: Sequence[Any], first_garbage: int | None,
                    default_seed: int | None = None) -> list[PromptKey]:
    """The prompts on which a bad end failed, to ask a candidate first: the prompt of its first
    garbage size and that of the smallest larger GARBAGE size of its table (the boundary
    confirmation's), as :class:`PromptKey` (rows of :meth:`SizeResult.to_dict` shape or
    :class:`SizeResult`; ``default_seed``: the recipe's seed, for rows recorded without one)."""
    if first_garbage is None:
        return []
    rows: list[tuple[int, PromptKey]] = []
    for t in table:
        d = t.to_dict() if hasattr(t, "to_dict") else t
        if not isinstance(d, dict) or d.get("outcome") != Outcome.GARBAGE.value:
            continue
        size = d.get("prompt_tokens") or d.get("requested")
        key = PromptKey.of_row(d, default_seed)
        if isinstance(size, int) and key is not None and size >= first_garbage:
            rows.append((size, key))
    rows.sort(key=lambda sk: sk[0])
    out = [k for s, k in rows if s == first_garbage][:1]
    larger = [k for s, k in rows if s > first_garbage]
    return out + larger[:1]


def focus_sizes(table: Sequence[Any], first_garbage: int | None) -> list[int]:
    """The requested sizes of :func:`failing_prompts` (tokens)."""
    return [k.requested for k in failing_prompts(table, first_garbage)]


__all__ = ["as_key", "failing_prompts", "focus_sizes", "focused_search"]
