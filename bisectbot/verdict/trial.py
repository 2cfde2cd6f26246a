"""A try job's answer (issue 42): does a change fix the candidate it was tried on?

Two probes of one candidate (the first bad, or the newest nightly): **before** -- as it is, the
try job's bad end -- and **after** -- with the change applied. The after probe asks the before
probe's failing prompts first (the scope of :mod:`.scope`, as every candidate of a bisection is
asked its bad end's), and the two are compared on **the same prompts** (a prompt is the same when
its :class:`bisectbot.models.PromptKey` identity is: filler seed and words, or the command's
``{size}``), never on sizes within a tolerance:

* **fixed** -- after is good by the bisection's own rule (:meth:`.scope.Scope.judge`: OK on every
  prompt on which before failed, and no GARBAGE at any size it asked; under ``regress: threshold-below
  N`` GARBAGE only at N tokens or more, the recipe's own question);
* **partly** -- after answered OK on at least one prompt on which before failed (the change moved
  the failure), but still answered GARBAGE somewhere: both thresholds are said ("the threshold
  moved from 20,480 to 25,600 prompt tokens", the seed report's case);
* **still broken** -- after failed on every prompt on which before failed that it was asked
  (``worse`` too when it failed where before answered OK);
* **untested** -- no comparison could be made: before was not bad (nothing to fix on this
  candidate), or after is a skip (the change does not apply, the build or the server failed, a
  prompt could not be asked), with the reason.

For reproducers without prompts (a size-less command, ``regress: error``) the verdicts decide alone:
after good -> fixed, bad -> still broken. ``regress: slower`` and fix bisections are refused by the
caller (a measured verdict needs both ends; a fix bisection's "bad" is the fixed state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import ProbeResult, PromptKey, Verdict
from ..recipe import Recipe

__all__ = ["FIXED", "PARTLY", "STILL_BROKEN", "UNTESTED", "TryVerdict", "decide_try"]

FIXED, PARTLY, STILL_BROKEN, UNTESTED = "fixed", "partly", "still broken", "untested"


@dataclass
class TryVerdict:
    """``answer``: one of :data:`FIXED`, :data:`PARTLY`, :data:`STILL_BROKEN`, :data:`UNTESTED`;
    ``words``: the sentence said on the issue; ``before`` / ``after``: each probe's
    ``[last_ok, first_garbage]`` (prompt tokens, None where not measured); ``prompts``: one row per
    prompt asked (``{"prompt", "requested", "measured", "before", "after"}``: tokens and outcomes)."""

    answer: str
    words: str
    before: list[int | None] | None = None
    after: list[int | None] | None = None
    prompts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``try.json``, the ledger's try session)."""
        return {"answer": self.answer, "words": self.words, "before": self.before, "after": self.after,
                "prompts": list(self.prompts)}


def _rows(res: ProbeResult) -> list[dict[str, Any]]:
    return [d for d in ((t.to_dict() if hasattr(t, "to_dict") else t) for t in res.table or [])
            if isinstance(d, dict)]


def _answers(recipe: Recipe, res: ProbeResult) -> dict[Any, dict[str, Any]]:
    """Per prompt identity, its last decided row (OK or GARBAGE) of ``res``."""
    seed = recipe.reproducer.seed if recipe.reproducer.kind == "prefill" else None
    out: dict[Any, dict[str, Any]] = {}
    for d in _rows(res):
        if d.get("outcome") not in ("OK", "GARBAGE"):
            continue
        key = PromptKey.of_row(d, seed)
        if key is not None:
            out[key.identity] = {**d, "_key": key}
    return out


def _tokens(n: int | None) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"


def _threshold_words(th: list[int | None] | None) -> str:
    if not th or th[1] is None:
        return "no GARBAGE at any size asked"
    lo, hi = th[0], th[1]
    return f"GARBAGE from {_tokens(hi)} prompt tokens" + (f" (OK at {_tokens(lo)})" if lo is not None else "")


