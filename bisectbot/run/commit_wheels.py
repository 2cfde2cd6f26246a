"""Commits installed from prebuilt per-commit wheels, else built from source (issue 40).

A commit stage builds every candidate from source (``server.build_command`` in its worktree), the
slowest part of a candidate after the server start. vLLM publishes wheels for every main-branch
commit (``docs/real-vllm.md``: ``https://wheels.vllm.ai/{commit}/`` for CUDA and CPU,
``https://wheels.vllm.ai/rocm/{commit}/rocm721/`` for ROCm), as the CI artefacts cargo-bisect-rustc
installs. With ``source.wheels`` (:class:`bisectbot.recipe.CommitWheels`) the
:class:`CommitWheelRunner` reads the commit's PEP 503 project page ``<index>/<package>/`` (the
index URL with ``{commit}`` the full SHA) and:

* **a wheel of the package this Python can install whose version names the commit and no other commit of
  the repository** (``+g<sha>``, :func:`names_commit`):
  downloads it (verified against the index's sha256 where the page lists one -- a link
  without a hash is installed unverified --, cached by
  content, :func:`bisectbot.sources.releases.download`) into its own cached environment
  (:func:`bisectbot.run.envs.release_env`: uv, ``--no-build``; no code of the candidate runs at
  install) and runs the recipe's command or ``server.command`` in the sandbox with that
  environment's ``bin`` first on ``PATH`` and a fresh work directory as ``{source}``, as the release
  runner does; no worktree, no build;
* **none** (the commit's index answers 404, lists no wheel for this Python, or only wheels of other
  commits): the commit is built from source by the :class:`bisectbot.run.local.LocalRunner` as before.

Either way the probe says which (``extra["built_from"]`` and a progress line): a wheel and a source
build of one commit are different builds (the build key differs: ``wheel|<dist>:<sha256>`` against
the local runner's key ``|source``), so the ledger never answers one with the other. An index that
cannot be reached is an error (:class:`bisectbot.sources.releases.SourceError`), never a source
build in its place: the environment decides no build. ``recipe.patches`` cannot be carried by an
installed wheel and are refused by the recipe's validation.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..models import Candidate
from ..recipe import CommitWheels
from .base import CommandRun, Prepared, PrepareFailed, Server
from .local import LocalRunner

__all__ = ["CommitWheelRunner", "commit_label", "names_commit"]


def commit_label(filename: str, package: str) -> str:
    """The commit a wheel ``filename`` of distribution ``package`` names in its version's local label, as
    vLLM's per-commit wheels do (``0.11.1rc6.dev16+g933cdea44.cu129``: a ``g`` and 7 to 64 hex digits, git's
    abbreviation or a full SHA-1/SHA-256 name), lower-case; ``""`` for a file that is no wheel of ``package`` (another distribution listed
    on the page, an sdist, a malformed name) or names no commit."""
    import re

    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return ""
    if name != canonicalize_name(package):
        return ""
    labels = {m.group(1) for part in (version.local or "").split(".")
              if (m := re.fullmatch(r"g([0-9a-f]{7,64})", part))}
    if len(labels) != 1:  # none, or two commits named in one version: no build of either
        return ""
    return labels.pop()


def names_commit(filename: str, sha: str, package: str, commits_with_prefix: Any) -> bool:
    """True when the wheel ``filename`` of ``package`` names commit ``sha`` and no other: its label
    (:func:`commit_label`) is a prefix of ``sha`` and, shorter than a full name, ``commits_with_prefix(label)``
    (:meth:`bisectbot.sources.git.GitRepo.commits_with_prefix`: the commits this clone holds with that
    prefix; ``None`` for a shallow clone, which cannot know them: only a full name is then taken) is ``sha``
    alone. An abbreviation is unique when the wheel is built and can stop being so as the repository grows;
    a per-commit index page can serve another commit's wheel (a stale copy, a redirect, an alias).
    Either way, installed as this commit it would stand for a build it is not and name a wrong culprit."""
    label = commit_label(filename, package)
    if not label or not sha.lower().startswith(label):
        return False
    return len(label) == len(sha) or list(commits_with_prefix(label) or ()) == [sha.lower()]


class CommitWheelRunner:
    """:class:`bisectbot.run.base.CandidateRunner` over commits of ``component`` (see the module doc):
    the commit's prebuilt wheel from ``wheels.index`` where it has one, else ``local``'s source build.
    ``cache_dir``: downloads and environments (default ``$BISECTBOT_CACHE`` or ``~/.cache/bisectbot``).
    Every other attribute is ``local``'s (work and log directories, ``commits_of``, ``cleanup_stale``)."""

    supports_prefetch = False  # preparing a commit may download its wheel: only what the search visits

    def __init__(self, local: LocalRunner, wheels: CommitWheels, component: str, *, cache_dir: Path | None = None):
        self.local = local
        self.wheels = wheels
        self.component = component
        self.cache_dir = Path(cache_dir) if cache_dir else None
        #: full SHA -> (the wheel's release file or None, why none): one listing per commit and run
        self._found: dict[str, tuple[Any, str]] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    # ------------------------------------------------------------------ the index
    def _sha(self, c: Candidate) -> str:
        commits = self.local.commits_of(c)
        return commits.get(self.component) or next(iter(commits.values()))

    def index_of(self, sha: str) -> str:
        """The per-commit index URL of commit ``sha`` (``wheels.index`` with ``{commit}`` filled)."""
        return self.wheels.index.replace("{commit}", sha)

    def wheel_of(self, sha: str) -> tuple[Any, str]:
        """``(release file, "")`` of commit ``sha``'s installable wheel, or ``(None, why)``. Raises
        :class:`bisectbot.sources.releases.SourceError` when the index cannot be read (not a 404)."""
        from ..sources.releases import list_releases
        from .release import installable_wheel

        with self._lock:
            if sha in self._found:
                return self._found[sha]
        url = self.index_of(sha)
        try:
            files = [f for rel in list_releases(self.wheels.package, url) for f in rel.files]
        except BadInput:  # the project page answered 404: this commit has no wheels
            found: tuple[Any, str] = (None, f"{url} has no {self.wheels.package} wheels for this commit")
        else:
            repo = self.local.repos.get(self.component) or next(iter(self.local.repos.values()))
            own = [f for f in files if names_commit(f.filename, sha, self.wheels.package, repo.commits_with_prefix)]
            w = installable_wheel(own)
            if w is not None:
                found = (w, "")
            elif files and not own:
                found = (None, f"{url} lists {len(files)} file(s) of {self.wheels.package}, none naming commit "
                               f"{sha[:12]} and no other commit of the repository as a {self.wheels.package} wheel "
                               "(+g<sha> in its version): another commit's wheel is no build of this one")
            else:
                found = (None, f"{url} lists {len(files)} file(s) of {self.wheels.package}, none a wheel this Python "
                               "can install")
        with self._lock:
            self._found[sha] = found
        return found

    # ------------------------------------------------------------------ runner contract
    def build_key(self, c: Candidate) -> str:
        """``wheel|<dist>:<sha256>+py<X.Y>`` for a commit with a wheel (the index's sha256, else the
        file's URL), else the local runner's key with ``|source``."""
        sha = self._sha(c)
        w, _ = self.wheel_of(sha)
        if w is None:
            return self.local.build_key(c) + "|source"
        return (f"wheel|{self.wheels.package}:{w.sha256 or w.url}+py{sys.version_info.major}."
                f"{sys.version_info.minor}|deps:{self.wheels.dependencies_index or ''}")

    def prepare(self, candidate: Candidate) -> Prepared | PrepareFailed:
        """The commit's wheel in its cached environment and a fresh work directory; else the source build."""
        from .. import progress
        from ..sources import releases
        from .envs import EnvFailed, release_env, safe_name

        sha = self._sha(candidate)
        w, why = self.wheel_of(sha)
        if w is None:
            progress.note(f"no prebuilt wheel ({why}): building from source")
            p = self.local.prepare(candidate)
            if isinstance(p, Prepared):
                p.meta["built_from"] = f"source build ({why})"
            return p
        t0 = time.monotonic()
        with progress.phase("install", f"prebuilt wheel {w.filename}"):
            try:
                path = releases.download(w, self.cache_dir)
                cache = self.cache_dir or releases.cache_dir_default()
                env, made = release_env(path, (w.sha256 or path.parent.name).lower(), self.wheels.package,
                                        sha[:12], cache, index_url=self.wheels.dependencies_index,
                                        timeout_s=self.local.recipe.server.build_timeout_s)
            except (EnvFailed, BadInput) as e:
                return PrepareFailed(candidate, f"prebuilt wheel {w.filename} of {sha[:12]}: {e}")
        work = Path(tempfile.mkdtemp(prefix=f"wheel-{safe_name(sha[:12], 20)}-", dir=self.local.workdir))
        return Prepared(candidate, self.build_key(candidate), source=work,
                        meta={"root": str(work), "env": str(env), "commits": {self.component: sha},
                              # each wheel's environment is resolved at its install (its own torch, a ROCm
                              # wheel's bundled PyTorch, the dependencies index's newest aiter): no base is
                              # common to two commits' wheels, so nothing is shared across them
                              "cache_base": self.build_key(candidate),
                              "built_from": f"prebuilt wheel {w.filename} from {self.index_of(sha)}"
                                            + (" (installed now" if made else " (environment cached")
                                            + f", {time.monotonic() - t0:.1f} s)"})

    def _env(self, prepared: Prepared, env: dict[str, str] | None) -> dict[str, str] | None:
        """A wheel's candidate: its environment's ``bin`` first on ``PATH``; a source build: ``env``."""
        from .envs import activated

        return activated(Path(prepared.meta["env"]), env) if prepared.meta.get("env") else env

    def server(self, prepared: Prepared, env: dict[str, str] | None = None,
               args: list[str] | None = None) -> AbstractContextManager[Server]:
        """``server.command`` from the wheel's environment or the source build (:meth:`LocalRunner.server`)."""
        return self.local.server(prepared, env=self._env(prepared, env), args=args)

    def run_command(self, prepared: Prepared, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None) -> CommandRun:
        """``argv`` in the wheel's environment or the source build (:meth:`LocalRunner.run_command`)."""
        return self.local.run_command(prepared, argv, timeout_s, env=self._env(prepared, env))

    def release(self, prepared: Prepared) -> None:
        """A wheel's work directory is removed (its environment stays cached); a source build's worktrees
        as the local runner removes them."""
        if prepared.meta.get("env"):
            shutil.rmtree(prepared.meta["root"], ignore_errors=True)
            return
        self.local.release(prepared)
