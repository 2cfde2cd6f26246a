"""Commit ranges of a git repository, as ordered candidate lists.

Listing a range is one ``git log`` subprocess whatever its length (50,000 first-parent
commits in about the time ``git log --first-parent`` itself takes); GitPython serves the
single-object questions (resolve a ref, ancestry, worktrees).

The range between a good and a bad commit follows the first-parent chain by default
(merges of a topic branch are one candidate, as on vLLM's and aiter's main branches),
oldest first, both ends included. Also here: the inputs of the plausibility flags of a
culprit (number of parents, paths changed against its predecessor, tree identity).

Errors: an unknown ref, or a good commit that is not an ancestor of the bad one, is
:class:`bisectbot.errors.BadInput` (exit code 2) naming the repository and the ref.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import git

from ..errors import BadInput
from ..gitlog import _READ_BYTES, MAX_FIELD_BYTES, MAX_SUBJECT_CHARS, _log_fields, log_records, log_subjects  # noqa: F401
from ..models import Candidate, CandidateKind


def _locked(fn):  # GitPython's persistent cat-file processes are not thread-safe
    @functools.wraps(fn)
    def wrapper(self, *a, **kw):
        with self.lock:
            return fn(self, *a, **kw)
    return wrapper


log = logging.getLogger(__name__)

# one record per commit: SHA, parents, committer date (strict ISO 8601), author name, subject
_LOG_FORMAT = "%H%x00%P%x00%cI%x00%an%x00%s"  # with -z: one flat NUL-separated stream, 5 fields a commit
# (``%cI`` is strict ISO 8601 with a numeric offset: what ``datetime.isoformat()`` gives.)


_URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")


def is_url(spec: str) -> bool:
    """True for ``https://…``, ``file://…``, ``ssh://…`` and scp-like ``git@host:path``."""
    return bool(_URL_RE.match(spec))


GIT_TIMEOUT_ENV = "BISECTBOT_GIT_TIMEOUT_S"
GIT_TIMEOUT_S = 3600.0
"""Longest a clone or fetch of a URL may take, seconds (``$BISECTBOT_GIT_TIMEOUT_S`` overrides)."""
STALL_BYTES_PER_S, STALL_S = "1000", "120"
"""An HTTP(S) transfer slower than this for that long is aborted (git's ``GIT_HTTP_LOW_SPEED_*``)."""


class GitFailed(Exception):
    """A networked git command failed or timed out; the message is git's last stderr line (or the timeout)."""


def network_git(args: list[str]) -> None:
    """Run ``git ARGS`` that talks to a remote (clone, fetch) so that it cannot hang a night: no
    credential prompt (``GIT_TERMINAL_PROMPT=0``, ssh in batch mode), an HTTP transfer that stalls
    is aborted after :data:`STALL_S` seconds (a server that accepts and never answers), and the
    whole command, with its helpers (``git-remote-https``, ``ssh``), is killed after
    :data:`GIT_TIMEOUT_S` seconds (``$BISECTBOT_GIT_TIMEOUT_S``; ``git://`` has no stall limit).
    Raises :class:`GitFailed` (git's last stderr line, or the timeout) when git fails or times out,
    :class:`BadInput` for a malformed ``$BISECTBOT_GIT_TIMEOUT_S``."""
    raw = os.environ.get(GIT_TIMEOUT_ENV, "").strip()
    try:
        timeout_s = float(raw) if raw else GIT_TIMEOUT_S
        if not timeout_s > 0:
            raise ValueError
    except ValueError:
        raise BadInput(f"{GIT_TIMEOUT_ENV}={raw[:40]!r}: seconds (a positive number) expected") from None
    env = dict(os.environ)
    env.setdefault("GIT_HTTP_LOW_SPEED_LIMIT", STALL_BYTES_PER_S)
    env.setdefault("GIT_HTTP_LOW_SPEED_TIME", STALL_S)
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=60")
    env["GIT_TERMINAL_PROMPT"] = "0"
    cmd = ["git", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)  # its own group: helpers die with it
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise GitFailed(f"no answer within {timeout_s:g} s ({GIT_TIMEOUT_ENV})") from None
    if proc.returncode:
        lines = err.strip().splitlines()
        raise GitFailed(lines[-1] if lines else f"git {args[0]} exited {proc.returncode}")


