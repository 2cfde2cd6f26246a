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

* a **bad** threshold verdict: the bad end's failing prompts (:mod:`.scope`, asked first of every
  candidate) it answered GARBAGE -- the bad end's own probe: every prompt it answered GARBAGE -- (under
  ``threshold-below: N`` only those below N tokens: the verdict says the threshold lies below N).
  GARBAGE on other prompts while the failing ones read OK is some failure, not the bad end's, and
  however many prompts it shows it is one measurement;
* a **good** threshold verdict of a scoped search (:mod:`.scope`): the bad end's failing prompts
  it answered OK -- every one of them, or it would not be good;
* a command's repeats (``hits`` of ``runs``): the failing runs of a bad verdict, all runs of a good
  one without a failing run.

Under ``start``, one more case needs no second start, once the run knows the bug shows in every start:
a **bad** threshold verdict that shows the bad end's failure (GARBAGE on two or more of the bad end's
failing prompts, its first GARBAGE size within :data:`bisectbot.bisect.REPROBE_BAND` of the bad end's).
The flake a start makes hides a bug -- a build bad for a whole start or not at all -- and never shows a
good build the bad end's failure, so that verdict's re-probe would not change *its* verdict
(:func:`_bad_end_failure`). But it measures something else: whether the bug shows in every start,
which the predecessor's good -- what such a flake fakes -- rests on. A single start of each build cannot
tell: a bug that shows in half the starts read good in both starts of its first bad commit and named the
next commit, verified, with the culprit probed once (generated world 202, server-flaky, no rates; the
culprit's re-probe is the run's only start of a build already seen failing). So the culprit is re-probed
until this run has seen some build fail again in a start of its own (``shows_every_start``: a re-probe,
a resumed run's second start, a stage's re-measured nightly), and only then is the culprit's one probe
taken for two measurements.

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
from .scope import SCOPED_MODES, Scope, table_rows


@dataclass(frozen=True)
class Agreement:
    """``count`` independent measurements agree on a probe's verdict; ``what`` says which, in words
    (``""`` for one)."""

    count: int = 1
    what: str = ""



def _garbage_keys(recipe: Recipe, res: ProbeResult) -> set[Any]:
    """Identities of the distinct prompts ``res`` answered GARBAGE (under ``threshold-below: N`` only
    those below N tokens)."""
    seed = recipe.reproducer.seed if recipe.reproducer.kind == "prefill" else None
    below = recipe.regress.arg if recipe.regress.mode == "threshold-below" else None
    keys: set[Any] = set()
    for d in table_rows(res):
        if d.get("outcome") != Outcome.GARBAGE.value:
            continue
        size = d.get("prompt_tokens") or d.get("requested")
        if isinstance(below, int) and not (isinstance(size, int) and size < below):
            continue
        key = PromptKey.of_row(d, seed)
        if key is not None:
            keys.add(key.identity)
    return keys


def _failing_garbage(recipe: Recipe, res: ProbeResult, scope: Scope) -> set[Any]:
    """Identities of the bad end's failing prompts (``scope.failing``) that ``res`` answered GARBAGE: the
    bad end's failure shown again. GARBAGE on other prompts -- while the failing ones read OK, or were not
    asked -- is some failure, not the bad end's: whatever made it, it is no second measurement of the
    question every candidate is asked (:mod:`.scope`)."""
    failing = {k.identity for k in scope.failing}
    return _garbage_keys(recipe, res) & failing


def _bad_end_failure(recipe: Recipe, res: ProbeResult, scope: Scope | None, bad_end_ref: str) -> Agreement:
    """``flake_unit: start``: a bad threshold verdict that shows the bad end's failure -- GARBAGE on two or
    more of the bad end's failing prompts (:func:`_failing_garbage`), its first GARBAGE size within
    :data:`bisectbot.bisect.REPROBE_BAND` of the bad end's (the band within which an exact search takes two
    thresholds of one build for one measurement; the bad end's own probe: that failure itself) -- is what a
    flake of a start cannot make: a start-level flake hides a bug (a build bad for a whole start or not at
    all), it never shows a good build the bad end's failure. Its re-probe would measure
    that failure once more; the predecessor's good, which such a flake does fake, is still re-probed."""
    from ..bisect import REPROBE_BAND

    if res.verdict is not Verdict.BAD or recipe.regress.mode not in SCOPED_MODES:
        return Agreement()
    n = len(_garbage_keys(recipe, res))
    if res.candidate.ref == bad_end_ref and n >= 2:  # the failure itself, measured in this run
        return Agreement(2, f"GARBAGE on {n} distinct prompts, the bad end's own failure: a flake of a server "
                            "start hides a bug, it does not show one (bisect.flake_unit: start)")
    if scope is None or res.candidate.ref == bad_end_ref or not res.threshold or res.threshold[1] is None:
        return Agreement()
    n = len(_failing_garbage(recipe, res, scope))
    lo, hi = sorted((int(res.threshold[1]), int(scope.failing_size)))
    if n < 2 or lo <= 0 or hi > lo * REPROBE_BAND:
        return Agreement()
    return Agreement(2, f"GARBAGE on {n} of the prompts the bad end failed, from {res.threshold[1]} tokens, the bad "
                        f"end's failure (from {scope.failing_size} tokens): a flake of a server start hides a bug, "
                        "it does not show one (bisect.flake_unit: start)")


