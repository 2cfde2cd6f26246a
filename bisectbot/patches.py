"""Patch stacks: load ``patches/stack.yaml``, decide per candidate which patch applies
(and through which variant), detect "already upstream", apply a stack atomically.

Public API (other areas call these)::

    load_stack(path: Path | None = None) -> Stack
    check_stack(stack, ids, root, versions=None) -> list[PatchStatus]
    apply_stack(stack, ids, root, versions=None) -> StackApplication
    stack_hash(stack, ids) -> str
    check_release(stack, ids, package, version, index_url=None, cache_dir=None) -> list[PatchStatus]

``root`` is a directory in which the target *package directories* sit: a
``site-packages`` directory, an extracted sdist root (``vllm-0.19.1/``), or a source
checkout (``aiter/`` at the top). The file of a patch is ``root/<package>/<path>``
(``package`` is ``vllm`` or ``aiter``, ``path`` is relative to the package directory).
As a convenience ``root`` may also be the package directory itself
(``.../site-packages/vllm``). A patch whose package directory is not under ``root``
is *not applicable*, never a conflict; a package that is there but lacks the file is
*not applicable (file absent)* too.

``versions`` maps package -> version string (PEP 440, e.g. ``{"vllm": "0.19.1"}``);
missing entries are read from ``root`` (``*.dist-info/METADATA``, ``*.egg-info`` or an
sdist's ``PKG-INFO``). Versions only pick the preferred variant; an unknown version
never excludes one.

Applying uses GNU ``patch`` (2.7+, on ``PATH``): it finds offsets and fuzz and names
the failing hunk. Each patch is tried on a scratch copy; the tree is written only
when every required patch applied and every touched Python file compiles, so a
failing stack leaves the tree byte-identical.

States (``State``): ``applies``, ``applies with offset N``, ``applies with fuzz N``,
``already upstream``, ``not applicable (reason)``, ``conflict`` (with the failing hunk
and the upstream lines it expected).
"""

from __future__ import annotations

import hashlib
import json
import os
import py_compile
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from .confine import inside
from .errors import BadInput, PatchError

__all__ = [
    "PATCHES_DIR_ENV", "PatchSpec", "PatchStatus", "Stack", "StackApplication", "StackConflict", "State",
    "apply_stack", "check_release", "check_stack", "conflict_message", "default_stack_path", "detect_versions",
    "load_stack", "package_dir", "parse_diff", "stack_hash",
]

#: Environment variable naming the directory that holds ``stack.yaml`` and the diffs.
PATCHES_DIR_ENV = "BISECTBOT_PATCHES_DIR"

#: Target packages: import directory and the distribution names that carry it
#: (aiter is published as ``amd-aiter``; older images call it ``aiter``).
PACKAGES: dict[str, tuple[str, ...]] = {"vllm": ("vllm",), "aiter": ("amd-aiter", "aiter")}

MARKER = "bisectbot-patch:"  # our diffs add "# bisectbot-patch: <id>" next to the change


# =========================================================================== stack model


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_spec(v: str | None) -> str | None:
    if v is not None:
        try:
            SpecifierSet(v)
        except InvalidSpecifier:
            raise ValueError(f"not a PEP 440 version specifier: {v!r}") from None
    return v


class Condition(_Model):
    """When something holds: all given parts must hold.

    ``versions``: PEP 440 specifier of the target package's version (pre-releases and
    dev builds such as ``0.23.1rc1.dev1120+g0f0f28b53.rocm723`` count by their release
    part); ``contains`` / ``not_contains``: plain substrings of the target file.
    """

    versions: str | None = None
    contains: str | None = None
    not_contains: str | None = None

    _v = field_validator("versions")(_check_spec)

    def holds(self, text: str, version: str | None) -> tuple[bool, str]:
        """(holds, reason). An unknown ``version`` does not make ``versions`` false."""
        if self.versions and version:
            try:
                ok = SpecifierSet(self.versions).contains(_base_version(version), prereleases=True)
            except InvalidVersion:
                ok = True
            if not ok:
                return False, f"version {version} not in {self.versions}"
        if self.contains is not None and self.contains not in text:
            return False, f"file lacks {self.contains!r}"
        if self.not_contains is not None and self.not_contains in text:
            return False, f"file contains {self.not_contains!r}"
        return True, ""


