"""Descent through dependency pins (issue 26): when a first-bad only moves pins, bisect the pinned component.

Chromium's Pinpoint descends into a DEPS roll the same way. :func:`commit_descent` looks at the
diff of a first-bad commit against its last good (:func:`bisectbot.sources.pinned.pin_diff`);
:func:`image_descent` at the components of two nightly images whose only change is a pinned
component's version (:func:`bisectbot.components.diff_images`, which reads ``versions.txt`` through
:mod:`bisectbot.pins`). Both give a :class:`Descent`: what moved, what the stage result should say,
and, when the pinned package is a configured component whose two pins exist in its repository,
the range to bisect there (:func:`bisectbot.sources.pinned.pin_range`, mapped across rewritten
histories). A pin bump that cannot be bisected is flagged ``pin-bump``: it is not blamed as a code
change. A pin bump mixed with a real code change is not descended, and the message says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import BadInput
from ..models import Candidate
from ..pins import PinMove, match_component
from ..recipe import GitSource
from ..sources.git import GitRepo
from ..sources.pinned import PinRange, pin_diff, pin_range

PIN_BUMP_FLAG = "pin-bump"
"""Flag of a first-bad whose change only moves pins that cannot be bisected (see ``FLAG_TEXT``)."""


@dataclass
class Descent:
    """What a first-bad candidate that moves pins leads to.

    ``moves`` are the pins it moves; ``message`` is the sentence for the stage result and the
    report; ``component`` the configured component to descend into (None: no descent) over
    ``range``, with the pinning side ``held`` (component -> ref: the parent at its first-bad).
    ``flags`` is ``["pin-bump"]`` when the bump cannot be bisected (not blamed as a code change).
    ``move`` is the move descended into.
    """

    moves: list[PinMove]
    message: str
    component: str | None = None
    move: PinMove | None = None
    range: PinRange | None = None
    held: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def name_of(c: Candidate) -> str:
    """A candidate as the descent's messages name it: 12 hex of a commit, else its label (a tag)."""
    if c.kind.value == "commit":
        return c.ref[:12]
    return c.label or c.ref[:12]


def _moves_text(moves: Sequence[PinMove]) -> str:
    return ", ".join(m.text() for m in moves)


def _pin_names(components: Mapping[str, GitSource]) -> dict[str, list[str]]:
    return {name: list(src.pin_names) for name, src in components.items()}


def configured(move: PinMove, components: Mapping[str, GitSource]) -> str | None:
    """The recipe component ``move`` pins: by its key (``aiter``), its name as written (``amd-aiter``,
    ``3rdparty/composable_kernel``) or the component's ``pin_names``; None when none is configured."""
    names = _pin_names(components)
    return match_component(move.component, names) or match_component(move.name, names)


def decide(name: str, moves: Sequence[PinMove], held: Mapping[str, str], components: Mapping[str, GitSource],
           repo_of: Callable[[str], GitRepo], *, exclude: Sequence[str] = ()) -> Descent:
    """The descent for ``moves`` of a first-bad called ``name`` (pins only, no code change).

    The first move of a configured component (other than those in ``exclude``: the pinning side
    itself) whose refs both exist in its repository (``repo_of(component)``) is descended into;
    the others are named in the message. Without one, the result is flagged ``pin-bump`` and says
    what to configure or fetch. Never raises for a missing ref: it is part of the message.
    """
    problems: list[str] = []
    for m in moves:
        comp = configured(m, components)
        if comp is None or comp in exclude:
            problems.append(f"{m.component} is not configured: add `bisect.components.{m.component}`")
            continue
        try:
            rng = pin_range(repo_of(comp), m.old, m.new)
        except BadInput as e:
            problems.append(str(e))
            continue
        others = [x for x in moves if x is not m]
        also = f" (it also bumps {_moves_text(others)})" if others else ""
        where = ", ".join(f"{k} held at {v[:12]}" for k, v in held.items())
        msg = (f"{name} bumps {m.text()}{also}: only pins moved, so {comp} {m.old}..{m.new} is bisected"
               f"{' with ' + where if where else ''}")
        if rng.note:
            msg += f"; {rng.note}"
        return Descent(list(moves), msg, comp, m, rng, dict(held))
    text = "; ".join(f"{name} bumps {m.text()}; {why}" for m, why in zip(moves, problems))
    return Descent(list(moves), text + " (a pin bump, not blamed as a code change)", flags=[PIN_BUMP_FLAG])


def commit_descent(repo: GitRepo, component: str, last_good: Candidate, first_bad: Candidate,
                   runtime_paths: Sequence[str], components: Mapping[str, GitSource],
                   repo_of: Callable[[str], GitRepo], held: Mapping[str, str] | None = None) -> Descent | None:
    """The descent from commit ``first_bad`` of ``component`` (in ``repo``), against ``last_good``.

    None when the change moves no pin. A change that moves pins and also changes paths inside
    ``runtime_paths`` (or a pin file's other lines) is a code change too: a :class:`Descent` with
    no component whose message says it was not descended. ``held`` are the outer components'
    refs (nested descents); the pinning side is held at ``first_bad``.
    """
    diff = pin_diff(repo, last_good.ref, first_bad.ref, tuple(runtime_paths))
    if not diff.moves:
        return None
    name = name_of(first_bad)
    if diff.code:
        more = f" and {len(diff.code) - 5} more" if len(diff.code) > 5 else ""
        return Descent(diff.moves, f"{name} bumps {_moves_text(diff.moves)} but also changes "
                                   f"{', '.join(diff.code[:5])}{more}: a code change too, not descended into the "
                                   f"pinned component")
    return decide(name, diff.moves, {**(held or {}), component: first_bad.ref}, components, repo_of,
                  exclude=(component,))


def image_descent(changes: Sequence[object], first_bad: Candidate, components: Mapping[str, GitSource],
                  repo_of: Callable[[str], GitRepo]) -> Descent | None:
    """The descent between two nightlies whose only change is pinned components' versions.

    ``changes`` are :class:`bisectbot.components.ComponentChange` of the pair. None unless every
    changed component other than ``base`` has a pin range (``range``: its old and new ref, from the
    installed version's commit or the image's ``versions.txt`` pin) and none of them is ``vllm``
    (the image's own source: that is the commit stage). The rest of the image is held at
    ``first_bad`` (the candidates are overlays on the first-bad nightly).
    """
    from ..components import ComponentChange

    changed = [c for c in changes if isinstance(c, ComponentChange) and c.changed]
    if not changed or any(c.component in ("vllm", "base") or not c.range for c in changed):
        return None
    moves = [PinMove(c.component, f"{c.component.upper()}_BRANCH" if c.details.get("branch") else c.component,
                     "/app/versions.txt" if c.details.get("branch") else "image", "image",
                     str(c.range[0]), str(c.range[1])) for c in changed if c.range]
    return decide(name_of(first_bad), moves, {"image": first_bad.label or first_bad.ref}, components, repo_of)
