"""How many independent measurements one probe's verdict holds (issue 40).

An exact search verifies its answer by two agreeing measurements of each role -- the culprit
bad, its predecessor good (:meth:`bisectbot.bisect.Bisection.measurements_of`). What counts as
*independent* is the recipe's flake unit (``bisect.flake_unit``):

* ``start`` (the default): a build can be bad for a whole server start or not at all (kernels
  autotuned at start-up, ``../shared/design/DOMAIN.md``), so every request of one start is one
  measurement and a role's second measurement is a second server start (a re-probe);
* ``request``: each request -- each prompt of a threshold search, each run of a command -- is its
  own draw, so one probe that already holds two agreeing requests verified its role and a second
  start adds nothing the verification's standard asks for.

Agreeing requests, counted on **distinct prompts** (:class:`bisectbot.models.PromptKey`: a prompt
asked twice can be answered from a cache and is one draw):

* a **bad** threshold verdict: the prompts answered GARBAGE (under ``threshold-below: N`` only
  those below N tokens: the verdict says the threshold lies below N);
* a **good** threshold verdict of a scoped search (:mod:`.scope`): the bad end's failing prompts
  it answered OK -- every one of them, or it would not be good;
* a command's repeats (``hits`` of ``runs``): the failing runs of a bad verdict, all runs of a good
  one without a failing run.

Everything else is one measurement: a verdict taken from the ledger or given by a maintainer (a
re-probe is a new measurement of *this* run's question, issue 35), a fix bisection, patch states,
a measured-value verdict (a statistical test over its samples), a skip. No constant enters: the
count is of what the probe recorded, and the standard (two) is the verification's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Outcome, ProbeResult, PromptKey, Verdict, is_patch_mode
from ..recipe import Recipe
from .scope import SCOPED_MODES, Scope


@dataclass(frozen=True)
class Agreement:
    """``count`` independent measurements agree on a probe's verdict; ``what`` says which, in words
    (``""`` for one)."""

    count: int = 1
    what: str = ""


def _rows(res: ProbeResult) -> list[dict[str, Any]]:
    return [d for d in ((t.to_dict() if hasattr(t, "to_dict") else t) for t in res.table or [])
            if isinstance(d, dict)]


def agreeing(recipe: Recipe, res: ProbeResult, scope: Scope | None, *, this_run: bool) -> Agreement:
    """The independent measurements ``res``'s verdict holds under ``recipe.bisect.flake_unit`` (module
    docstring); ``scope``: the bad end's failing prompts once known; ``this_run``: ``res`` was measured
    by this run (or the interrupted run it resumes), not taken from another run's ledger rows. Always
    at least one."""
    if (recipe.bisect.flake_unit != "request" or res.verdict is Verdict.SKIP or not this_run
            or recipe.regress.is_fix or recipe.regress.mode == "slower" or is_patch_mode(recipe.regress)):
        return Agreement()
    extra = res.extra if isinstance(res.extra, dict) else {}
    hits, runs = extra.get("hits"), extra.get("runs")
    if not res.table and isinstance(hits, int) and isinstance(runs, int) and 0 <= hits <= runs:
        n = hits if res.verdict is Verdict.BAD else (runs if hits == 0 else 0)
        what = "failing runs" if res.verdict is Verdict.BAD else "passing runs"
        return Agreement(n, f"{n} {what} of one start") if n >= 2 else Agreement()
    if recipe.regress.mode not in SCOPED_MODES:
        return Agreement()
    seed = recipe.reproducer.seed if recipe.reproducer.kind == "prefill" else None
    if res.verdict is Verdict.BAD:
        below = recipe.regress.arg if recipe.regress.mode == "threshold-below" else None
        keys: set[Any] = set()
        for d in _rows(res):
            if d.get("outcome") != Outcome.GARBAGE.value:
                continue
            size = d.get("prompt_tokens") or d.get("requested")
            if isinstance(below, int) and not (isinstance(size, int) and size < below):
                continue
            key = PromptKey.of_row(d, seed)
            if key is not None:
                keys.add(key.identity)
        n = len(keys)
        return Agreement(n, f"GARBAGE on {n} distinct prompts in one start") if n >= 2 else Agreement()
    if scope is None:
        return Agreement()
    got = scope.answers(res)
    ok = [k for k in scope.failing if got.get(k, {}).get("outcome") == Outcome.OK.value]
    n = len({k.identity for k in ok})
    if n < 2 or len(ok) != len(scope.failing):
        return Agreement()
    return Agreement(n, f"OK on all {n} prompts the bad end failed, in one start")


def mixed(res: ProbeResult, scope: Scope | None) -> str:
    """Why ``res`` shows its requests disagreeing on the prompts on which the bad end failed (GARBAGE on
    one, OK on another), or ``""``. Under ``flake_unit: request`` that is a request-level draw deciding
    the answer (a flaky bug, or a threshold that moved between those prompts): two agreeing requests of
    one probe are then no verification, and the round loop re-probes every role
    (:meth:`bisectbot.bisect.Bisection.single_measurements`)."""
    if scope is None or res.verdict is Verdict.SKIP:
        return ""
    got = scope.answers(res)
    outcomes = {k.text(): d.get("outcome") for k, d in got.items()}
    if Outcome.GARBAGE.value in outcomes.values() and Outcome.OK.value in outcomes.values():
        said = ", ".join(f"{k} -> {v}" for k, v in outcomes.items())
        return f"{res.candidate.label or res.candidate.ref[:12]} answered the bad end's failing prompts both ways ({said})"
    return ""


__all__ = ["Agreement", "agreeing", "mixed"]
