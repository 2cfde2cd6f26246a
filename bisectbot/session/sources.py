"""Stage-1 candidate sources: a git range, nightly images of a registry, releases (PyPI).

:func:`make_source` picks the source of a recipe by ``recipe.source.kind``; more kinds
plug in through :func:`register_source`. Each source lists candidates oldest first and
computes the plausibility flags of a culprit it produced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..bisect import plausibility_flags
from ..errors import BadInput, UpstreamUnreachable
from ..ledger import Ledger
from ..models import Candidate
from ..recipe import GitSource, Recipe

log = logging.getLogger(__name__)


class CandidateSource(Protocol):
    """Where stage-1 candidates come from (git range, nightlies, releases)."""

    component: str

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        """Ordered candidates from ``good`` to ``bad`` inclusive (oldest first). BadInput on bad refs."""
        ...

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        """Plausibility flags of a culprit (keys of :data:`bisectbot.bisect.FLAG_TEXT`)."""
        ...


class GitCandidates:
    """A git range of the recipe's :class:`GitSource` (first-parent by default)."""

    def __init__(self, src: GitSource, base_dir: Path | None = None):
        from ..sources.git import GitRepo, local_repo

        path = local_repo(src.repo, base_dir)
        self.src = src
        self.repo = GitRepo(path, src.component or path.resolve().name)
        self.component = self.repo.component

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        """The first-parent chain from good to bad. With ``first_parent: false`` a merge
        culprit is descended into afterwards (:mod:`bisectbot.session.stages.merges`); only a good
        end off the first-parent chain falls back to git's topological order."""
        try:
            return self.repo.commits(good, bad, first_parent=True)
        except BadInput:
            if self.src.first_parent:
                raise
            return self.repo.commits(good, bad, first_parent=False)

    def candidate(self, ref: str) -> Candidate:
        """The commit ``ref`` of the repository as one candidate (a try job's, issue 42); BadInput when
        git does not know it."""
        return self.repo.candidate(ref)

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        inputs = self.repo.plausibility_inputs(culprit.ref, predecessor.ref)
        return plausibility_flags(runtime_paths=self.src.runtime_paths, **inputs)


def _pypi_source(recipe: Recipe, base_dir: Path | None) -> CandidateSource:
    from ..sources.pypi import PyPICandidates

    return PyPICandidates(recipe.source)  # type: ignore[arg-type]