class Variant(Condition):
    """One diff of a logical patch, with the condition under which it is preferred."""

    id: str
    diff: str = Field(..., description="diff file, relative to the stack directory (no '..', not absolute)")

    @field_validator("diff")
    @classmethod
    def _inside_stack(cls, v: str) -> str:
        if not v or v.startswith("/") or "\\" in v or ".." in Path(v).parts:
            raise ValueError("must be a relative path inside the stack directory (no '..', not absolute)")
        return v


class CodeDetector(_Model):
    """Regexes (Python ``re``, multiline) over the target file."""

    all: list[str] = Field(default_factory=list)
    any: list[str] = Field(default_factory=list)
    none: list[str] = Field(default_factory=list)

    @field_validator("all", "any", "none")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for rx in v:
            try:
                re.compile(rx, re.M)
            except re.error as e:
                raise ValueError(f"bad regex {rx!r}: {e}") from None
        return v

    def match(self, text: str) -> str | None:
        """A short description of what matched, or None when the fix is not there."""
        if not (self.all or self.any):
            return None
        hits = []
        for rx in self.all:
            m = re.search(rx, text, re.M)
            if not m:
                return None
            hits.append(m.group(0))
        if self.any:
            found = [m.group(0) for rx in self.any if (m := re.search(rx, text, re.M))]
            if not found:
                return None
            hits.append(found[0])
        for rx in self.none:
            if re.search(rx, text, re.M):
                return None
        return "code present: " + ", ".join(repr(h) for h in hits)


class UpstreamDetector(_Model):
    """How to tell the fix is upstream: named code present, or a variant reverse-applies."""

    reverse_applies: bool = True
    code: CodeDetector | None = None


class PatchSpec(_Model):
    """One logical patch of the stack (see ``patches/stack.yaml`` for the field meanings)."""

    id: str = Field(..., pattern=r"^[a-z0-9][a-z0-9._-]*$")
    package: Literal["vllm", "aiter"]
    path: str
    required: bool = True
    requires: list[str] = Field(default_factory=list)
    description: str = ""
    when: Condition | None = None
    variants: list[Variant] = Field(..., min_length=1)
    upstream: UpstreamDetector = Field(default_factory=UpstreamDetector)
    fuzz: int = Field(2, ge=0, le=3)

    @field_validator("path")
    @classmethod
    def _rel(cls, v: str) -> str:
        if v.startswith("/") or ".." in Path(v).parts:
            raise ValueError("must be a relative path inside the package directory")
        return v


class Stack(_Model):
    """A loaded patch stack. ``base_dir`` is the directory the diff paths are relative to."""

    version: int = 1
    patches: list[PatchSpec] = Field(default_factory=list)
    _base_dir: Path = PrivateAttr(default=Path("."))
    _source: str = PrivateAttr(default="<stack>")

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.patches]

    def get(self, patch_id: str) -> PatchSpec:
        for p in self.patches:
            if p.id == patch_id:
                return p
        raise PatchError(f"{self._source}: unknown patch id {patch_id!r} (known: {', '.join(self.ids)})")

    def select(self, ids: list[str] | None) -> list[PatchSpec]:
        """The patches named by ``ids`` in the given order (None: the whole stack)."""
        if ids is None:
            return list(self.patches)
        seen: set[str] = set()
        out = []
        for i in ids:
            if i in seen:
                raise PatchError(f"patch {i!r} selected twice")
            seen.add(i)
            out.append(self.get(i))
        return out

    def diff_path(self, variant: Variant) -> Path:
        """The diff file of ``variant``, resolved; :class:`PatchError` when it leaves the stack
        directory (a symlink pointing out, issue 13)."""
        from .confine import ConfinementError, confined

        try:
            return confined(self._base_dir, variant.diff, f"variant {variant.id!r} diff")
        except ConfinementError as e:
            raise PatchError(f"{self._source}: {e}") from None

    def diff_bytes(self, variant: Variant) -> bytes:
        return self.diff_path(variant).read_bytes()


# =========================================================================== loading


def default_stack_path(recipe_path: str | Path | None = None) -> Path:
    """The stack file by the lookup order of :mod:`bisectbot.shipped`: ``$BISECTBOT_PATCHES_DIR/stack.yaml``,
    ``patches/stack.yaml`` next to ``recipe_path`` (or one level up), ``./patches/stack.yaml``, the shipped
    default. Raises :class:`bisectbot.errors.BadInput` naming ``--stack`` and the variable when none exists."""
    from .shipped import find_stack

    return find_stack(None, recipe_path)


