"""Stage-1 candidates from the releases of a package on a package index (``source.kind: pypi``).

:class:`PyPICandidates` lists the releases of ``recipe.source.package`` through
:func:`bisectbot.sources.releases.list_releases` (the index of ``source.index_url``, else
``$PIP_INDEX_URL`` / pip's configuration / PyPI), keeps those inside
``min_version`` .. ``max_version`` (inclusive, PEP 440), drops pre-releases and dev
releases unless ``include_prereleases`` is set, drops releases whose every file is
yanked, and orders them by PEP 440 version (oldest first). With no good/bad end given,
the range is the first and the last release kept (:meth:`PyPICandidates.default_ends`).

Each candidate is ``Candidate(RELEASE, ref=<version>, label="<package> <version>",
component=<package>)``; ``meta`` holds the sdist's file name, sha256 and size (bytes) and
the upload time, never a URL (index URLs may carry credentials).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ..errors import BadInput
from ..models import Candidate, CandidateKind
from ..recipe import PyPISource
from .releases import Release, list_releases

__all__ = ["PyPICandidates", "release_meta"]


def _version(text: str, what: str) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise BadInput(f"{what}: {text!r} is not a PEP 440 version") from None


def release_meta(rel: Release) -> dict:
    """JSON-safe facts about a release for ``Candidate.meta``: sdist (or first wheel) name/sha256/size."""
    f = rel.sdist or next((x for x in rel.files if not x.yanked), rel.files[0] if rel.files else None)
    out: dict = {"upload_time": rel.upload_time}
    if f is not None:
        out.update({"file": f.filename, "file_kind": f.kind, "sha256": f.sha256, "size": f.size})
    return out


class PyPICandidates:
    """Releases of ``src.package`` as bisection candidates (see the module doc)."""

    def __init__(self, src: PyPISource):
        self.src = src
        self.component = src.package
        self._all: list[Release] | None = None
        self._lo = _version(src.min_version, "source.min_version") if src.min_version else None
        self._hi = _version(src.max_version, "source.max_version") if src.max_version else None

    def all_releases(self) -> list[Release]:
        """Every release on the index, oldest first (one index request, then cached)."""
        if self._all is None:
            self._all = list_releases(self.src.package, self.src.index_url)
        return self._all

    def _keep(self, r: Release) -> bool:
        v = Version(r.version)
        if (v.is_prerelease or v.is_devrelease) and not self.src.include_prereleases:
            return False
        if self._lo is not None and v < self._lo:
            return False
        if self._hi is not None and v > self._hi:
            return False
        return bool(r.files) and not all(f.yanked for f in r.files)

    def releases(self) -> list[Release]:
        """The releases kept by the source's bounds and filters, oldest first."""
        return sorted((r for r in self.all_releases() if self._keep(r)), key=lambda r: Version(r.version))

    def default_ends(self) -> tuple[str, str]:
        """(oldest, newest) kept release: the range when neither recipe nor CLI names good/bad."""
        rels = self.releases()
        if len(rels) < 2:
            raise BadInput(f"{self._what()}: {len(rels)} release(s) in range; a bisection needs at least 2")
        return rels[0].version, rels[-1].version

    def _what(self) -> str:
        lo, hi = self.src.min_version or "first", self.src.max_version or "newest"
        pre = ", pre-releases included" if self.src.include_prereleases else ""
        return f"{self.src.package} releases {lo} .. {hi}{pre}"

    def _index_of(self, rels: list[Release], text: str, end: str) -> int:
        want = _version(text, end)
        for i, r in enumerate(rels):
            if Version(r.version) == want:
                return i
        if any(Version(r.version) == want for r in self.all_releases()):
            raise BadInput(f"{end} {self.src.package} {text} is outside the recipe's {self._what()} "
                           "(or a pre-release / yanked)")
        near = ", ".join(r.version for r in rels[-6:])
        raise BadInput(f"{end}: {self.src.package}=={text} is not on the index (newest in range: {near})")

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        """Releases from ``good`` to ``bad`` inclusive, oldest first. BadInput for unknown or reversed ends."""
        rels = self.releases()
        i = self._index_of(rels, good, "good")
        j = self._index_of(rels, bad, "bad")
        if i >= j:
            raise BadInput(f"good {good} must be an older release than bad {bad}")
        pkg = self.src.package
        return [Candidate(CandidateKind.RELEASE, r.version, f"{pkg} {r.version}", pkg, release_meta(r))
                for r in rels[i:j + 1]]

    def flags(self, culprit: Candidate, predecessor: Candidate) -> list[str]:
        """Releases carry no plausibility flags (they are not single commits)."""
        return []
