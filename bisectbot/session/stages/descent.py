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
from pathlib import Path

from ...components import ComponentChange
from ...errors import BadInput
from ...models import Candidate, ChainLink, StageResult, Status
from ...pins import PinMove, match_component, short_ref
from ...recipe import GitSource, Recipe
from ...sources.git import GitRepo, local_repo
from ...sources.pinned import PinRange, pin_diff, pin_range

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
           repo_of: Callable[[str], GitRepo], *, exclude: Sequence[str] = (), chain: Sequence[str] = ()) -> Descent:
    """The descent for ``moves`` of a first-bad called ``name`` (pins only, no code change).

    The first move of a configured component (other than those in ``exclude``: the pinning side
    itself) whose refs both exist in its repository (``repo_of(component)``) is descended into;
    the others are named in the message. Without one, the result is flagged ``pin-bump`` and says
    what to configure or fetch. Never raises for a missing ref: it is part of the message.
    ``chain``: the components the descent came through, outermost first; a move back into one of
    them is a pin loop (issue 41, item 15), said and not descended into again.
    """
    problems: list[str] = []
    for m in moves:
        comp = configured(m, components)
        if comp is not None and comp in chain:
            problems.append(f"{comp} is already on the descent chain ({' -> '.join(chain)} -> {comp}): a pin loop, "
                            "not descended into again")
            continue
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
        where = ", ".join(f"{k} held at {short_ref(v)}" for k, v in held.items())
        msg = (f"{name} bumps {m.text()}{also}: only pins moved, so {comp} {short_ref(m.old)}..{short_ref(m.new)} "
               f"is bisected"
               f"{' with ' + where if where else ''}")
        if rng.note:
            msg += f"; {rng.note}"
        return Descent(list(moves), msg, comp, m, rng, dict(held))
    text = "; ".join(f"{name} bumps {m.text()}; {why}" for m, why in zip(moves, problems))
    return Descent(list(moves), text + " (a pin bump, not blamed as a code change)", flags=[PIN_BUMP_FLAG])


def commit_descent(repo: GitRepo, component: str, last_good: Candidate, first_bad: Candidate,
                   runtime_paths: Sequence[str], components: Mapping[str, GitSource],
                   repo_of: Callable[[str], GitRepo], held: Mapping[str, str] | None = None,
                   chain: Sequence[str] = ()) -> Descent | None:
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
                  exclude=(component,), chain=chain)


def image_descent(changes: Sequence[ComponentChange], first_bad: Candidate, components: Mapping[str, GitSource],
                  repo_of: Callable[[str], GitRepo]) -> Descent | None:
    """The descent between two nightlies whose only change is pinned components' versions.

    ``changes`` are :func:`bisectbot.components.diff_images` of the pair. None when vLLM (the
    image's own source: the attribution and commit stages handle it) or the base (torch, ROCm,
    Python, ``versions.txt``'s other pins) changed too, or a changed component has no pin range
    (``range``: its old and new ref, from the installed version's commit or the ``versions.txt``
    pin). The rest of the image is held at ``first_bad`` (the candidates are overlays on it).
    """
    changed = [c for c in changes if c.changed]
    if not changed or any(c.component in ("vllm", "base") or not c.range for c in changed):
        return None
    moves = [PinMove(c.component, f"{c.component.upper()}_BRANCH" if c.details.get("branch") else c.component,
                     "/app/versions.txt" if c.details.get("branch") else "image", "image",
                     str(c.range[0]), str(c.range[1])) for c in changed if c.range]
    return decide(name_of(first_bad), moves, {"image": first_bad.label or first_bad.ref}, components, repo_of)


# ---------------------------------------------------------------------- the stage

SearchFn = Callable[[str, list[Candidate], str, Callable[[Candidate, Candidate], list[str]]], StageResult]
"""The driver's search of one stage: ``(name, candidates, component, flags) -> StageResult``."""


def chain_link(role: str, st: StageResult, moves: Sequence[PinMove] = (), held: Mapping[str, str] | None = None,
               note: str = "") -> ChainLink:
    """A :class:`ChainLink` of stage ``st``: its ends, searched range, probes and confidence."""
    rng = (st.candidates[0].ref, st.candidates[-1].ref) if st.candidates else None
    return ChainLink(role, st.component, st.name, st.first_bad, st.last_good, rng, len(st.probes), st.confidence,
                     [m.to_dict() for m in moves], dict(held or {}), note)