def load_stack(path: Path | None = None) -> Stack:
    """Load and validate a stack file (default: :func:`default_stack_path`).

    Checks that ids are unique, ``requires`` name earlier patches, and every diff file
    exists and is a single-file unified diff with at least one hunk.
    Raises :class:`PatchError` (exit code 2) with ``FILE:LINE:COL: field: message`` lines.
    """
    from .located import LocatedErrors, compose, read_text, validate
    from .located import where as _where

    p = Path(path) if path is not None else default_stack_path()
    try:
        text = read_text(p, "(file): stack")  # size-limited, UTF-8 checked
    except LocatedErrors as e:
        raise PatchError(f"{e} (give --stack FILE or set {PATCHES_DIR_ENV}=DIR)") from None
    try:
        data, marks = compose(text, str(p), "stack fields with a 'patches' list")
        stack = validate(Stack, data, marks, str(p))
    except LocatedErrors as e:
        raise PatchError(str(e)) from None

    def where(loc: tuple) -> str:
        return _where(marks, data, loc, str(p))

    stack._base_dir = p.parent.resolve()
    stack._source = str(p)
    problems = []
    seen: set[str] = set()
    for i, spec in enumerate(stack.patches):
        if spec.id in seen:
            problems.append(f"{where(('patches', i, 'id'))}: duplicate patch id {spec.id!r}")
        for r in spec.requires:
            if r not in seen:
                problems.append(f"{where(('patches', i, 'requires'))}: {r!r} is not an earlier patch of the stack")
        seen.add(spec.id)
        vids: set[str] = set()
        for j, var in enumerate(spec.variants):
            if var.id in vids:
                problems.append(f"{where(('patches', i, 'variants', j, 'id'))}: duplicate variant id {var.id!r}")
            vids.add(var.id)
            try:
                dp = stack.diff_path(var)
            except PatchError as e:
                problems.append(f"{where(('patches', i, 'variants', j, 'diff'))}: {str(e).split(': ', 1)[-1]}")
                continue
            try:
                parse_diff(dp.read_text(encoding="utf-8"), str(dp))
            except OSError as e:
                problems.append(f"{where(('patches', i, 'variants', j, 'diff'))}: cannot read {dp}: {e.strerror or e}")
            except PatchError as e:
                problems.append(f"{where(('patches', i, 'variants', j, 'diff'))}: {e}")
    if problems:
        raise PatchError("\n".join(problems))
    return stack


def stack_hash(stack: Stack, ids: list[str] | None) -> str:
    """SHA-256 (64 hex chars) of the selected patches in order: each patch's definition
    (id, package, path, required, conditions, detectors) and the bytes of each variant diff.

    Feeds the probe cache key: editing a diff, reordering or changing the selection
    changes it. The hash of what actually applied to one tree is
    :attr:`StackApplication.applied_hash`.
    """
    h = hashlib.sha256()
    for spec in stack.select(ids):
        h.update(json.dumps(spec.model_dump(mode="json", exclude={"description"}), sort_keys=True).encode())
        for var in spec.variants:
            h.update(b"\0" + var.id.encode() + b"\0" + stack.diff_bytes(var))
        h.update(b"\n")
    return h.hexdigest()


# =========================================================================== diffs


@dataclass
class Hunk:
    """One hunk of a unified diff. ``lines`` keep their leading ' ', '-' or '+'."""

    number: int
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    header: str
    lines: list[str]

    @property
    def expected(self) -> list[str]:
        """The upstream lines the hunk expects to find (context and removed lines)."""
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-")]

    @property
    def result(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "+")]


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_diff(text: str, name: str = "<diff>") -> list[Hunk]:
    """Hunks of a single-file unified diff; text before the ``---`` line is a header.

    Raises :class:`PatchError` for no hunks, several files, or a malformed hunk.
    """
    lines = text.splitlines()
    hunks: list[Hunk] = []
    files = 0
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files += 1
            if files > 1:
                raise PatchError(f"{name}: more than one file in the diff; write one diff per file")
            i += 2
            continue
        m = _HUNK_RE.match(ln)
        if m and files:
            old_len = int(m.group(2) or 1)
            new_len = int(m.group(4) or 1)
            body: list[str] = []
            o = n = 0
            i += 1
            while (o < old_len or n < new_len) and i < len(lines):
                b = lines[i]
                if b.startswith("\\"):
                    i += 1
                    continue
                tag = b[:1] if b else " "
                if tag not in (" ", "-", "+"):
                    break
                body.append(b if b else " ")
                o += tag in (" ", "-")
                n += tag in (" ", "+")
                i += 1
            if o != old_len or n != new_len:
                raise PatchError(f"{name}: hunk #{len(hunks) + 1} ({ln}) is truncated or malformed")
            hunks.append(Hunk(len(hunks) + 1, int(m.group(1)), old_len, int(m.group(3)), new_len, ln, body))
            continue
        i += 1
    if not hunks:
        raise PatchError(f"{name}: no unified-diff hunk found")
    return hunks


