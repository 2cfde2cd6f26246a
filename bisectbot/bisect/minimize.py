"""Delta debugging inside a culprit (issue 42): the smallest subset of its parts that still fails.

Zeller and Hildebrandt's ``ddmin`` ("Simplifying and Isolating Failure-Inducing Input", IEEE TSE
2002), over the culprit's parts (files, then the hunks of the files that remain), each subset tested
on top of the culprit's predecessor. A test answers ``FAIL`` (the subset shows the culprit's
failure), ``PASS`` (it does not) or ``UNRESOLVED`` (it does not apply, build or start: a skip).
ddmin needs no constant: it halves, tries each part and each complement, and doubles the
granularity when neither fails; it ends with a **1-minimal** subset (removing any one part of it
passes or is unresolved) or when the probe budget is spent (the subset found so far is then not
known to be minimal, and the result says so).

No I/O here: the caller's ``test`` runs the probe. Each subset is tested at most once (a cache by
the subset), the empty subset is the predecessor (``PASS`` by the search that named the culprit)
and the whole set is the culprit (``FAIL``): neither costs a probe.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAIL", "PASS", "UNRESOLVED", "Minimized", "budget_for", "ddmin", "words"]

FAIL, PASS, UNRESOLVED = "fail", "pass", "unresolved"


@dataclass
class Minimized:
    """The result of :func:`ddmin`: ``subset`` (indices into the parts, sorted), ``minimal`` (True: 1-minimal;
    False: the budget ran out first), ``tests`` (each tested subset and its outcome, in order), ``probes``
    (tests that cost a probe)."""

    subset: tuple[int, ...]
    minimal: bool
    tests: list[tuple[tuple[int, ...], str]] = field(default_factory=list)

    @property
    def probes(self) -> int:
        return len(self.tests)


def budget_for(n: int) -> int:
    """The default probe budget of one ddmin over ``n`` parts: ``2 * ceil(log2 n) + 2``. One failing part
    costs ddmin two tests per halving (a half, then possibly its sibling or complement) down to one part,
    ``2 * ceil(log2 n)``; the ``+ 2`` pays for a part whose halves are both unresolved once. More causes
    or interacting parts need more, and the result then says the budget ran out (never a wrong answer:
    the subset found still fails)."""
    return 2 * math.ceil(math.log2(max(n, 2))) + 2


def _split(c: Sequence[int], n: int) -> list[tuple[int, ...]]:
    size, extra = divmod(len(c), n)
    out, i = [], 0
    for k in range(n):
        step = size + (1 if k < extra else 0)
        out.append(tuple(c[i:i + step]))
        i += step
    return [p for p in out if p]


def ddmin(n: int, test: Callable[[tuple[int, ...]], str], budget: int,
          known: dict[tuple[int, ...], str] | None = None) -> Minimized:
    """Minimise the failing set ``range(n)`` (the culprit's ``n`` parts) with ``test`` (a subset ->
    :data:`FAIL` / :data:`PASS` / :data:`UNRESOLVED`) and at most ``budget`` calls of it. ``known``:
    outcomes already measured (subset -> outcome; they cost nothing). Raises ValueError for ``n < 1``."""
    if n < 1:
        raise ValueError("ddmin needs at least one part")
    seen: dict[tuple[int, ...], str] = {(): PASS, tuple(range(n)): FAIL, **(known or {})}
    tests: list[tuple[tuple[int, ...], str]] = []

    def outcome(s: tuple[int, ...]) -> str | None:
        s = tuple(sorted(s))
        if s in seen:
            return seen[s]
        if len(tests) >= budget:
            return None
        got = test(s)
        seen[s] = got
        tests.append((s, got))
        return got

    c: tuple[int, ...] = tuple(range(n))
    gran = 2
    while len(c) >= 2:
        parts = _split(c, min(gran, len(c)))
        reduced = False
        for p in parts:  # a part alone fails: keep it, start over at granularity 2
            o = outcome(p)
            if o is None:
                return Minimized(c, False, tests)
            if o == FAIL:
                c, gran, reduced = p, 2, True
                break
        if not reduced and len(parts) > 2:  # with two parts each complement is the other part
            for p in parts:
                comp = tuple(x for x in c if x not in p)
                o = outcome(comp)
                if o is None:
                    return Minimized(c, False, tests)
                if o == FAIL:
                    c, gran, reduced = comp, max(gran - 1, 2), True
                    break
        if not reduced:
            if gran >= len(c):
                break
            gran = min(len(c), 2 * gran)
    return Minimized(tuple(sorted(c)), True, tests)


def words(m: dict[str, Any]) -> str:
    """One sentence for the report and the progress line, from the ``minimized`` document of
    :class:`bisectbot.session.stages.minimize.MinimizeStage`."""
    if not m:
        return ""
    if not m.get("searchable"):
        return f"the culprit could not be searched: {m.get('why')}"
    level, subset = m.get("level", "parts"), m.get("subset") or []
    minimal = all((m.get("minimal") or {}).values()) if m.get("minimal") else True
    one = len(subset) == 1
    total = m.get("hunks_total")
    where = (f"{len(subset)} of the {m.get('parts')} hunks of the file(s) kept" if level == "hunks" else
             f"{len(subset)} of its {m.get('parts')} files")
    shape = f" (the culprit: {total} hunks in {m.get('files')} files)" if total else ""
    found = (f"{where}{shape} still fail{'s' if one else ''} on top of the predecessor"
             + ("" if minimal else " (the probe budget ran out first: not known to be minimal)"))
    by = str(m.get("verified_by") or "a second start")
    ver = {"bad": f"verified by {by}", "good": f"did NOT fail in {by} (a flaky part: treat it as unconfirmed)",
           "skip": "could not be probed a second time"}.get(str(m.get("verified")), "")
    them = "it" if one else "them"
    whole = ("the whole cause among the parts the patch step could apply (the binary files were in no probe)"
             if m.get("binary_left_out") else "the whole cause")
    rest = {"good": f"the rest of the culprit without {them} is good: {'it is' if one else 'they are'} {whole}",
            "bad": "the rest of the culprit fails too: a second cause is in the rest",
            "skip": f"the rest of the culprit without {them} could not be probed",
            "empty": ""}.get(str(m.get("rest")), "")
    binary = m.get("binary_left_out") or []
    left = f"binary files left out of the search (the patch step cannot apply them): {', '.join(binary)}" \
        if binary else ""
    parts = "; ".join(x for x in (found + ": " + ", ".join(subset[:8]) + (" ..." if len(subset) > 8 else ""),
                                  ver, rest, left) if x)
    return f"{parts} ({m.get('probes')} probes)"