class RegistryCandidates:
    """Nightly images of the recipe's registry source, oldest first, one candidate per digest.

    Tags are listed once per run (:class:`bisectbot.sources.registry.NightlyTags`); digests are
    asked only for the tags between ``good`` and ``bad`` that the ledger does not already hold
    (immutable tags) and recorded in the ledger. When the registry cannot be reached, the
    nightlies the ledger has seen are used (``bisectbot nightlies`` records them). ``good``/``bad``
    are tags (or digests) of that list.
    """

    component = "image"

    def __init__(self, recipe: Recipe, ledger: Ledger | None = None, registry_client: Any = None):
        self.src = recipe.source
        self.ledger = ledger
        self.client = registry_client
        self._listing: Any = None

    def listing(self) -> Any:  # -> bisectbot.sources.registry.NightlyTags
        """The run's one tag listing (made on first use)."""
        if self._listing is None:
            from ..sources.registry import NightlyTags

            known = self.ledger.nightly_digests(self.src.repository) if self.ledger is not None else None  # type: ignore[union-attr]
            self._listing = NightlyTags(self.src, registry_client=self.client, known=known)
        return self._listing

    def _ledger_tags(self, e: Exception) -> list[Any]:
        from ..sources import registry as reg

        if self.ledger is None:
            raise e
        rows = self.ledger.nightlies(self.src.repository)  # type: ignore[union-attr]
        if not rows:
            kind = UpstreamUnreachable if isinstance(e, UpstreamUnreachable) else BadInput  # exit 5 / 2
            repo = self.src.repository  # type: ignore[union-attr]
            raise kind(f"registry unreachable ({e}) and the ledger has no nightlies of {repo}; behind a mirror, "
                       f"set BISECTBOT_REGISTRY_MIRROR=URL (runners/README.md, \"Behind a mirror\"), or record "
                       f"them while the registry answers: bisectbot nightlies record --recipe RECIPE") from None
        log.warning("registry unreachable (%s): using the %d nightlies in the ledger", e, len(rows))
        infos = reg.order_tags(reg.TagInfo(r["repository"], r["tag"], r["digest"], r["last_updated"]) for r in rows)
        keep = set(reg.filter_tags([t.tag for t in infos], self.src.tag_pattern))  # type: ignore[union-attr]
        return [t for t in infos if t.tag in keep and t.digest]

    def _range(self, good: str, bad: str) -> list[Any]:
        """Tag infos from ``good`` to ``bad`` inclusive with digests (recorded in the ledger)."""
        from ..errors import RegistryError
        from ..sources import registry as reg

        def where(infos: list[Any], x: str) -> int:
            for i, t in enumerate(infos):
                if x in (t.tag, t.digest):
                    return i
            raise BadInput(f"nightly {x!r} not found among {len(infos)} tags of "
                           f"{self.src.repository} matching {self.src.tag_pattern!r}")  # type: ignore[union-attr]

        try:
            nt = self.listing()
            gi, bi = nt.index(good), nt.index(bad)
            if gi is None or bi is None:
                where([], good if gi is None else bad)
            if gi >= bi:  # type: ignore[operator]
                raise BadInput(f"good nightly {good} is not older than bad nightly {bad}")
            infos = nt.digests(gi, bi)
            if self.ledger is not None:
                reg.record(self.ledger, infos)
            return infos
        except RegistryError as e:
            infos = self._ledger_tags(e)
            gi, bi = where(infos, good), where(infos, bad)
            if gi >= bi:
                raise BadInput(f"good nightly {good} is not older than bad nightly {bad}") from None
            return infos[gi:bi + 1]

    def candidate(self, ref: str) -> Candidate:
        """The nightly tagged (or with the digest) ``ref`` as one candidate (a try job's, issue 42);
        BadInput when the registry has no such nightly."""
        from ..models import CandidateKind
        from ..sources.registry import image_ref

        nt = self.listing()
        i = nt.index(ref)
        if i is None:
            raise BadInput(f"nightly {ref!r} not found among the tags of {self.src.repository} matching "  # type: ignore[union-attr]
                           f"{self.src.tag_pattern!r}")  # type: ignore[union-attr]
        (t,) = nt.digests(i, i)
        if self.ledger is not None:
            from ..sources import registry as reg

            reg.record(self.ledger, [t])
        img = image_ref(self.src.registry, self.src.repository, t.digest)  # type: ignore[union-attr]
        return Candidate(CandidateKind.NIGHTLY, t.digest, t.tag, "image", {"image": img, "tag": t.tag})

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        from ..models import CandidateKind
        from ..sources.registry import image_ref

        cands: list[Candidate] = []
        for t in self._range(good, bad):
            if cands and cands[-1].ref == t.digest:
                continue  # the same image under the next tag: one candidate
            img = image_ref(self.src.registry, self.src.repository, t.digest)  # type: ignore[union-attr]
            cands.append(Candidate(CandidateKind.NIGHTLY, t.digest, t.tag, "image", {"image": img, "tag": t.tag}))
        if len(cands) < 2:
            raise BadInput(f"good nightly {good} and bad nightly {bad} are the same image {cands[0].ref[:19]}")
        return cands

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        return ["no-op-build"] if culprit.ref == predecessor.ref else []

    def default_ends(self) -> tuple[str | None, str | None]:
        """``(oldest tag, newest tag)`` of the matching nightlies (by the date in the tag): a
        nightly recipe names its last-good nightly and bisects up to tonight's. ``(None, None)``
        when there are none. Names only: no manifest request."""
        from ..errors import RegistryError

        try:
            tags = [t.tag for t in self.listing().tags()]
        except RegistryError as e:
            tags = [t.tag for t in self._ledger_tags(e)]
        return (tags[0], tags[-1]) if tags else (None, None)


_SOURCES: dict[str, Callable[[Recipe, Path | None, Ledger | None], CandidateSource]] = {
    "git": lambda r, base, led: GitCandidates(r.source, base),  # type: ignore[arg-type]
    "registry": lambda r, base, led: RegistryCandidates(r, led),
    "pypi": lambda r, base, led: _pypi_source(r, base),
}


def register_source(kind: str, factory: Callable[[Recipe, Path | None, Ledger | None], CandidateSource]) -> None:
    """Plug in a stage-1 source for ``recipe.source.kind`` (e.g. ``pypi``): ``factory(recipe, base_dir, ledger)``."""
    _SOURCES[kind] = factory


def resolve_ends(recipe: Recipe, good: str | None, bad: str | None,
                 source: CandidateSource | None = None) -> tuple[str | None, str | None]:
    """Good/bad ends: the arguments, else ``recipe.bisect.good``/``bad``, else the source's
    ``default_ends()`` when it has one (releases: oldest and newest in range). May stay None."""
    good = good or recipe.bisect.good
    bad = bad or recipe.bisect.bad
    if not good or not bad:
        ends = getattr(source, "default_ends", None)
        if callable(ends):
            g, b = ends()
            good, bad = good or g, bad or b
    return good, bad


def make_source(recipe: Recipe, base_dir: Path | None = None, ledger: Ledger | None = None) -> CandidateSource:
    """The candidate source of a recipe; BadInput when its kind has no source here."""
    kind = recipe.source.kind
    if kind not in _SOURCES:
        raise BadInput(f"source kind '{kind}' has no candidate source in this bisectbot "
                       f"(available: {', '.join(sorted(_SOURCES))})")
    return _SOURCES[kind](recipe, base_dir, ledger)
