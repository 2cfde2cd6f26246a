"""A change under test (issue 42): a unified diff applied on top of a candidate before it is built.

Two callers make one: a try job (``bisectbot try --patch FILE | --ref REF``, ``/bisectbot test``)
tests a maintainer's fix on the first bad; ``run --minimize`` applies subsets of a culprit's own
diff on top of its predecessor. Either way the runner applies the change after the recipe's patch
stack and before the build command (:func:`apply_change`), and the change's digest is part of the
candidate's build key (:meth:`Change.key`), so a probe with a change never answers for one without
it (or with another change).

Paths are those of ``git diff`` (``a/<path>`` / ``b/<path>``, one strip level), relative to the
root of the component's repository: a local runner applies them in the candidate's worktree; the
container runner in the staging root of the installed packages (``ROOT/vllm``, ``ROOT/aiter``,
which is where a repository's package directory lands), so only files under a package directory
apply there (the rest -- tests, docs, C++ sources -- are named in :attr:`Applied.left_out`; compiled
sources make the change unusable on an image without a source build, see
:func:`bisectbot.build.build_image`).

Units (:func:`units`): a change splits into files, a file's change into hunks (``unidiff``'s
parse). A unit that cannot be split further -- a binary file, a rename or copy, a mode change, a
new or deleted file -- is one unit of the ``files`` level and never splits into hunks; it is said
by :func:`unsplittable`. :func:`compose` puts any subset of one change's units back into a diff
(a file's header once, its chosen hunks in their order; GNU patch finds each hunk by its context,
so the original line numbers of a subset stay usable).
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import BadInput, PatchError

__all__ = ["Applied", "Change", "ChangeConflict", "Unit", "apply_change", "change_of", "compose", "from_git", "load_change",
           "units", "unsplittable"]

#: The largest diff a change may be, in bytes: a pull request of vLLM's largest kind (a model
#: addition) is well under 2 MB of diff; a bigger file is more likely a wrong file (a tarball, a log)
#: than a change to test.
MAX_DIFF_BYTES = 8 * 1024 * 1024


class ChangeConflict(PatchError):
    """A change under test does not apply to a candidate's tree; the message names the change's
    source, the file and the hunks. The candidate is a skip (its tree is not the one asked)."""


@dataclass(frozen=True)
class Change:
    """``diff``: the unified diff (UTF-8 text, ``git diff`` paths); ``source``: where it came from,
    said in every report (``patch fix.diff``, ``ref pr-123 (3 commits on abc1234)``, ``culprit
    abc1234: 3 of 24 hunks``); ``component``: the repository the paths are relative to (``""``: the
    candidate's own); ``fuzz``: context lines GNU patch may ignore (0: the change applies as
    written, as a culprit's own hunks do on its predecessor; a try job's patch, written against
    another commit, gets the patch stack's default 2)."""

    diff: str
    source: str
    component: str = ""
    fuzz: int = 0

    @functools.cached_property
    def sha256(self) -> str:
        """SHA-256 (hex) of the diff's bytes (computed once: every probe key of the candidate holds it)."""
        return hashlib.sha256(self.diff.encode()).hexdigest()

    def key(self) -> str:
        """``|change:<16 hex>[~fuzz<n>]``: appended to a build key."""
        return f"|change:{self.sha256[:16]}" + (f"~fuzz{self.fuzz}" if self.fuzz else "")

    def files(self) -> list[str]:
        """The paths the diff touches (targets; a deleted file's source path)."""
        return [u.path for u in units(self, "files")]

    def to_meta(self) -> dict[str, Any]:
        """JSON form kept in ``Candidate.meta["change"]``."""
        return {"diff": self.diff, "source": self.source, "component": self.component, "fuzz": self.fuzz,
                "sha256": self.sha256}

    @classmethod
    def from_meta(cls, d: Any) -> Change | None:
        """The change of a candidate's ``meta["change"]`` (None when it has none)."""
        if not isinstance(d, dict) or not isinstance(d.get("diff"), str):
            return None
        fuzz = d.get("fuzz") if isinstance(d.get("fuzz"), int) else 0
        return cls(d["diff"], str(d.get("source") or ""), str(d.get("component") or ""), fuzz)


def change_of(candidate: Any) -> Change | None:
    """The change a candidate carries (``candidate.meta["change"]``), or None."""
    meta = getattr(candidate, "meta", None) or {}
    return Change.from_meta(meta.get("change"))


@functools.lru_cache(maxsize=16)
def _parse(text: str, name: str) -> Any:
    """The diff parsed (``unidiff.PatchSet``, read-only to callers; the last few kept: units, compose and
    apply read one change several times) with its paths checked. Raises :class:`BadInput`."""
    import unidiff

    try:
        ps = unidiff.PatchSet(text)
    except unidiff.UnidiffParseError as e:
        raise BadInput(f"{name}: not a unified diff: {e}") from None
    if not len(ps):
        raise BadInput(f"{name}: no file in the diff (expected `git diff` or `git format-patch` output)")
    for f in ps:
        for p in (f.source_file, f.target_file):
            _check_path(p, name)
        info = str(f.patch_info or "")
        if (f.source_file != "/dev/null" and f.target_file != "/dev/null" and _rel(f.source_file) != _rel(f.target_file)
                and "rename from " not in info and "copy from " not in info):
            raise BadInput(f"{name}: a file diff whose --- and +++ lines name different files "
                           f"({_rel(f.source_file)!r}, {_rel(f.target_file)!r}): which one it changes is not clear")
        for line in info.splitlines():  # git's extended headers name paths too
            m = re.match(r"^(?:rename|copy) (?:from|to) (.+)$", line)
            if m:
                _check_path(m.group(1), name)
            if re.match(r"^(?:new file mode|new mode|old mode|deleted file mode) 120000", line):
                raise BadInput(f"{name}: {_rel(f.target_file if f.target_file != '/dev/null' else f.source_file)}: "
                               "a symbolic link: a change under test may not make or change one")
            if re.match(r"^(?:new file mode|new mode) 160000", line):
                raise BadInput(f"{name}: {_rel(f.target_file)}: a submodule: not applied")
    return ps


def _unquote(p: str) -> str:
    """git's C-style quoted name (``"a/notes \\303\\251.txt"``: core.quotePath) as text; others as they are."""
    if len(p) < 2 or not (p.startswith('"') and p.endswith('"')):
        return p
    raw = p[1:-1].encode("latin-1", "backslashreplace")
    try:
        return raw.decode("unicode_escape").encode("latin-1").decode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        return p


def _rel(p: str) -> str:
    """A diff path without its ``a/`` / ``b/`` prefix (git's quoting undone)."""
    p = _unquote(p)
    return p[2:] if p[:2] in ("a/", "b/") else p


def _check_path(p: str, name: str) -> None:
    if p in ("/dev/null", None):
        return
    rel = _rel(p)
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or ".." in parts or not parts or "\\" in rel or any(ord(ch) < 32 for ch in rel):
        raise BadInput(f"{name}: path {p!r} leaves the tree (absolute, '..' or control characters)")
    if parts[0] == ".git" or ".git" in parts:
        raise BadInput(f"{name}: path {p!r} writes into a .git directory")


def load_change(path: Path, source: str = "", component: str = "", fuzz: int = 2) -> Change:
    """A change from a patch file (``git diff`` / ``git format-patch`` output).

    Raises :class:`bisectbot.errors.BadInput` (file and reason) for a missing, too large (over
    :data:`MAX_DIFF_BYTES`), non-UTF-8 or empty file, a file that is no unified diff, and a path that
    leaves the tree."""
    p = Path(path)
    try:
        st = p.stat()
        if not p.is_file():
            raise BadInput(f"{p}: not a regular file: a patch file is expected")
        if st.st_size > MAX_DIFF_BYTES:
            raise BadInput(f"{p}: {st.st_size} bytes: larger than a change to test ({MAX_DIFF_BYTES} bytes)")
        with p.open("rb") as fh:
            data = fh.read(MAX_DIFF_BYTES + 1)
    except OSError as e:
        raise BadInput(f"{p}: cannot read the patch: {e.strerror or e}") from None
    if len(data) > MAX_DIFF_BYTES:
        raise BadInput(f"{p}: larger than a change to test ({MAX_DIFF_BYTES} bytes)")
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise BadInput(f"{p}: not UTF-8 text at byte {e.start}: a patch file is expected") from None
    text = _strip_mail(text)
    _parse(text, str(p))
    return Change(text, source or f"patch {p.name}", component, fuzz)


def _strip_mail(text: str) -> str:
    """``git format-patch`` output (one mail or a series, ``From <sha> ...`` lines between them) as the
    diffs only, in order: each mail's text from its first ``diff --git`` line to its signature
    (``-- `` then git's version). Text that is no mail is returned as it is (a plain diff may remove a
    line ``- ``, which reads as ``-- ``)."""
    if not re.match(r"^From [0-9a-f]{40} ", text):
        return text
    parts = []
    for mail in re.split(r"^From [0-9a-f]{40} .*$", text, flags=re.M):
        m = re.search(r"^diff --git ", mail, re.M)
        if m is None:
            continue
        body = mail[m.start():]
        sig = re.search(r"^-- \n(?:\d+[.\d]*.*\n?)?\s*\Z", body, re.M)  # the "-- \n2.43.0" trailer
        parts.append(body[:sig.start()] if sig else body)
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def from_git(repo: Path, base: str, head: str, *, source: str = "", component: str = "", fuzz: int = 0) -> Change:
    """The change ``base..head`` of the git repository ``repo`` (``git diff --no-renames --binary``:
    a rename is a deletion and an addition, which the patch step applies).

    Raises :class:`bisectbot.errors.BadInput` when either ref is unknown or the two trees are equal."""
    from . import gitenv

    gitenv.neutralise_repo(repo)  # the repository's own configuration runs nothing (issue 36)
    gitenv.install()

    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=300)
        if r.returncode != 0:
            raise BadInput(f"{repo}: git {' '.join(args[:3])}: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        return r.stdout

    b, h = git("rev-parse", "--verify", f"{base}^{{commit}}").strip(), git("rev-parse", "--verify",
                                                                           f"{head}^{{commit}}").strip()
    text = git("-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
               "--binary", "--full-index", "--src-prefix=a/", "--dst-prefix=b/", b, h)
    if not text.strip():
        raise BadInput(f"{repo}: {base}..{head}: no change (the two trees are equal)")
    _parse(text, f"{base}..{head}")
    return Change(text, source or f"{head} ({h[:12]}) against {b[:12]}", component, fuzz)


# ---------------------------------------------------------------------------------------- units


@dataclass(frozen=True)
class Unit:
    """One part of a change: a whole file (``hunk`` None) or one hunk of a file (its 0-based index).
    ``lines``: the diff lines this unit adds and removes (its size, for reports); ``whole``: why the
    file cannot be split into hunks (``binary``, ``a new file``, ...; ``""`` when it can)."""

    path: str
    hunk: int | None
    header: str = ""
    lines: int = 0
    whole: str = ""

    def label(self) -> str:
        """``vllm/a.py`` or ``vllm/a.py hunk 3 (line 12: -x = 1)`` (the hunk's first changed line)."""
        if self.hunk is None:
            return self.path
        return f"{self.path} hunk {self.hunk + 1}" + (f" ({self.header})" if self.header else "")


def _path_of(f: Any) -> str:
    return _rel(f.target_file if f.target_file != "/dev/null" else f.source_file)


def _whole(f: Any) -> str:
    """Why a file's change cannot be split into hunks (``binary``, ``renamed from X``, ``copied``, ``a new
    file``, ``deleted``, ``a mode change``), or ``""`` when it can."""
    info = str(f.patch_info or "")
    if f.is_binary_file:
        return "binary"
    if getattr(f, "is_rename", False):
        return f"renamed from {_rel(f.source_file)}"
    if "copy from " in info:
        return "copied"
    if f.is_added_file:
        return "a new file"
    if f.is_removed_file:
        return "deleted"
    return "a mode change" if "new mode " in info else ""


def units(change: Change, level: str) -> list[Unit]:
    """The units of ``change`` at ``level`` (``files`` or ``hunks``), in diff order; at ``hunks``
    a file that cannot be split stays one unit (``hunk`` None)."""
    out: list[Unit] = []
    for f in _parse(change.diff, change.source or "change"):
        path, whole = _path_of(f), _whole(f)
        if level == "files" or whole or not len(f):
            out.append(Unit(path, None, "", f.added + f.removed, whole))
            continue
        for i, h in enumerate(f):
            first = next((ln for ln in h if ln.is_added or ln.is_removed), None)
            shown = f"line {first.source_line_no or first.target_line_no}: {first.line_type}{first.value.strip()}" \
                if first is not None else f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
            out.append(Unit(path, i, shown[:100], h.added + h.removed))
    return out


def unsplittable(change: Change) -> list[str]:
    """Why parts of ``change`` cannot be split into hunks: ``["img.png: binary", "x.py: renamed
    from y.py", ...]`` (empty when every file splits)."""
    return [f"{u.path}: {u.whole}" for u in units(change, "files") if u.whole]


def _tabbed(text: str) -> str:
    """``---``/``+++`` lines whose name holds a space end with a TAB, as git writes them: GNU patch reads a
    name up to the TAB (else up to the first space, and patches another file)."""
    return re.sub(r"^((?:---|\+\+\+) [^\t\n]* [^\t\n]*)$", "\\1\t", text, flags=re.M)


def compose(change: Change, chosen: list[Unit], source: str) -> Change:
    """The diff of ``chosen`` units of ``change`` (any level; a whole file takes all its hunks), in
    the diff's order, as a new :class:`Change` said as ``source``."""
    want_file = {u.path for u in chosen if u.hunk is None}
    want_hunk: dict[str, set[int]] = {}
    for u in chosen:
        if u.hunk is not None:
            want_hunk.setdefault(u.path, set()).add(u.hunk)
    parts: list[str] = []
    for f in _parse(change.diff, change.source or "change"):
        path = _path_of(f)
        if path in want_file:
            parts.append(str(f))
        elif path in want_hunk:
            head = str(f.patch_info or "")
            head += f"--- {f.source_file}\n+++ {f.target_file}\n"
            parts.append(head + "".join(str(h) for i, h in enumerate(f) if i in want_hunk[path]))
    text = _tabbed("".join(p if p.endswith("\n") else p + "\n" for p in parts))
    return Change(text, source, change.component, change.fuzz)


# ---------------------------------------------------------------------------------------- applying


@dataclass
class Applied:
    """What :func:`apply_change` did: ``files`` patched (paths of the diff), ``left_out`` (paths outside
    ``only_under``, not applied, with the reason)."""

    files: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``Prepared.meta["change"]``)."""
        return {"files": list(self.files), "left_out": list(self.left_out)}


def apply_change(change: Change, root: Path, *, only_under: tuple[str, ...] | None = None) -> Applied:
    """Apply ``change`` in the tree ``root`` with GNU patch (``-p1``, ``--fuzz`` = ``change.fuzz``), file
    by file.

    ``only_under``: top-level directories the change may touch here (the container runner's package
    directories); other files are left out and said. A symlink on a patched path is refused (it could
    point out of ``root``). Raises :class:`bisectbot.errors.PatchError` naming the file and the hunks
    that do not apply (nothing is left half-applied in that file; earlier files stay patched: the
    caller discards the tree)."""
    exe = shutil.which("patch")
    if not exe:
        raise PatchError("GNU patch is not installed (apt-get install patch)")
    root = Path(root)
    done = Applied()
    for f in _parse(change.diff, change.source or "change"):
        path = _path_of(f)
        if only_under is not None and PurePosixPath(path).parts[0] not in only_under:
            done.left_out.append(f"{path} (not under {', '.join(only_under) or 'a package directory'})")
            continue
        if f.is_binary_file:
            raise ChangeConflict(f"{change.source}: {path}: a binary file: GNU patch cannot apply it")
        for rel in {_rel(f.source_file), _rel(f.target_file)} - {"dev/null", "/dev/null"}:
            cur = root
            for part in PurePosixPath(rel).parts:
                cur = cur / part
                if cur.is_symlink():
                    raise ChangeConflict(f"{change.source}: {rel}: a symbolic link in the tree: not followed")
        with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False) as fh:
            fh.write(_tabbed(str(f)))
            diff = Path(fh.name)
        try:
            r = subprocess.run([exe, "-p1", "--force", "--batch", "--no-backup-if-mismatch", "--reject-file=-",
                                f"--fuzz={change.fuzz}", "--quoting-style=literal", "-d", str(root), "-i", str(diff)],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                               env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C"})
        finally:
            diff.unlink(missing_ok=True)
        if r.returncode != 0:
            failed = re.findall(r"Hunk #(\d+) FAILED", r.stdout + r.stderr)
            if failed:
                what = (f"hunk {failed[0]} of {len(f)} does not apply" if len(failed) == 1 else
                        f"hunks {', '.join(failed)} of {len(f)} do not apply")
            else:
                what = ((r.stdout + r.stderr).strip().splitlines() or [f"exit {r.returncode}"])[-1]
            raise ChangeConflict(f"{change.source}: {path}: {what}")
        done.files.append(path)
    return done
