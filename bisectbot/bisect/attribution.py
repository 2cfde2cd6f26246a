"""Component attribution: which coupled component (vLLM, aiter, ...) to bisect after the
mixed pairs, and where the others stay pinned (issue 12)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..models import Verdict


@dataclass
class Attribution:
    """Which component to bisect after the mixed pairs, and where the others stay.

    ``component`` None: no decision (``reason`` says why). ``pin`` is ``old`` (the others
    at their last-good commits: the component's change alone is bad) or ``new`` (the others
    at their first-bad commits: the component's change is needed, e.g. it uses an API that
    only the new version of another component has).
    """

    component: str | None
    pin: str
    reason: str
    exact: bool = True


def attribute_components(changed: Sequence[str], alone: dict[str, Verdict],
                         without: dict[str, Verdict] | None = None) -> Attribution:
    """Decide the component stage from the mixed pairs (pure rule, issue 12).

    ``alone[x]``: verdict of "new ``x`` + old others"; ``without[x]``: verdict of "old ``x``
    + new others" (for two components it is ``alone`` of the other one and may be left out).
    Ends: all old is good, all new is bad.

    * exactly one ``x`` bad alone -> bisect ``x``, others pinned **old**;
    * several bad alone -> the first of them, pinned old (``exact`` False: each reproduces);
    * none bad alone, but some ``x`` whose removal is good (``without[x]`` good) and whose
      change alone could not be tested (``alone[x]`` skip: e.g. new vLLM needs an aiter API
      that old aiter lacks) -> bisect ``x`` with the others pinned **new** (its ends are then
      good and bad);
    * else no decision: the regression needs the changes together (each alone is good) or
      no bisectable pair exists; said plainly, no component is blamed.
    """
    bad_alone = [x for x in changed if alone.get(x) is Verdict.BAD]
    if len(bad_alone) == 1:
        return Attribution(bad_alone[0], "old", f"the regression comes with {bad_alone[0]} alone")
    if bad_alone:
        return Attribution(bad_alone[0], "old", f"each of {', '.join(bad_alone)} is bad alone; "
                                                 f"bisecting {bad_alone[0]} first", exact=False)
    if without is None:
        without = {}
        if len(changed) == 2:
            a, b = changed
            without = {a: alone.get(b, Verdict.SKIP), b: alone.get(a, Verdict.SKIP)}
    needed = [x for x in changed if without.get(x) is Verdict.GOOD and alone.get(x) is not Verdict.GOOD]
    if needed:
        x = needed[0]
        others = ", ".join(c for c in changed if c != x)
        how = {Verdict.SKIP: "untestable", Verdict.GOOD: "good"}.get(alone.get(x, Verdict.SKIP), "good")
        return Attribution(x, "new", f"new {x} + old {others} is {how} and old {x} + new {others} is good: "
                                     f"{x}'s change is needed; bisecting {x} with {others} at the bad end")
    return Attribution(None, "old", "no single component reproduces alone and none is needed alone: "
                                    "the regression needs the changes together")