def agreeing(recipe: Recipe, res: ProbeResult, scope: Scope | None, *, this_run: bool,
             bad_end_ref: str = "", shows_every_start: bool = False) -> Agreement:
    """The independent measurements ``res``'s verdict holds under ``recipe.bisect.flake_unit`` (module
    docstring); ``scope``: the bad end's failing prompts once known; ``this_run``: ``res`` was measured
    by this run (or the interrupted run it resumes), not taken from another run's ledger rows;
    ``bad_end_ref``: the search's bad end (its own probe is never a second measurement of itself);
    ``shows_every_start``: this run has seen a build that failed fail again in a start of its own (under
    ``start``, module docstring: until then a bad verdict holds one measurement). Always at least one."""
    if (res.verdict is Verdict.SKIP or not this_run
            or recipe.regress.is_fix or recipe.regress.mode == "slower" or is_patch_mode(recipe.regress)):
        return Agreement()
    if recipe.bisect.flake_unit != "request":
        return _bad_end_failure(recipe, res, scope, bad_end_ref) if shows_every_start else Agreement()
    extra = res.extra if isinstance(res.extra, dict) else {}
    hits, runs = extra.get("hits"), extra.get("runs")
    if not res.table and isinstance(hits, int) and isinstance(runs, int) and 0 <= hits <= runs:
        n = hits if res.verdict is Verdict.BAD else (runs if hits == 0 else 0)
        what = "failing runs" if res.verdict is Verdict.BAD else "passing runs"
        return Agreement(n, f"{n} {what} of one start") if n >= 2 else Agreement()
    if recipe.regress.mode not in SCOPED_MODES:
        return Agreement()
    if res.verdict is Verdict.BAD:
        own = res.candidate.ref == bad_end_ref
        if scope is None and not own:
            return Agreement()
        n = len(_garbage_keys(recipe, res) if own else _failing_garbage(recipe, res, scope))
        where = "distinct prompts" if own else "of the prompts the bad end failed"
        return (Agreement(n, f"GARBAGE on {n} {where} in one start (bisect.flake_unit: request)")
                if n >= 2 else Agreement())
    if scope is None:
        return Agreement()
    got = scope.answers(res)
    ok = [k for k in scope.failing if got.get(k, {}).get("outcome") == Outcome.OK.value]
    n = len({k.identity for k in ok})
    if n < 2 or len(ok) != len(scope.failing):
        return Agreement()
    return Agreement(n, f"OK on {'both' if n == 2 else f'all {n}'} prompts the bad end failed, in one start "
                        "(bisect.flake_unit: request)")


#: The plausibility flag (:data:`bisectbot.bisect.blame.FLAG_TEXT`) of a culprit and predecessor built two ways.
MIXED_BUILDS_FLAG = "mixed-builds"


def _built_kind(text: str) -> str:
    return "wheel" if text.startswith("prebuilt wheel") else "source" if text.startswith("source build") else ""


def mixed_builds(probes: list[ProbeResult], first_bad: str, last_good: str) -> str:
    """Why the culprit ``first_bad`` and its predecessor ``last_good`` (refs) cannot be compared as two
    commits: one installed from a prebuilt wheel, the other built from source (their last probes'
    ``extra["built_from"]``, :mod:`bisectbot.run.commit_wheels`); ``""`` when both came the same way. A wheel
    and a source build differ beyond the commit (compiler, flags, bundled libraries), so the step between
    them may be the build's, not the change's."""
    def kind(ref: str) -> tuple[str, str]:
        p = next((p for p in reversed(probes) if p.candidate.ref == ref), None)
        text = str(p.extra.get("built_from") or "") if p is not None and isinstance(p.extra, dict) else ""
        return _built_kind(text), text

    (kb, tb), (kg, tg) = kind(first_bad), kind(last_good)
    if not kb or not kg or kb == kg:
        return ""
    return (f"the culprit was {'installed from a prebuilt wheel' if kb == 'wheel' else 'built from source'} and its "
            f"predecessor {'installed from a prebuilt wheel' if kg == 'wheel' else 'built from source'} ({_cut(tb)}; "
            f"{_cut(tg)}): the two differ beyond the commit, so the change between them may be the build's")


def _cut(text: str, limit: int = 240) -> str:
    """``text`` whole up to ``limit`` characters, else cut at a word boundary with an ellipsis (a URL or
    SHA is never cut in its middle)."""
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0]
    return head + " ..."


def expected_reprobes(recipe: Recipe) -> int:
    """Verification re-probes an exact search of ``recipe`` expects when every probe agrees with itself
    (for the plan's and the progress lines' estimate; the search decides per role): a threshold search
    under ``flake_unit: request`` none; under ``start`` two (the culprit's probe stands for two only once
    the run has seen a build fail in two starts: module docstring), a command with repeats under
    ``request`` none, anything else two."""
    from .scope import scoped

    if not recipe.bisect.verify:
        return 0
    if not scoped(recipe):  # a command: under request its repeats are its requests (hits of runs)
        return 0 if recipe.bisect.flake_unit == "request" and recipe.reproducer.repeats >= 2 else 2
    return 0 if recipe.bisect.flake_unit == "request" else 2


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


__all__ = ["MIXED_BUILDS_FLAG", "Agreement", "agreeing", "expected_reprobes", "mixed", "mixed_builds"]