def decide_try(recipe: Recipe, before: ProbeResult, after: ProbeResult) -> TryVerdict:
    """The try job's answer from the ``before`` and ``after`` probes of one candidate (``after``
    already judged by the scope of ``before``'s failing prompts when there is one). See the module
    doc; no constant enters: prompts are the same or they are not."""
    bt = list(before.threshold) if before.threshold else None
    at = list(after.threshold) if after.threshold else None
    if before.verdict is Verdict.SKIP:
        return TryVerdict(UNTESTED, f"could not be tested: without the change the candidate could not be probed "
                          f"({before.reason[:300]})", bt, None)
    if before.verdict is not Verdict.BAD:
        return TryVerdict(UNTESTED, f"nothing to fix here: without the change the candidate is already "
                          f"{before.verdict.value} ({before.reason[:300]}); the change was not probed", bt, None)
    if after.verdict is Verdict.SKIP:
        return TryVerdict(UNTESTED, f"could not be tested: {after.reason[:400]}", bt, None)
    b_ans, a_ans = _answers(recipe, before), _answers(recipe, after)
    rows = []
    for ident, bd in sorted(b_ans.items(), key=lambda kv: int(kv[1].get("requested") or 0)):
        ad = a_ans.get(ident)
        rows.append({"prompt": bd["_key"].text(), "requested": bd.get("requested"), "measured": bd.get("prompt_tokens"),
                     "before": bd.get("outcome"), "after": ad.get("outcome") if ad else "not asked"})
    for ident, ad in sorted(a_ans.items(), key=lambda kv: int(kv[1].get("requested") or 0)):
        if ident not in b_ans:  # the change's own threshold search: where it fails now
            rows.append({"prompt": ad["_key"].text(), "requested": ad.get("requested"),
                         "measured": ad.get("prompt_tokens"), "before": "not asked", "after": ad.get("outcome")})
    rows.sort(key=lambda r: int(r.get("requested") or 0))
    failed_before = [r for r in rows if r["before"] == "GARBAGE"]
    cured = [r for r in failed_before if r["after"] == "OK"]
    still = [r for r in failed_before if r["after"] == "GARBAGE"]
    worse = [r for r in rows if r["before"] == "OK" and r["after"] == "GARBAGE"]
    garbage_after = any(d.get("outcome") == "GARBAGE" for d in a_ans.values())
    both = f"without the change {_threshold_words(bt)}; with it {_threshold_words(at)}"
    if not b_ans:  # a size-less reproducer: the verdicts alone
        if after.verdict is Verdict.GOOD:
            return TryVerdict(FIXED, f"fixed: the reproducer passes with the change ({after.reason[:200]})", bt, at)
        return TryVerdict(STILL_BROKEN, f"still broken: the reproducer fails with the change ({after.reason[:200]})",
                          bt, at)
    if after.verdict is Verdict.GOOD and not garbage_after:
        return TryVerdict(FIXED, f"fixed: OK on every prompt on which the candidate failed without it "
                          f"({len(failed_before)}), and no GARBAGE at any size asked; {both}", bt, at, rows)
    below = recipe.regress.arg if recipe.regress.mode == "threshold-below" else None
    if after.verdict is Verdict.GOOD and isinstance(below, int):  # the recipe's question: a threshold below N
        return TryVerdict(FIXED, f"fixed as the recipe asks (regress: threshold-below {below:,}): OK on every prompt "
                          f"on which the candidate failed without it ({len(failed_before)}), GARBAGE only at "
                          f"{below:,} prompt tokens or more; {both}", bt, at, rows)
    if cured:
        moved = ""
        if bt and at and bt[1] is not None and at[1] is not None:
            moved = f"the threshold moved from {_tokens(bt[1])} to {_tokens(at[1])} prompt tokens: "
        return TryVerdict(PARTLY, f"partly: {moved}OK on {len(cured)} of the {len(failed_before)} prompts on which "
                          f"it failed without the change, GARBAGE elsewhere; {both}", bt, at, rows)
    if still or after.verdict is Verdict.BAD:
        extra = f", and GARBAGE on {len(worse)} prompt(s) it answered OK without the change (worse)" if worse else ""
        return TryVerdict(STILL_BROKEN, f"still broken: GARBAGE on {len(still)} of the {len(failed_before)} prompts "
                          f"on which it failed without the change{extra}; {both}", bt, at, rows)
    return TryVerdict(UNTESTED, f"could not be compared: the change's probe answered none of the prompts on which the "
                      f"candidate failed without it ({after.reason[:300]})", bt, at, rows)