def without_credentials(url: str) -> str:
    """``url`` without the secret part of its user info: ``https://user:TOKEN@host/x`` and
    ``https://TOKEN@host/x`` -> ``https://host/x`` (an HTTP user is only ever a credential), ``ssh://git:PW@host/x``
    -> ``ssh://git@host/x`` (ssh needs its user name); a URL without user info is returned as it is."""
    m = re.match(r"^([a-z][a-z0-9+.-]*://)([^/]*)@", url, re.I)  # user info runs to the last '@' before the path
    if not m:
        return url
    scheme, userinfo = m.group(1), m.group(2)
    rest = url[m.end():]
    if scheme.lower() in ("http://", "https://"):
        return scheme + rest
    return f"{scheme}{userinfo.split(':', 1)[0]}@{rest}"


def local_repo(spec: str | Path, base_dir: Path | None = None, cache_dir: Path | None = None,
               fetch: bool = True) -> Path:
    """The local git repository a recipe's ``repo`` field names.

    * A URL is cloned once (bare: candidates and worktrees need no checkout) into
      ``<cache>/repos/<name>-<hash8>`` (``<cache>`` = ``$BISECTBOT_CACHE`` or
      ``$XDG_CACHE_HOME/bisectbot``) and fetched again on later calls (``fetch``); a fetch
      that fails keeps the clone as it is, with a warning.
    * A relative path is looked up next to the recipe (``base_dir``), then in the current
      directory.

    Raises :class:`BadInput` when the path does not exist or the clone fails or times out
    (:func:`network_git`: a server that accepts and never answers cannot hang the night).
    """
    text = str(spec)
    if is_url(text):
        from .releases import cache_dir_default

        root = (cache_dir or cache_dir_default()) / "repos"
        name = re.sub(r"(\.git)?/*$", "", text).rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "repo"
        dest = root / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
        fresh = not dest.exists()
        if fresh:
            root.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                git.Git.check_unsafe_protocols(text)  # ext::, fd:: (GitPython's check, kept without GitPython's clone)
                network_git(["clone", "--bare", "--", text, str(tmp)])
                # the clone's config keeps no credentials: candidates run in its worktrees and can read it
                subprocess.run(["git", "-C", str(tmp), "remote", "set-url", "origin", without_credentials(text)],
                               check=True, capture_output=True)
            except (GitFailed, git.exc.UnsafeProtocolError, subprocess.CalledProcessError) as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise BadInput(f"cannot clone {text}: {e}") from None
            tmp.rename(dest)
        else:  # a clone made before its config was kept free of credentials loses them now
            subprocess.run(["git", "-C", str(dest), "remote", "set-url", "origin", without_credentials(text)],
                           capture_output=True)
        if fetch and not fresh:
            try:
                network_git(["-C", str(dest), "fetch", "--prune", "--", text, *refspecs])  # the URL: origin has no credentials
            except GitFailed as e:
                log.warning("fetch of %s failed, using the clone as it is: %s", text, e)
        return dest
    path = Path(text).expanduser()
    if not path.is_absolute():
        if base_dir is not None and (base_dir / path).exists():
            return (base_dir / path).resolve()
        if not path.exists():
            where = f"next to the recipe ({base_dir / path}) or " if base_dir is not None else ""
            raise BadInput(f"repo {text!r}: no such directory {where}in the current directory; give the path "
                           f"of a local clone or a git URL (`bisectbot demo` writes one to "
                           f"bisectbot-demo-out/work/engine-history)")
    return path.resolve()


