"""Version strings of vLLM, aiter and torch as they appear inside images.

Grammar (setuptools-scm plus the ROCm suffix, see ``DOMAIN.md``)::

    X.Y.Z[.W][rcN][.postN][.devN][+<local>]
    local := [g<7-40 hex>][.dYYYYMMDD][.rocmNNN] | YYYYMMDD | other

Traps handled here (every real example is unit-tested in ``tests/containers/test_versions.py``):

* ``.rocmNNN`` may follow the local part (``+g0f0f28b53.rocm723``) or replace it
  (``0.19.1rc1.dev210.rocm700``: no hash at all, the suffix sits in the public part);
* ``.dYYYYMMDD`` marks a dirty tree and is not a commit;
* a local part that starts with ``g`` but is not 7-40 hex characters
  (``+gfx942.fork``) is a fork suffix, not a commit;
* aiter nightly wheels use ``<tag>+YYYYMMDD`` (a date, no hash);
* ``0.0.0+rocm.csrc.build`` has no commit and no usable version;
* torch uses ``+git<sha>`` (``2.10.0+git8514f05``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_HEX_COMMIT = re.compile(r"^g([0-9a-f]{7,40})$")
_DIRTY = re.compile(r"^d(\d{8})$")
_ROCM = re.compile(r"^rocm(\d{3})$")
_DATE = re.compile(r"^(\d{8})$")
_GIT = re.compile(r"^git([0-9a-f]{7,40})$")
_PUBLIC = re.compile(
    r"^(?P<release>\d+(?:\.\d+)*)"
    r"(?:(?P<pre>rc|a|b)(?P<pre_n>\d+))?"
    r"(?:\.post(?P<post>\d+))?"
    r"(?:\.dev(?P<dev>\d+))?"
    r"(?:\.rocm(?P<rocm>\d{3}))?$"
)


@dataclass(frozen=True)
class VersionInfo:
    """One parsed version string.

    ``base`` is the public release part without dev/local (``0.19.1rc1``), ``public``
    the full public part (``0.19.1rc1.dev296``); ``commit`` the abbreviated or full
    hex SHA (``bcc2306ce``) or None; ``dirty_date`` ``YYYYMMDD`` of a ``.dYYYYMMDD``
    marker; ``build_date`` ``YYYYMMDD`` of a date-only local part (aiter nightlies);
    ``rocm`` the three ROCm digits (``723``); ``extra`` unrecognised local segments
    (fork suffixes). ``valid`` is False when the string does not follow the grammar.
    """

    raw: str
    public: str = ""
    base: str = ""
    dev: int | None = None
    post: int | None = None
    commit: str | None = None
    dirty_date: str | None = None
    build_date: str | None = None
    rocm: str | None = None
    extra: tuple[str, ...] = field(default_factory=tuple)
    valid: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = list(self.extra)
        return d

    @property
    def is_placeholder(self) -> bool:
        """True for ``0.0.0+...`` builds whose version carries no information."""
        return self.base == "0.0.0"


def parse_version(raw: str) -> VersionInfo:
    """Parse a vLLM/aiter/torch version string. Never raises: bad input gives ``valid=False``.

    >>> parse_version("0.19.1rc1.dev296+gbcc2306ce").commit
    'bcc2306ce'
    """
    s = (raw or "").strip()
    if s.startswith("v") and s[1:2].isdigit():
        s = s[1:]
    public, _, local = s.partition("+")
    m = _PUBLIC.match(public)
    if not m:
        return VersionInfo(raw=raw, valid=False, extra=(local,) if local else ())
    base = m.group("release") + (f"{m.group('pre')}{m.group('pre_n')}" if m.group("pre") else "")
    if m.group("post") is not None:
        base += f".post{m.group('post')}"
    rocm = m.group("rocm")
    commit = dirty = bdate = None
    extra: list[str] = []
    if local:
        for seg in local.split("."):
            seg_l = seg.lower()
            if commit is None and (c := _HEX_COMMIT.match(seg_l)):
                commit = c.group(1)
            elif commit is None and (c := _GIT.match(seg_l)):
                commit = c.group(1)
            elif (d := _DIRTY.match(seg_l)):
                dirty = d.group(1)
            elif (r := _ROCM.match(seg_l)):
                rocm = r.group(1)
            elif bdate is None and commit is None and (d := _DATE.match(seg_l)):
                bdate = d.group(1)
            else:
                extra.append(seg)
    return VersionInfo(
        raw=raw,
        public=public.split(".rocm")[0] if m.group("rocm") else public,
        base=base,
        dev=int(m.group("dev")) if m.group("dev") is not None else None,
        post=int(m.group("post")) if m.group("post") is not None else None,
        commit=commit,
        dirty_date=dirty,
        build_date=bdate,
        rocm=rocm,
        extra=tuple(extra),
    )


def commit_of(raw: str | None) -> str | None:
    """The commit inside a version string, or None (no hash, date-only, fork suffix)."""
    return parse_version(raw).commit if raw else None
