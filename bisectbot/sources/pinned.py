"""Pins inside a git repository: what a commit pins, which pins a commit moved, and the range
between two pins of a component's repository (across rewritten histories).

* :func:`pins_at` reads every pin of one commit (Dockerfiles, requirements files, gitlinks),
  with :mod:`bisectbot.pins`.
* :func:`pin_diff` classifies the change between two commits of the pinning repository:
  ``pin_only`` when every changed path is a pin value (or a path outside the recipe's
  ``runtime_paths``), with the pins that moved; else the paths that are code changes.
* :func:`resolve_pin` finds a pinned ref (``v0.1.22``, ``0.1.22``, a SHA, a
  ``0.1.23.dev88+gb3eed3fd4`` version) in the component's repository.
* :func:`pin_range` gives the first-parent range between two pinned refs; when the old ref is not
  on the new one's first-parent chain (aiter's tags <= v0.1.11.post1 and >= v0.1.12 have
  different roots; release tags sit on release branches), the newest commit of the old ref's
  first-parent history that maps into the new history by identity, PR number or subject
  (:func:`bisectbot.components.map_commits`) stands in for it, and the range says so.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import pins as P
from ..errors import BadInput
from ..versions import parse_version
from .git import GitRepo

_MAP_DEPTH = 5000  # first-parent commits of each side searched when mapping across histories


def _git(repo: GitRepo, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo.path), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise BadInput(f"{repo.path}: git {' '.join(args)} failed: {p.stderr.strip().splitlines()[-1:]}")
    return p.stdout


#: Largest pin file read (bytes): a Dockerfile, requirements file or ``.gitmodules`` is a few KB
#: (vLLM's largest, ``docker/Dockerfile.rocm``, is ~15 KB); 1 MiB is 60x that. A larger blob is a
#: candidate's content the bot must not hold whole (issue 41, item 15: a 200 MB "requirements"
#: file took 5.3x its size in memory).
MAX_PIN_FILE_BYTES = 1024 * 1024


def _show(repo: GitRepo, sha: str, path: str) -> str:
    """The text of ``path`` at ``sha`` ("" when it is not there). Raises BadInput, naming the file,
    the commit and both sizes, for a blob over :data:`MAX_PIN_FILE_BYTES` (its size is asked first:
    it is never read)."""
    size = subprocess.run(["git", "-C", str(repo.path), "cat-file", "-s", f"{sha}:{path}"],
                          capture_output=True, text=True)
    if size.returncode != 0:
        return ""
    n = int(size.stdout.strip() or 0)
    if n > MAX_PIN_FILE_BYTES:
        raise BadInput(f"{repo.path}: {path} at {sha[:12]} is {n:,} bytes; a pin file is read up to "
                       f"{MAX_PIN_FILE_BYTES:,} bytes (a Dockerfile or requirements file is a few KB): not read")
    p = subprocess.run(["git", "-C", str(repo.path), "show", f"{sha}:{path}"], capture_output=True)
    return p.stdout.decode("utf-8", "replace") if p.returncode == 0 else ""


def pins_at(repo: GitRepo, ref: str) -> list[P.Pin]:
    """Every pin of commit ``ref``: each Dockerfile's and requirements file's pins (sorted by path)
    and each gitlink (with its ``.gitmodules`` URL). Raises BadInput for an unknown ref."""
    sha = repo.resolve(ref)
    out: list[P.Pin] = []
    listing = _git(repo, "ls-tree", "-r", "--full-tree", sha)
    gitlinks = P.ls_tree_gitlinks(listing)
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        if meta.split()[1:2] == ["blob"] and P.is_pin_file(path) and not path.endswith(".gitmodules"):
            out += P.file_pins(path, _show(repo, sha, path))
    if gitlinks:
        modules = P.gitmodules(_show(repo, sha, ".gitmodules"))
        out += [P.submodule_pin(path, s, modules) for path, s in sorted(gitlinks.items())]
    return out


def pin_of(repo: GitRepo, ref: str, component: str, aliases: list[str] | None = None) -> P.Pin | None:
    """The first pin of ``component`` (or one of its ``aliases``) at ``ref``: gitlinks first, then
    files in path order. None when the commit does not pin it."""
    names = {component: list(aliases or [])}
    found = [p for p in pins_at(repo, ref) if P.match_component(p.component, names) or
             P.match_component(p.name, names)]
    found.sort(key=lambda p: (p.kind != "submodule", p.path, p.line))
    return found[0] if found else None


@dataclass
class PinDiff:
    """The change from ``old`` to ``new`` (two commits of the pinning repository), path by path.

    ``moves`` are the pins that moved; ``code`` the changed paths that are neither pin values nor
    outside ``runtime_paths`` (a real code change); ``ignored`` the changed paths outside the
    runtime paths (docs, CI, tests). A pin file whose lines other than pin values changed too is in
    ``code``: it changes the build.
    """

    old: str
    new: str
    moves: list[P.PinMove] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def pin_only(self) -> bool:
        """True when the commit moves at least one pin and changes nothing else that runs."""
        return bool(self.moves) and not self.code

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pin_only"] = self.pin_only
        return d


def _runtime(path: str, runtime_paths: list[str] | tuple[str, ...]) -> bool:
    return not runtime_paths or any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/")
                                    for r in runtime_paths)


def pin_diff(repo: GitRepo, old: str, new: str, runtime_paths: list[str] | tuple[str, ...] = ()) -> PinDiff:
    """Classify the diff between commits ``old`` and ``new`` (see :class:`PinDiff`).

    A gitlink whose commit changed is a pin move; a pin file (Dockerfile, requirements file,
    ``.gitmodules``) whose lines differ only in pin values contributes its moves; a pin file with
    other changes is a code change (it changes the build); any other path is a code change when it
    lies inside ``runtime_paths`` (all paths when none are given) and ignored otherwise.
    """
    a, b = repo.resolve(old), repo.resolve(new)
    out = PinDiff(a, b)
    raw = _git(repo, "diff", "--raw", "--no-renames", "--no-abbrev", a, b)
    modules_new: dict[str, dict[str, str]] | None = None
    for line in raw.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.lstrip(":").split()
        if len(parts) < 5:
            continue
        mode_a, mode_b, sha_a, sha_b = parts[:4]
        if mode_a == "160000" and mode_b == "160000":  # a submodule bump
            if modules_new is None:
                modules_new = P.gitmodules(_show(repo, b, ".gitmodules"))
            pin = P.submodule_pin(path, sha_b, modules_new)
            out.moves.append(P.PinMove(pin.component, path, path, "submodule", sha_a, sha_b, pin.repo_url))
            continue
        if P.is_pin_file(path) and mode_a != "000000" and mode_b != "000000":
            fm = P.pin_file_moves(path, _show(repo, a, path), _show(repo, b, path))
            out.moves += fm.moved
            if fm.other:
                out.code.append(path)
            continue
        (out.code if _runtime(path, runtime_paths) else out.ignored).append(path)
    return out


def resolve_pin(repo: GitRepo, ref: str) -> str | None:
    """The full SHA a pinned ``ref`` names in ``repo``: the ref itself (tag, branch, SHA), ``v`` +
    a version (``0.1.22`` -> tag ``v0.1.22``), or the commit inside a setuptools-scm version
    (``0.1.23.dev88+gb3eed3fd4``). None when none of them exists (a pin to a missing tag)."""
    tries = [ref]
    if ref[:1].isdigit():
        tries.append("v" + ref)
    commit = parse_version(ref).commit
    if commit:
        tries.append(commit)
    for t in tries:
        try:
            return repo.resolve(t)
        except BadInput:
            continue
    return None


@dataclass
class PinRange:
    """The commits to bisect between two pins: ``good`` .. ``bad`` (full SHAs, ``good`` on ``bad``'s
    first-parent chain). ``how`` is ``direct`` or, when ``good`` stands in for the old pin,
    ``pr``/``subject``/``ancestor`` (see :func:`pin_range`); ``note`` says so in words."""

    old_ref: str
    new_ref: str
    good: str
    bad: str
    how: str = "direct"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_parent(repo: GitRepo, sha: str, n: int) -> list[tuple[str, str]]:
    """``(sha, subject)`` of the ``n`` newest commits of ``sha``'s first-parent chain, subjects
    bounded (:func:`~bisectbot.sources.git.log_subjects`)."""
    from ..gitlog import log_subjects

    return log_subjects(repo.path, "--first-parent", f"-{n}", sha, "--")


def pin_range(repo: GitRepo, old_ref: str, new_ref: str) -> PinRange:
    """The first-parent range of ``repo`` from the old pin to the new one.

    When the old pin's commit lies on the new pin's first-parent chain, the range is direct.
    Otherwise the old pin's first-parent history is walked newest first and its first commit that
    is on the new chain, or maps onto it by PR number or subject, is the good end (the change the
    old pin already had, under the new history's SHA). Raises BadInput when a ref does not exist,
    when the new pin is an ancestor of the old one (a downgrade: what regressed is a change the
    old pin had, a fix bisection's question), or when nothing of the old history maps onto the new.
    """
    from ..components import CommitRef, map_commits

    a, b = resolve_pin(repo, old_ref), resolve_pin(repo, new_ref)
    for ref, sha in ((old_ref, a), (new_ref, b)):
        if sha is None:
            raise BadInput(f"{repo.path}: the pinned ref {ref!r} is not in the repository (no such tag, branch or "
                           f"commit; fetch its tags)")
    assert a is not None and b is not None
    if a == b:
        raise BadInput(f"{repo.path}: {old_ref} and {new_ref} are the same commit {a[:12]}")
    target = _first_parent(repo, b, _MAP_DEPTH)
    on_chain = {sha for sha, _ in target}
    if a in on_chain:
        return PinRange(old_ref, new_ref, a, b)
    if repo.repo.is_ancestor(b, a):  # vllm#39509 moved aiter back to v0.1.10.post3
        raise BadInput(f"{new_ref} is older than {old_ref} in {repo.path} (the pin moves back): the regression is "
                       f"something {old_ref} had that {new_ref} lacks; bisect {new_ref}..{old_ref} of {repo.component} "
                       f"as a fix bisection (regress: success)")
    olds = _first_parent(repo, a, _MAP_DEPTH)
    mapped = map_commits([CommitRef(s, subj) for s, subj in olds], [CommitRef(s, subj) for s, subj in target])
    for sha, subj in olds:
        if sha in on_chain:
            return PinRange(old_ref, new_ref, sha, b, "ancestor",
                            f"{old_ref} ({a[:12]}) is not on the first-parent history of {new_ref}; its newest "
                            f"ancestor there, {sha[:12]} ({subj[:60]}), is the good end")
        m = mapped[sha]
        if m.new and m.how in ("pr", "subject") and m.new != b:
            return PinRange(old_ref, new_ref, m.new, b, m.how,
                            f"{old_ref} ({a[:12]}) is not in the history of {new_ref} (rewritten history: no "
                            f"common first-parent chain); its commit {sha[:12]} ({subj[:60]}) maps by "
                            f"{'PR number' if m.how == 'pr' else 'subject'} to {m.new[:12]}, the good end")
    raise BadInput(f"{repo.path}: no commit of {old_ref}'s history is in, or maps by PR number or subject "
                   f"onto, the first-parent history of {new_ref}")
