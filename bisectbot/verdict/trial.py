"""A try job's answer (issue 42): does a change fix the candidate it was tried on?

Two probes of one candidate (the first bad, or the newest nightly): **before** -- as it is, the
try job's bad end -- and **after** -- with the change applied. The after probe asks the before
probe's failing prompts first (the scope of :mod:`.scope`, as every candidate of a bisection is
asked its bad end's), and the two are compared on **the same prompts** (a prompt is the same when
its :class:`bisectbot.models.PromptKey` identity is: filler seed and words, or the command's
``{size}``), never on sizes within a tolerance:

The after probe is asked *every* prompt on which before failed (GARBAGE; ERROR under ``regress:
error``), not only the first two the bisection's scope keeps, so that no answer rests on a prompt
the change was never asked:

* **fixed** -- after is good by the bisection's own rule (:meth:`.scope.Scope.judge`) and answered OK
  on *all* of those prompts, and failed at no size it asked (under ``regress: threshold-below N``:
  failed only at N tokens or more, the recipe's own question);
* **partly** -- the threshold moved up: after answered OK on every one of those prompts below its
  own first failure, which lies above the candidate's, and failed from there on: both thresholds are
  said ("the threshold moved from 20,480 to 25,600 prompt tokens", the seed report's case); OK and
  failing mixed below it, or a threshold that moved down, is no moved threshold (untested: a flaky
  candidate answers both ways);
* **still broken** -- after failed again on one or more of those prompts (``worse`` too when it
  failed where before answered OK);
* **untested** -- no comparison could be made: before was not bad (nothing to fix), before or after
  is a skip (the change does not apply, the build or the server failed), or after answered one of
  those prompts with an error or never got to it (an error, a dead server, a refused size is never
  read as fixed), with the reason.

For reproducers without prompts (a size-less command, ``regress: error``) the verdicts decide alone:
after good -> fixed, bad -> still broken. ``regress: slower`` and fix bisections are refused by the
caller (a measured verdict needs both ends; a fix bisection's "bad" is the fixed state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import ProbeResult, PromptKey, Verdict
from ..recipe import Recipe
from .scope import table_rows

__all__ = ["FIXED", "PARTLY", "STILL_BROKEN", "UNTESTED", "TryVerdict", "decide_try", "failing_outcome",
           "failing_prompts"]

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



def failing_outcome(recipe: Recipe) -> str:
    """The row outcome that is the failure the recipe bisects: ERROR under ``regress: error``, else GARBAGE."""
    return "ERROR" if recipe.regress.mode == "error" else "GARBAGE"


def _answers(recipe: Recipe, res: ProbeResult) -> dict[Any, dict[str, Any]]:
    """Per prompt identity, the last row of ``res`` that answered it (OK, GARBAGE or ERROR)."""
    seed = recipe.reproducer.seed if recipe.reproducer.kind == "prefill" else None
    out: dict[Any, dict[str, Any]] = {}
    for d in table_rows(res):
        if d.get("outcome") not in ("OK", "GARBAGE", "ERROR"):
            continue
        key = PromptKey.of_row(d, seed)
        if key is not None:
            out[key.identity] = {**d, "_key": key}
    return out


def failing_prompts(recipe: Recipe, res: ProbeResult) -> list[PromptKey]:
    """Every prompt on which ``res`` failed (:func:`failing_outcome`), smallest first: what the probe with
    the change is asked first, all of them."""
    fail = failing_outcome(recipe)
    rows = sorted((d for d in _answers(recipe, res).values() if d.get("outcome") == fail),
                  key=lambda d: int(d.get("requested") or 0))
    return [d["_key"] for d in rows]


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
    fail = failing_outcome(recipe)
    b_ans, a_ans = _answers(recipe, before), _answers(recipe, after)
    rows = []
    for ident, bd in b_ans.items():
        ad = a_ans.get(ident)
        rows.append({"prompt": bd["_key"].text(), "requested": bd.get("requested"), "measured": bd.get("prompt_tokens"),
                     "before": bd.get("outcome"), "after": ad.get("outcome") if ad else "not asked"})
    for ident, ad in a_ans.items():
        if ident not in b_ans:  # the change's own threshold search: where it fails now
            rows.append({"prompt": ad["_key"].text(), "requested": ad.get("requested"),
                         "measured": ad.get("prompt_tokens"), "before": "not asked", "after": ad.get("outcome")})
    rows.sort(key=lambda r: int(r.get("requested") or 0))
    below = recipe.regress.arg if recipe.regress.mode == "threshold-below" else None

    def asked(r: dict[str, Any]) -> bool:  # under threshold-below N, only sizes below N are the question
        size = r.get("measured") or r.get("requested")
        return not isinstance(below, int) or (isinstance(size, int) and size < below)

    failed_before = [r for r in rows if r["before"] == fail and asked(r)]
    cured = [r for r in failed_before if r["after"] == "OK"]
    still = [r for r in failed_before if r["after"] == fail]
    unanswered = [r for r in failed_before if r["after"] not in ("OK", fail)]  # an error, or not asked
    worse = [r for r in rows if r["before"] == "OK" and r["after"] == fail and asked(r)]
    errors_after = [r for r in rows if r["after"] == "ERROR" and fail != "ERROR" and asked(r)]
    failing_after = any(r["after"] == fail and asked(r) for r in rows)
    failing_beyond = any(r["after"] == fail for r in rows)
    both = f"without the change {_threshold_words(bt)}; with it {_threshold_words(at)}"
    if not failed_before:  # a size-less reproducer (a command's runs): the verdicts alone
        if after.verdict is Verdict.GOOD:
            return TryVerdict(FIXED, f"fixed: the reproducer passes with the change ({after.reason[:200]})", bt, at)
        return TryVerdict(STILL_BROKEN, f"still broken: the reproducer fails with the change ({after.reason[:200]})",
                          bt, at)
    if unanswered and not still:  # never "fixed" from prompts the change was not asked, or answered with an error
        r = unanswered[0]
        how = "was not asked (the probe ended before it)" if r["after"] == "not asked" else f"was answered {r['after']}"
        return TryVerdict(UNTESTED, f"could not be compared: with the change, the prompt of {r['requested']} tokens on "
                          f"which the candidate failed {how} ({len(unanswered)} of "
                          f"{len(failed_before)} such prompts); an error is never read as fixed; {both}", bt, at, rows)
    if after.verdict is Verdict.GOOD and len(cured) == len(failed_before) and not errors_after:
        if not failing_beyond:
            return TryVerdict(FIXED, f"fixed: OK on all {len(failed_before)} prompts on which the candidate failed "
                              f"without it, and no {fail} at any size asked; {both}", bt, at, rows)
        if isinstance(below, int) and not failing_after:  # the recipe's question: a threshold below N
            return TryVerdict(FIXED, f"fixed as the recipe asks (regress: threshold-below {below:,}): OK on all "
                              f"{len(failed_before)} prompts on which the candidate failed without it, {fail} only at "
                              f"{below:,} prompt tokens or more; {both}", bt, at, rows)
    if cured and not errors_after:
        # a moved threshold: OK on every failing prompt below the new first failure, failing from there on;
        # OK and failing mixed below it is no moved threshold (a flaky candidate answers both ways at random)
        first_after = min((int(r.get("measured") or r.get("requested") or 0) for r in still), default=None)
        below_new = [r for r in failed_before if first_after is None
                     or int(r.get("measured") or r.get("requested") or 0) < first_after]
        up = bool(bt and at and bt[1] is not None and at[1] is not None and at[1] > bt[1])
        if not up or any(r["after"] != "OK" for r in below_new):
            return TryVerdict(UNTESTED, f"could not be decided: with the change it answered OK on {len(cured)} and "
                              f"{fail} on {len(still)} of the {len(failed_before)} prompts on which it failed, not as a "
                              f"threshold moved up would (a flaky candidate answers both ways); {both}", bt, at, rows)
        moved = f"the threshold moved from {_tokens(bt[1])} to {_tokens(at[1])} prompt tokens: " if bt and at else ""
        return TryVerdict(PARTLY, f"partly: {moved}OK on {len(cured)} of the {len(failed_before)} prompts on which "
                          f"it failed without the change, {fail} from there on; {both}", bt, at, rows)
    if still:
        extra = f", and {fail} on {len(worse)} prompt(s) it answered OK without the change (worse)" if worse else ""
        return TryVerdict(STILL_BROKEN, f"still broken: {fail} on {len(still)} of the {len(failed_before)} prompts "
                          f"on which it failed without the change{extra}; {both}", bt, at, rows)
    if errors_after:
        r = errors_after[0]
        return TryVerdict(UNTESTED, f"could not be compared: with the change the server answered an error at "
                          f"{r['requested']} tokens ({len(errors_after)} prompt(s)); an error is never read as fixed; "
                          f"{both}", bt, at, rows)
    return TryVerdict(UNTESTED, f"could not be compared: the change's probe answered none of the prompts on which the "
                      f"candidate failed without it ({after.reason[:300]})", bt, at, rows)