# =========================================================================== GNU patch


@dataclass
class HunkResult:
    number: int
    ok: bool
    line: int | None = None
    offset: int = 0
    fuzz: int = 0


@dataclass
class PatchRun:
    """Outcome of one ``patch`` call on one file."""

    ok: bool
    hunks: list[HunkResult]
    output: str

    @property
    def failed(self) -> list[HunkResult]:
        return [h for h in self.hunks if not h.ok]


_HUNK_MSG = re.compile(
    r"Hunk #(\d+) (succeeded|FAILED|ignored) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?"
)


def gnu_patch(diff: Path, target: Path, *, reverse: bool = False, fuzz: int = 2, n_hunks: int = 0) -> PatchRun:
    """Apply ``diff`` to ``target`` in place with GNU patch (no backups, no .rej files).

    Runs ``patch --force`` (never guesses "reversed"), so a failing patch just fails.
    Raises :class:`PatchError` when ``patch`` is missing or calls the diff malformed.
    """
    exe = shutil.which("patch")
    if not exe:
        raise PatchError("GNU patch is not installed (apt-get install patch)")
    cmd = [exe, "--force", "--no-backup-if-mismatch", "--reject-file=-", "--quoting-style=literal",
           f"--fuzz={fuzz}", "-i", str(diff), str(target)]
    if reverse:
        cmd.insert(1, "--reverse")
    env = dict(os.environ, LC_ALL="C", LANG="C")
    env.pop("POSIXLY_CORRECT", None)
    env.pop("PATCH_VERSION_CONTROL", None)
    env.pop("VERSION_CONTROL", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
                          cwd=target.parent)
    out = proc.stdout + proc.stderr
    if proc.returncode >= 2:
        raise PatchError(f"{diff}: GNU patch could not use this diff: {out.strip().splitlines()[-1] if out.strip() else proc.returncode}")
    results: dict[int, HunkResult] = {}
    for m in _HUNK_MSG.finditer(out):
        num = int(m.group(1))
        results[num] = HunkResult(num, m.group(2) == "succeeded", int(m.group(3)),
                                  int(m.group(5) or 0), int(m.group(4) or 0))
    for num in range(1, n_hunks + 1):
        results.setdefault(num, HunkResult(num, True))  # GNU patch names every failed hunk
    return PatchRun(proc.returncode == 0, [results[k] for k in sorted(results)], out)


# =========================================================================== statuses


class State(str, Enum):
    APPLIES = "applies"
    APPLIES_OFFSET = "applies-with-offset"
    APPLIES_FUZZ = "applies-with-fuzz"
    UPSTREAM = "already-upstream"
    NOT_APPLICABLE = "not-applicable"
    CONFLICT = "conflict"

    @property
    def applies(self) -> bool:
        return self in (State.APPLIES, State.APPLIES_OFFSET, State.APPLIES_FUZZ)