class DescentStage:
    """Descends through pins after a stage that names a culprit (issue 26), as often as the culprit
    of each descent again only moves pins (vLLM -> aiter -> composable_kernel).

    ``search`` is the driver's search of one stage (the round loop's ``search``); ``recipe`` gives
    ``bisect.components``; ``repos`` are the runner's clones by component (used where present),
    others are opened from the recipe (``base_dir`` resolves relative paths, URLs are cloned once
    into the cache); ``echo`` gets progress lines. :meth:`after_commits` follows a commit stage,
    :meth:`after_images` a nightly stage whose two images differ only in pinned components: both
    go through :func:`decide` and :meth:`_descend`, the one code path.
    """

    def __init__(self, search: SearchFn, recipe: Recipe, *, repos: Mapping[str, GitRepo] | None = None,
                 base_dir: Path | None = None, echo: Callable[[str], None] | None = None):
        self.search = search
        self.recipe = recipe
        self.components = recipe.bisect.components
        self._repos: dict[str, GitRepo] = dict(repos or {})
        self.base_dir = base_dir
        self.echo = echo or (lambda s: None)

    def repo_of(self, component: str) -> GitRepo:
        """The clone of a configured component (BadInput for one the recipe does not name)."""
        if component not in self._repos:
            src = self.components.get(component)
            if src is None:
                raise BadInput(f"{component} is not configured: add `bisect.components.{component}`")
            self._repos[component] = GitRepo(local_repo(src.repo, self.base_dir), component)
        return self._repos[component]

    def _flags(self, component: str) -> Callable[[Candidate, Candidate], list[str]]:
        from ...bisect import plausibility_flags

        src = self.components.get(component)
        repo = self.repo_of(component)
        return lambda cul, pred: plausibility_flags(runtime_paths=src.runtime_paths if src else (),
                                                    **repo.plausibility_inputs(cul.ref, pred.ref))

    def after_commits(self, st: StageResult, component: str, repo: GitRepo,
                      runtime_paths: Sequence[str], before: Sequence[str] = ()
                      ) -> tuple[list[StageResult], list[ChainLink]]:
        """Descend from commit stage ``st`` of ``component`` while its culprit only moves pins
        (``before``: components the descent already came through, e.g. the image's).

        Returns the new stages (innermost last) and the chain (empty when nothing was descended).
        ``st`` itself gets the descent's message and, for an unbisectable bump, the ``pin-bump`` flag.
        """
        stages: list[StageResult] = []
        chain: list[ChainLink] = []
        held: dict[str, str] = {}
        cur, comp, cur_repo, rt = st, component, repo, tuple(runtime_paths)
        came = [*before, component]  # the components descended through so far: a move back into one is a loop
        while cur.status is Status.CULPRIT and cur.last_good is not None and cur.first_bad is not None:
            d = commit_descent(cur_repo, comp, cur.last_good, cur.first_bad, rt, self.components, self.repo_of, held,
                               chain=came)
            if d is None:
                break
            self._note(cur, d)
            if d.component is None or d.range is None:
                break
            nxt = self._descend(d, {**d.held})
            chain.append(chain_link("vehicle", cur, d.moves, held))
            stages.append(nxt)
            held = dict(d.held)
            came.append(d.component)
            cur, comp, cur_repo = nxt, d.component, self.repo_of(d.component)
            src = self.components.get(d.component)
            rt = tuple(src.runtime_paths) if src else ()
        if chain:
            chain.append(chain_link("culprit" if cur.status is Status.CULPRIT else "searched", cur, (), held,
                                    cur.message))
        return stages, chain

    def after_images(self, st: StageResult, changes: Sequence[ComponentChange], bad_image: str
                     ) -> tuple[list[StageResult], list[ChainLink]] | None:
        """Descend from nightly stage ``st`` when its two images differ only in pinned components;
        None otherwise (the attribution between components takes over). The candidates are overlays
        of the pinned component's commits onto the first-bad nightly ``bad_image``."""
        fb = st.first_bad
        if fb is None:
            return None
        d = image_descent(changes, fb, self.components, self.repo_of)
        if d is None:
            return None
        self._note(st, d)
        if d.component is None or d.range is None:
            return [], []
        nxt = self._descend(d, {}, base=bad_image)
        stages, chain = self.after_commits(nxt, d.component, self.repo_of(d.component),
                                           self.components[d.component].runtime_paths)
        head = [chain_link("vehicle", st, d.moves, {})]
        if not chain:  # the component's culprit is a code change: the chain ends there
            chain = [chain_link("culprit" if nxt.status is Status.CULPRIT else "searched", nxt, (), d.held, nxt.message)]
        return [nxt, *stages], head + chain

    def _note(self, st: StageResult, d: Descent) -> None:
        st.message = f"{st.message}; {d.message}" if st.message else d.message
        st.flags += [f for f in d.flags if f not in st.flags]
        self.echo(d.message)

    def _descend(self, d: Descent, held: dict[str, str], base: str | None = None) -> StageResult:
        """Bisect ``d.component`` over ``d.range`` with ``held`` fixed (or, with ``base``, as overlays
        on that image whose own copy of the component is at the range's bad end)."""
        assert d.component is not None and d.range is not None
        repo = self.repo_of(d.component)
        commits = repo.commits(d.range.good, d.range.bad, first_parent=True)
        extra = {"base": base, "base_commit": d.range.bad} if base else {}
        cands = [Candidate(c.kind, c.ref, c.label, d.component,
                           {**c.meta, "commits": {d.component: c.ref, **({} if base else held)}, **extra})
                 for c in commits]
        st = self.search(f"{d.component} commits", cands, d.component, self._flags(d.component))
        if d.range.note:
            st.message = f"{st.message}; {d.range.note}" if st.message else d.range.note
        return st