class GitRepo:
    """A local git repository read through GitPython. ``component`` names it in candidates.

    Thread-safe: every method holds ``lock`` (an RLock), which callers also take around
    their own ``repo.git`` calls (worktree add/remove from prefetch threads).
    """

    def __init__(self, path: str | Path, component: str = ""):
        self.path = Path(path).expanduser().resolve()
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise BadInput(f"{self.path}: not a git repository (source.repo)") from None
        from .. import gitenv, sandbox

        gitenv.neutralise_repo(self.path)  # its own config's commands never run (issue 36, input 2)
        gitenv.install()
        sandbox.protect(self.repo.common_dir, "ro")  # candidates plant no hook, config or ref (input 3)
        self.component = component or self.path.name
        self.lock = threading.RLock()
        self._resolved: dict[str, str] = {}
        self._shallow: bool | None = None  # a shallow clone (commits_with_prefix), asked once

    @_locked
    def resolve(self, ref: str) -> str:
        """Full SHA of ``ref`` (branch, tag, short SHA, ``HEAD~3``, any revision git itself takes,
        ``@{...}`` forms included); BadInput when git resolves it to no commit. Resolved by git's own
        ``rev-parse --verify`` (GitPython's parser raises IndexError or NotImplementedError on
        ``@{-1}`` and ``HEAD@{yesterday}``, issue 41 item 12); ``--end-of-options`` keeps a ref that
        starts with ``-`` a ref."""
        if len(ref) == 40 and ref in self._resolved:
            return self._resolved[ref]
        bad = BadInput(f"{self.path}: unknown commit {ref!r}; expected a branch, tag or SHA")
        if not ref or "\x00" in ref or "\n" in ref:
            raise bad
        if re.fullmatch(r"[0-9a-f]{40}", ref):  # a full SHA: the object database, no parser and no process
            try:
                sha = self.repo.commit(ref).hexsha
            except (git.BadName, ValueError, git.GitCommandError):
                raise bad from None
            self._resolved[ref] = sha
            return sha
        p = subprocess.run(["git", "-C", str(self.path), "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{ref}^{{commit}}"], capture_output=True, text=True)
        sha = p.stdout.strip()
        if p.returncode != 0 or len(sha) not in (40, 64):
            raise bad from None
        if len(ref) == 40:
            self._resolved[ref] = sha
        return sha

    def _log(self, *args: str) -> tuple[list[Candidate], list[str]]:
        """``git log`` as candidates in git's order, and each one's parent SHAs (space-separated).
        One subprocess."""
        # output to a temporary file, parsed a few MB at a time: through a pipe, 8 MB cost both sides
        # ~30 % more CPU in 64 KB hand-offs; read whole, a subject of 200 MB was held whole (item 15)
        out: list[Candidate] = []
        parents_of: list[str] = []
        repo, comp, kind = str(self.path), self.component, CandidateKind.COMMIT
        append = out.append
        # the cyclic GC would rescan the whole heap a few times while 50,000 acyclic objects are made
        # (~40 % of the parse in a long-running process); it is back on before this returns
        was_enabled = gc.isenabled()
        with tempfile.TemporaryFile() as raw, tempfile.TemporaryFile() as err:
            p = subprocess.run(["git", "-C", str(self.path), "log", "-z", "--no-color", f"--format={_LOG_FORMAT}", *args],
                               stdout=raw, stderr=err)
            if p.returncode != 0:
                err.seek(0)
                msg = err.read(64 * 1024).decode("utf-8", "replace").strip().splitlines()
                raise BadInput(f"{self.path}: git log {' '.join(args)} failed: {msg[-1] if msg else p.returncode}")
            raw.seek(0)
            gc.disable()
            try:
                for fields in log_records(raw, 5):
                    parents_of += fields[1::5]
                    it = iter(fields)
                    for sha, parents, date, author, subject in zip(it, it, it, it, it):
                        if len(subject) > MAX_SUBJECT_CHARS:  # a repository's text, bounded as model output is
                            subject = subject[:MAX_SUBJECT_CHARS] + "…"
                        if len(author) > MAX_SUBJECT_CHARS:
                            author = author[:MAX_SUBJECT_CHARS] + "…"
                        append(Candidate(kind, sha, f"{sha[:10]} {subject}".strip(), comp,
                                         {"parents": parents.count(" ") + 1 if parents else 0, "date": date,
                                          "repo": repo, "subject": subject, "author": author}))
            finally:
                if was_enabled:
                    gc.enable()
        return out, parents_of

    @_locked
    def candidate(self, ref: str) -> Candidate:
        """The commit ``ref`` as a :class:`Candidate` (label: short SHA + subject; meta: parents,
        committer date, repo, subject, author)."""
        return self._log("-1", self.resolve(ref), "--")[0][0]

    @_locked
    def commits(self, good: str, bad: str, first_parent: bool = True) -> list[Candidate]:
        """Candidates from ``good`` to ``bad`` inclusive, oldest first (one ``git log`` subprocess).

        With ``first_parent`` the list walks the first-parent chain of ``bad`` back to
        ``good``, which must lie on it. Raises BadInput otherwise, or when ``good`` is not
        an ancestor of ``bad``.
        """
        g, b = self.resolve(good), self.resolve(bad)
        if g == b:
            raise BadInput(f"{self.path}: good and bad are the same commit {g[:12]}")
        if not first_parent:
            if not self.repo.is_ancestor(g, b):
                raise self._not_ancestor(good, bad, g, b)
            cands, _ = self._log("--reverse", "--topo-order", f"{g}..{b}", "--")
            return [self.candidate(g), *cands]
        # ``b --not g^@``: the first-parent chain of b down to g, g included, in one subprocess
        # newest first (git's --reverse would buffer the whole walk); reversed here
        cands, parents = self._log("--first-parent", b, "--not", f"{g}^@", "--")
        if len(cands) >= 2 and cands[-1].ref == g and parents[-2].split()[:1] == [g]:
            cands.reverse()
            return cands
        if not self.repo.is_ancestor(g, b):
            raise self._not_ancestor(good, bad, g, b)
        raise BadInput(f"{self.path}: good {good} ({g[:12]}) is not on the first-parent chain of bad "
                       f"{bad}; use the merge commit that brought it in, or first_parent: false")

    def _not_ancestor(self, good: str, bad: str, g: str, b: str) -> BadInput:
        return BadInput(f"{self.path}: good {good} ({g[:12]}) is not an ancestor of bad {bad} ({b[:12]}); "
                        "swap them for a fix bisection, or choose an older good commit")

    @_locked
    def commits_with_prefix(self, prefix: str) -> list[str] | None:
        """Full SHAs of every commit in the object database (reachable or not) whose name starts with the hex
        ``prefix`` (at least 4 digits, git's shortest), by git's own ``rev-parse --disambiguate``; other
        objects (trees, blobs) are left out. ``[]`` for a prefix git refuses; None for a shallow clone, whose
        object database cannot say which commits beyond its depth share the prefix."""
        if not re.fullmatch(r"[0-9a-f]{4,64}", prefix):
            return []
        if self._shallow is None:  # asked once per repository: every wheel of every commit checks its label
            self._shallow = subprocess.run(["git", "-C", str(self.path), "rev-parse", "--is-shallow-repository"],
                                           capture_output=True, text=True).stdout.strip() != "false"
        if self._shallow:
            return None
        p = subprocess.run(["git", "-C", str(self.path), "rev-parse", f"--disambiguate={prefix}"],
                           capture_output=True, text=True)
        oids = [o for o in p.stdout.split() if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", o)]
        if not oids:
            return []
        kinds = subprocess.run(["git", "-C", str(self.path), "cat-file", "--batch-check=%(objectname) %(objecttype)"],
                               input="\n".join(oids) + "\n", capture_output=True, text=True).stdout.split("\n")
        return [line.split()[0] for line in kinds if line.endswith(" commit")]

    @_locked
    def parents(self, ref: str) -> int:
        return len(self.repo.commit(self.resolve(ref)).parents)

    @_locked
    def parent_shas(self, ref: str) -> list[str]:
        """Full SHAs of the commit's parents, first parent first."""
        return [p.hexsha for p in self.repo.commit(self.resolve(ref)).parents]

    @_locked
    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits (None when they share none)."""
        bases = self.repo.merge_base(self.resolve(a), self.resolve(b))
        return bases[0].hexsha if bases else None

    @_locked
    def changed_paths(self, old: str, new: str) -> list[str]:
        """Paths changed between two commits (renames give both names), sorted."""
        out = self.repo.git.diff("--name-only", "--no-renames", self.resolve(old), self.resolve(new))
        return sorted(p for p in out.splitlines() if p)

    @_locked
    def tree(self, ref: str) -> str:
        """SHA of the commit's tree: equal trees build the same thing."""
        return self.repo.commit(self.resolve(ref)).tree.hexsha

    @_locked
    def plausibility_inputs(self, culprit: str, predecessor: str) -> dict[str, Any]:
        """Keyword arguments of :func:`bisectbot.bisect.plausibility_flags` (except runtime paths)."""
        return {
            "parents": self.parents(culprit),
            "changed_paths": self.changed_paths(predecessor, culprit),
            "same_build": self.tree(culprit) == self.tree(predecessor),
        }