@dataclass
class PatchStatus:
    """What a patch does (or would do) to one tree.

    ``offset``: largest absolute hunk offset in lines; ``fuzz``: largest fuzz used.
    ``sha256_before`` / ``sha256_after``: the touched file before this patch and after
    it (equal unless it applied). ``failed_hunk`` (conflicts): number, header, the
    lines it expected and the lines found where GNU patch looked.
    """

    id: str
    package: str
    path: str
    required: bool
    state: State
    variant: str | None = None
    offset: int = 0
    fuzz: int = 0
    detail: str = ""
    sha256_before: str | None = None
    sha256_after: str | None = None
    diff_sha256: str | None = None
    hunks: list[dict[str, Any]] = field(default_factory=list)
    failed_hunk: dict[str, Any] | None = None
    tried: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True unless this is a conflict."""
        return self.state is not State.CONFLICT

    @property
    def patched_here(self) -> bool:
        """The tree carries this patch's own marker: bisectbot patched it (an image it built), which
        is no news from upstream (issue 25, input 8)."""
        return self.state is State.UPSTREAM and self.detail.startswith("already patched here")

    @property
    def label(self) -> str:
        """The one-line answer: ``applies with offset 12``, ``already upstream``, ..."""
        if self.state is State.APPLIES:
            s = "applies"
        elif self.state is State.APPLIES_OFFSET:
            s = f"applies with offset {self.offset}"
        elif self.state is State.APPLIES_FUZZ:
            s = f"applies with fuzz {self.fuzz}" + (f" (offset {self.offset})" if self.offset else "")
        elif self.state is State.UPSTREAM and self.patched_here:
            s = "already applied here (its bisectbot marker is in the file: patched by bisectbot, not upstream)"
        elif self.state is State.UPSTREAM:
            s = "already upstream"
        elif self.state is State.NOT_APPLICABLE:
            s = f"not applicable ({self.detail})"
        else:
            h = self.failed_hunk or {}
            s = f"conflict: hunk #{h.get('number', '?')} {h.get('header', '')}".rstrip()
        if self.variant and self.state.applies:
            s += f" [variant {self.variant}]"
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "package": self.package, "path": self.path, "required": self.required,
            "state": self.state.value, "label": self.label, "variant": self.variant,
            "offset": self.offset, "fuzz": self.fuzz, "detail": self.detail,
            "sha256_before": self.sha256_before, "sha256_after": self.sha256_after,
            "diff_sha256": self.diff_sha256, "hunks": self.hunks, "failed_hunk": self.failed_hunk,
            "tried": self.tried,
        }


@dataclass
class StackApplication:
    """Result of :func:`apply_stack` (or a dry evaluation): per-patch statuses and file hashes.

    ``files`` maps each touched path (relative to ``root``) to its SHA-256 before the
    stack and after it. ``applied``: the tree was written. ``applied_hash``: SHA-256 of
    (id, variant, diff bytes) of the patches that applied, in order.
    """

    root: str
    ids: list[str]
    statuses: list[PatchStatus]
    stack_hash: str
    applied_hash: str
    versions: dict[str, str]
    files: dict[str, dict[str, str]] = field(default_factory=dict)
    applied: bool = False

    @property
    def ok(self) -> bool:
        """No required patch conflicts."""
        return not [s for s in self.statuses if s.required and s.state is State.CONFLICT]

    def status(self, patch_id: str) -> PatchStatus:
        for s in self.statuses:
            if s.id == patch_id:
                return s
        raise KeyError(patch_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root, "ids": self.ids, "stack_hash": self.stack_hash,
            "applied_hash": self.applied_hash, "versions": self.versions, "applied": self.applied,
            "ok": self.ok, "files": self.files, "patches": [s.to_dict() for s in self.statuses],
        }


# =========================================================================== locating


def package_dir(root: Path, package: str) -> Path | None:
    """``root/<package>`` if it is a directory; ``root`` itself if it *is* the package."""
    cand = root / package
    if cand.is_dir():
        return cand
    if root.name == package and (root / "__init__.py").is_file():
        return root
    return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata_version(path: Path, names: tuple[str, ...]) -> str | None:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return None
    name = re.search(r"^Name:\s*(\S+)", head, re.M)
    ver = re.search(r"^Version:\s*(\S+)", head, re.M)
    if name and ver and _norm(name.group(1)) in {_norm(n) for n in names}:
        return ver.group(1)
    return None


def detect_versions(root: Path) -> dict[str, str]:
    """Package versions found in ``root``: dist-info/egg-info metadata, or an sdist's PKG-INFO.

    Returns e.g. ``{"vllm": "0.19.1"}``; packages without metadata are left out.
    """
    root = Path(root)
    out: dict[str, str] = {}
    dirs = [root] + ([root.parent] if root.name in PACKAGES else [])
    for pkg, names in PACKAGES.items():
        for d in dirs:
            cands = [d / "PKG-INFO"]
            try:
                for entry in d.iterdir():
                    if entry.name.endswith(".dist-info"):
                        cands.append(entry / "METADATA")
                    elif entry.name.endswith(".egg-info"):
                        cands.append(entry / "PKG-INFO")
            except OSError:
                continue
            for c in cands:
                if c.is_file() and (v := _metadata_version(c, names)):
                    out[pkg] = v
                    break
            if pkg in out:
                break
    return out


def _base_version(v: str) -> Version:
    """PEP 440 version without the local part (``0.20.1rc1.dev159+ge6ff3e9c8.rocm721``)."""
    return Version(v.split("+", 1)[0])


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# =========================================================================== evaluation


def _found_lines(text: str, line: int | None, hunk: Hunk) -> tuple[int, list[str]]:
    """(first line number, lines) of the region that best matches the hunk's expected lines.

    Candidate starts come from expected lines found verbatim in the file; the start that
    lines up the most expected lines wins, ties going to the one nearest ``line`` (where
    GNU patch looked). Without any match, the region at ``line``.
    """
    lines = text.splitlines()
    exp = hunk.expected
    near = line or hunk.old_start
    where: dict[str, list[int]] = {}
    for n, ln in enumerate(lines):
        where.setdefault(ln, []).append(n)
    starts: set[int] = set()
    for k, e in enumerate(exp):
        if e.strip() and len(e.strip()) > 3:
            starts.update(n - k for n in where.get(e, []) if n - k >= 0)
    best, best_key = near - 1, (0, 0)
    for st in starts:
        score = sum(1 for k, e in enumerate(exp) if st + k < len(lines) and lines[st + k] == e)
        key = (score, -abs(st + 1 - near))
        if key > best_key:
            best, best_key = st, key
    start = max(0, min(best, max(0, len(lines) - 1)))
    return start + 1, lines[start:start + len(exp)]


class _Evaluator:
    """Runs a stack over scratch copies of the target files."""

    def __init__(self, stack: Stack, specs: list[PatchSpec], root: Path, versions: dict[str, str]):
        # absolute: a tree given relative to the working directory (``patches apply --source tree``) is
        # checked for links out of it as the absolute one is (confine.inside reads a relative path as
        # relative to the root itself; issue 41, item 13)
        self.stack, self.specs, self.root, self.versions = stack, specs, Path(root).absolute(), versions
        self.tmp = Path(tempfile.mkdtemp(prefix="bisectbot-patch-"))
        self.original: dict[Path, bytes] = {}
        self.current: dict[Path, bytes] = {}
        self.statuses: dict[str, PatchStatus] = {}
        self._n = 0

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _scratch(self, data: bytes, suffix: str) -> Path:
        self._n += 1
        p = self.tmp / f"f{self._n}{suffix}"
        p.write_bytes(data)
        return p

    def run(self) -> list[PatchStatus]:
        for spec in self.specs:
            self.statuses[spec.id] = self._one(spec)
        return [self.statuses[s.id] for s in self.specs]

    def _one(self, spec: PatchSpec) -> PatchStatus:
        st = PatchStatus(spec.id, spec.package, f"{spec.package}/{spec.path}", spec.required, State.NOT_APPLICABLE)
        pdir = package_dir(self.root, spec.package)
        if pdir is None:
            st.detail = f"no {spec.package}/ package directory in this tree"
            return st
        target = pdir / spec.path
        if not inside(self.root, target):  # a symlinked package dir or file pointing out of the tree
            raise PatchError(f"patch {spec.id}: {spec.package}/{spec.path} resolves outside {self.root} "
                             "(symlink): refusing to write there")
        st.path = str(target.relative_to(self.root)) if target.is_relative_to(self.root) else str(target)
        if target not in self.current:
            if not target.is_file():
                st.detail = f"file {spec.package}/{spec.path} absent"
                return st
            self.original[target] = self.current[target] = target.read_bytes()
        data = self.current[target]
        text = data.decode("utf-8", errors="surrogateescape")
        st.sha256_before = st.sha256_after = _sha(data)
        version = self.versions.get(spec.package)

        for r in spec.requires:
            dep = self.statuses.get(r)
            if dep is None:
                raise PatchError(f"patch {spec.id} requires {r}; select {r} before {spec.id}")
            if not (dep.state.applies or dep.state is State.UPSTREAM):
                st.detail = f"requires {r}, which is {dep.state.value}"
                return st
        if spec.when is not None:
            ok, why = spec.when.holds(text, version)
            if not ok:
                st.detail = f"condition: {why}"
                return st
        if re.search(re.escape(f"{MARKER} {spec.id}") + r"(?![\w.-])", text):
            st.state, st.detail = State.UPSTREAM, f"already patched here ('{MARKER} {spec.id}' marker)"
            return st
        if spec.upstream.code is not None and (hit := spec.upstream.code.match(text)):
            st.state, st.detail = State.UPSTREAM, hit
            return st

        preferred, others = [], []
        for var in spec.variants:
            ok, why = var.holds(text, version)
            (preferred if ok else others).append((var, why))
        first_fail: tuple[Variant, PatchRun, str] | None = None
        suffix = target.suffix
        for var, why in preferred + others:
            diff = self.stack.diff_path(var)
            hunks = parse_diff(diff.read_text(encoding="utf-8"), str(diff))
            work = self._scratch(data, suffix)
            run = gnu_patch(diff, work, fuzz=spec.fuzz, n_hunks=len(hunks))
            st.tried.append(var.id + (f" (not preferred: {why})" if why else ""))
            if run.ok:
                new = work.read_bytes()
                if suffix == ".py":
                    try:
                        compile(new, str(target), "exec", dont_inherit=True)
                    except SyntaxError as e:
                        st.state = State.CONFLICT
                        st.variant = var.id
                        st.detail = f"patched file does not compile: {target}:{e.lineno}: {e.msg}"
                        st.failed_hunk = {"number": 0, "header": "(syntax error after patching)",
                                          "expected": [], "found": [], "found_at": e.lineno}
                        return st
                st.variant = var.id
                st.diff_sha256 = _sha(diff.read_bytes())
                st.hunks = [h.__dict__ for h in run.hunks]
                st.offset = max((abs(h.offset) for h in run.hunks), default=0)
                st.fuzz = max((h.fuzz for h in run.hunks), default=0)
                st.state = State.APPLIES_FUZZ if st.fuzz else State.APPLIES_OFFSET if st.offset else State.APPLIES
                if why:
                    st.detail = f"variant {var.id} although {why}"
                self.current[target] = new
                st.sha256_after = _sha(new)
                return st
            if first_fail is None:
                first_fail = (var, run, str(diff))
        if spec.upstream.reverse_applies:
            for var, _ in preferred + others:
                diff = self.stack.diff_path(var)
                work = self._scratch(data, suffix)
                if gnu_patch(diff, work, reverse=True, fuzz=0).ok:
                    st.state, st.detail = State.UPSTREAM, f"variant {var.id} reverse-applies"
                    return st
        assert first_fail is not None
        var, run, dname = first_fail
        hunks = parse_diff(Path(dname).read_text(encoding="utf-8"), dname)
        bad = run.failed[0] if run.failed else HunkResult(1, False)
        hunk = hunks[bad.number - 1] if 0 < bad.number <= len(hunks) else hunks[0]
        # GNU patch counts lines of the file as patched so far: undo earlier hunks' growth
        shift = sum(hunks[r.number - 1].new_len - hunks[r.number - 1].old_len
                    for r in run.hunks if r.ok and r.number < hunk.number and r.number <= len(hunks))
        at, found = _found_lines(text, bad.line - shift if bad.line else None, hunk)
        st.state = State.CONFLICT
        st.variant = var.id
        st.detail = (f"no variant applies (tried {', '.join(v.split(' ')[0] for v in st.tried)}); "
                     f"variant {var.id} hunk #{hunk.number} failed at line {bad.line or hunk.old_start}")
        st.failed_hunk = {"number": hunk.number, "header": hunk.header, "expected": hunk.expected,
                          "found": found, "found_at": at, "diff": dname}
        return st


def _with_requirements(stack: Stack, specs: list[PatchSpec]) -> list[PatchSpec]:
    """``specs`` with every missing (transitive) requirement inserted before its first dependant."""
    out: list[PatchSpec] = []

    def add(spec: PatchSpec) -> None:
        for r in spec.requires:
            dep = stack.get(r)
            if dep not in out:
                add(dep)
        if spec not in out:
            out.append(spec)

    for spec in specs:
        add(spec)
    return out


def _evaluate(stack: Stack, ids: list[str] | None, root: Path, versions: dict[str, str] | None,
              implicit_requirements: bool = False) -> tuple[_Evaluator, list[PatchStatus], dict[str, str]]:
    root = Path(root)
    if not root.is_dir():
        raise BadInput(f"{root}: not a directory")
    specs = stack.select(ids)
    if implicit_requirements:
        specs = _with_requirements(stack, specs)
    vers = detect_versions(root)
    vers.update(versions or {})
    ev = _Evaluator(stack, specs, root, vers)
    try:
        return ev, ev.run(), vers
    except BaseException:
        ev.close()
        raise


def check_stack(stack: Stack, ids: list[str] | None, root: Path,
                versions: dict[str, str] | None = None) -> list[PatchStatus]:
    """What each selected patch would do to ``root``, in stack order; changes nothing.

    Later patches are checked against the tree as the earlier ones would leave it.
    ``ids`` None means the whole stack. A patch's ``requires`` that are not selected are
    evaluated first but not returned (so ``[skip-kv-gather]`` alone is checked on top of
    the workspace patch). Raises :class:`PatchError` for unknown ids; conflicts are
    returned, not raised.
    """
    ev, statuses, _ = _evaluate(stack, ids, root, versions, implicit_requirements=True)
    ev.close()
    wanted = None if ids is None else set(ids)
    return [s for s in statuses if wanted is None or s.id in wanted]


def _applied_hash(stack: Stack, statuses: list[PatchStatus]) -> str:
    h = hashlib.sha256()
    for s in statuses:
        if s.state.applies:
            h.update(f"{s.id}\0{s.variant}\0{s.diff_sha256}\n".encode())
    return h.hexdigest()


def apply_stack(stack: Stack, ids: list[str] | None, root: Path,
                versions: dict[str, str] | None = None) -> StackApplication:
    """Apply the selected patches to ``root``: all of them or none.

    Every patch is first applied to scratch copies; a required patch in conflict raises
    :class:`StackConflict` (a :class:`PatchError`: naming patch, variant, hunk and the
    lines expected; ``.application`` holds every status for the report) and leaves the
    tree byte-identical. Best-effort conflicts are recorded in the result, and the other
    patches still apply. Touched Python files are compiled before anything is written
    (a syntax error is a conflict of the patch that caused it) and byte-compiled
    (``__pycache__``) after writing where the directory is writable.
    """
    ev, statuses, vers = _evaluate(stack, ids, root, versions)
    try:
        sel = [s.id for s in statuses]
        for s in statuses:
            if s.required and s.state is State.CONFLICT:
                files = {(str(p.relative_to(root)) if p.is_relative_to(root) else str(p)):
                         {"before": _sha(ev.original[p]), "after": _sha(ev.original[p])} for p in ev.original}
                app = StackApplication(str(root), sel, statuses, stack_hash(stack, sel), "", vers, files, False)
                raise StackConflict(conflict_message(s), s, app)
        changed = {p: d for p, d in ev.current.items() if d != ev.original[p]}
        written: list[Path] = []
        try:
            for p, d in changed.items():
                _replace_bytes(p, d)
                written.append(p)
        except BaseException:
            for p in written:
                _replace_bytes(p, ev.original[p])
            raise
        for p in changed:
            if p.suffix == ".py":
                try:
                    py_compile.compile(str(p), doraise=True)
                except py_compile.PyCompileError as e:  # compiled in memory already; defensive
                    for q in written:
                        _replace_bytes(q, ev.original[q])
                    raise PatchError(f"{p}: does not compile after patching: {e.msg}") from None
                except OSError:
                    pass  # read-only __pycache__: the source is what counts
        files = {
            (str(p.relative_to(root)) if p.is_relative_to(root) else str(p)): {
                "before": _sha(ev.original[p]), "after": _sha(ev.current[p])}
            for p in ev.original
        }
        return StackApplication(str(root), sel, statuses, stack_hash(stack, sel), _applied_hash(stack, statuses),
                                vers, files, applied=True)
    finally:
        ev.close()


class StackConflict(PatchError):
    """A required patch conflicts; nothing was written.

    ``status``: the conflicting patch's :class:`PatchStatus`; ``application``: every
    patch's status with ``applied=False`` (for a ``skip`` verdict's report).
    """

    def __init__(self, message: str, status: PatchStatus, application: StackApplication):
        super().__init__(message)
        self.status = status
        self.application = application


def _replace_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and ``os.replace``, keeping the mode."""
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def conflict_message(s: PatchStatus) -> str:
    """One line naming the patch, variant and failing hunk, plus the expected and found lines."""
    h = s.failed_hunk or {}
    head = f"patch {s.id} ({'required' if s.required else 'best-effort'}) does not apply to {s.path}: {s.detail}"
    if not h.get("expected"):
        return head
    exp = "\n".join("    " + ln for ln in h["expected"])
    found = "\n".join("    " + ln for ln in h.get("found", []))
    return f"{head}\n  hunk #{h['number']} {h['header']} expected:\n{exp}\n  found at line {h.get('found_at')}:\n{found}"


def check_release(stack: Stack, ids: list[str] | None, package: str, version: str,
                  index_url: str | None = None, cache_dir: Path | None = None) -> list[PatchStatus]:
    """:func:`check_stack` on one release of ``package`` from the package index.

    Downloads the sdist once (cached by sha256 under the bisectbot cache), extracts only
    the files the selected patches of ``package`` touch (plus PKG-INFO) into a temporary
    directory and checks there. Patches of other packages come back *not applicable*.
    """
    from .sources import releases

    specs = stack.select(ids)
    members = sorted({f"{s.package}/{s.path}" for s in specs if s.package == package})
    with tempfile.TemporaryDirectory(prefix="bisectbot-release-") as d:
        root = releases.fetch_sdist_tree(package, version, members, Path(d), index_url=index_url,
                                         cache_dir=cache_dir)
        return check_stack(stack, [s.id for s in specs], root, {package: version})
