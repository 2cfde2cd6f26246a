"""Local runner: candidates from git worktrees on this host, no Docker.

For each candidate the runner checks out the commit(s) with ``git worktree add --detach``
into a fresh temporary directory, applies the recipe's patch stack there (when
``recipe.patches`` is non-empty), runs ``recipe.server.build_command`` (non-zero exit =
the candidate is untestable: ``skip``), and then either starts ``recipe.server.command``
as a subprocess in its own process group or runs a reproducer command. The process group
is always killed and the worktree always removed.

A candidate is one commit of one component (``candidate.component``; the other
components stay at their *pins*), or a tuple of commits in ``candidate.meta["commits"]``
(``{component: sha}``), e.g. the mixed pairs of a two-component attribution.

Substitutions in argv: ``{port}``, ``{model}``, ``{tp}``, ``{source}`` (worktree of the
candidate's component) and ``{source:NAME}`` (worktree of component NAME). The runner
profile's env, the recipe's ``server.env`` and triage env are layered, in that order, over an
allow-listed host environment (:func:`bisectbot.secrets.candidate_env`: no tokens; the recipe's
``env_passthrough`` names more); ``BISECTBOT_SOURCE`` points at ``{source}``.

Every candidate process runs in the sandbox (:mod:`bisectbot.sandbox`), by default in its own
network namespace (``recipe.server.network: loopback``): the server listens on ``{port}`` of its
own ``lo`` and the bot reaches it on the host's ``127.0.0.1:{port}`` through a
:class:`bisectbot.sandbox.ServerBridge`; ``host`` keeps the host's network.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from .. import bounded, gitenv, progress, sandbox
from ..bounded import ProcessRun, run_process
from ..change import ChangeConflict, apply_change, change_of
from ..errors import MissingPin, PatchError, ServerError
from ..models import Candidate
from ..recipe import GitSource, Recipe
from ..secrets import candidate_env
from ..sources.git import GitRepo
from .base import CommandRun, Prepared, PrepareFailed, Server
from .host import is_host_errno

log = logging.getLogger(__name__)

_TAIL = 4000  # characters of output kept in CommandRun tails and skip reasons


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_profile_env(name: str, search: list[Path] | None = None) -> dict[str, str]:
    """``env`` of the runner profile ``name`` (``runners/<name>.yaml``, see
    :func:`bisectbot.runner_profile.load_profile`); ``{}`` when there is no such profile
    (the ``cpu`` profile needs nothing). ``search`` dirs are tried first."""
    from ..errors import BadInput
    from ..runner_profile import load_profile

    for base in search or []:
        p = base / "runners" / f"{name}.yaml"
        if p.is_file():
            return dict(load_profile(p).env)
    try:
        return dict(load_profile(name).env)
    except BadInput:
        return {}


def _tail(path: Path | None, n: int = _TAIL) -> str:
    if not path or not path.exists():
        return ""
    data = path.read_bytes()[-n:]
    return data.decode("utf-8", "replace")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _start_time(pid: int) -> str | None:
    """Start time of a process (clock ticks since boot, /proc/PID/stat field 22); None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _kill_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, wait ``grace_s`` seconds, then SIGKILL it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:  # children may outlive the leader
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable
        log.warning("process %d did not exit after SIGKILL", proc.pid)


@contextmanager
def _worktree_lock(repo: GitRepo) -> Iterator[None]:
    """The repository's thread lock plus a file lock in its git directory: ``git worktree
    add/remove/prune`` of several processes on one repository (parallel ``round probe``s,
    issue 16) would race on ``.git/worktrees``."""
    import fcntl

    with repo.lock:
        try:
            gitdir = Path(repo.repo.common_dir)
            fd = os.open(gitdir / "bisectbot-worktree.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except Exception:  # no lock file possible (read-only clone): the thread lock alone
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


class LocalRunner:
    """:class:`bisectbot.run.base.CandidateRunner` over local git repositories.

    ``repos`` maps component names to repository paths; by default the recipe's git
    source and ``bisect.components``. ``pins`` maps components to the commit used when a
    candidate does not name one (default: the repository's ``HEAD``). ``workdir`` holds
    the temporary worktrees; ``log_dir`` the build/server logs. ``stack_path`` is the
    patch stack file (default: :func:`bisectbot.patches.default_stack_path`).
    """

    #: a candidate's change under test (``meta["change"]``, issue 42) is applied before the build
    supports_change = True

    def __init__(self, recipe: Recipe, repos: dict[str, str | Path] | None = None, *,
                 pins: dict[str, str] | None = None, workdir: str | Path | None = None,
                 log_dir: str | Path | None = None, profile_env: dict[str, str] | None = None,
                 stack_path: str | Path | None = None):
        self.recipe = recipe
        if repos is None:
            repos = {}
            if isinstance(recipe.source, GitSource):
                repos[recipe.source.component or Path(recipe.source.repo).name] = recipe.source.repo
            for name, src in recipe.bisect.components.items():
                repos.setdefault(name, src.repo)
        self.repos = {name: GitRepo(path, name) for name, path in repos.items()}
        self.pins = dict(pins or {})
        # default: a private new directory, never a predictable name in a shared /tmp (issue 13)
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="bisectbot-worktrees-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir else self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.profile_env = dict(profile_env or {})
        self.stack_path = Path(stack_path) if stack_path else None
        self._stack: Any = None
        self._pins_cache: dict[tuple[str, str], list[Any]] = {}  # (component, sha) -> its pins
        if sandbox.enabled():
            sandbox.require()  # fail closed before any candidate runs (issue 36, input 3)

    # ------------------------------------------------------------------ identity
    def commits_of(self, candidate: Candidate) -> dict[str, str]:
        """``{component: sha}`` that make up the candidate (pins filled in). Raises
        :class:`bisectbot.errors.MissingPin` when a commit pins a ref its component's repository lacks."""
        commits = dict(candidate.meta.get("commits") or {})
        if not commits:
            comp = candidate.component if candidate.component in self.repos else next(iter(self.repos))
            commits[comp] = candidate.ref
        for name in self.repos:
            if name not in commits and name in self.pins:
                commits[name] = self.pins[name]
        unknown = [c for c in commits if c not in self.repos]
        if unknown:
            raise ValueError(f"candidate {candidate.label or candidate.ref} names unknown components {unknown}")
        resolved = {c: self.repos[c].resolve(s) for c, s in commits.items()}
        self._follow_pins(resolved)
        return resolved

    # ------------------------------------------------------------------ pins (issue 26)
    def pin_names(self, component: str) -> list[str]:
        """The names ``component`` is pinned under in other repositories (recipe ``pin_names``)."""
        src = self.recipe.bisect.components.get(component)
        return list(src.pin_names) if src else []

    def _follow_pins(self, commits: dict[str, str]) -> None:
        """Fill in components the candidate does not name from the pins of those it does, transitively
        (vLLM's ``ARG AITER_BRANCH`` picks aiter, aiter's gitlink picks composable_kernel): the pair the
        pinning commit intends, as its image build would take it. A component that no commit pins
        stays out (the caller's default, the repository's HEAD). ``commits`` is updated in place."""
        queue = list(commits.items())
        while queue:
            comp, sha = queue.pop(0)
            for other in self.repos:
                if other in commits:
                    continue
                ref = self._pinned(comp, sha, other)
                if ref is not None:
                    commits[other] = ref
                    queue.append((other, ref))

    def _pinned(self, comp: str, sha: str, other: str) -> str | None:
        """The commit of ``other`` that ``comp`` at ``sha`` pins, or None (no pin, or a ref the
        repository of ``other`` lacks: then a warning)."""
        from ..sources.pinned import resolve_pin

        found = [p for p in self._pins_of(comp, sha) if self._pins_component(p, other)]
        found.sort(key=lambda p: (p.kind != "submodule", p.path, p.line))
        if not found:
            return None
        pin = found[0]
        ref = resolve_pin(self.repos[other], pin.ref)
        if ref is None:  # issue 35: never run the candidate with another commit than it pins
            raise MissingPin(f"{comp} {sha[:12]} pins {other} {pin.ref!r} in {pin.path}, which the repository "
                             f"{self.repos[other].path} lacks (no such tag, branch or commit): fetch its tags "
                             f"(git -C {self.repos[other].path} fetch --tags) or point bisect.components.{other}.repo "
                             "at a clone that has it")
        return ref

    def _pins_of(self, comp: str, sha: str) -> list[Any]:
        """Every pin of ``comp`` at ``sha`` (:func:`bisectbot.sources.pinned.pins_at`), read once."""
        from ..sources.pinned import pins_at

        key = (comp, sha)
        if key not in self._pins_cache:
            with self.repos[comp].lock:
                self._pins_cache[key] = pins_at(self.repos[comp], sha)
        return self._pins_cache[key]

    def _pins_component(self, pin: Any, other: str) -> bool:
        """Whether ``pin`` pins the component ``other`` (by its key or its name as written, against
        ``other`` and its ``pin_names``)."""
        from .. import pins as P

        names = {other: self.pin_names(other)}
        return bool(P.match_component(pin.component, names) or P.match_component(pin.name, names))

    def _rewrite_pins(self, commits: dict[str, str], worktrees: dict[str, Path]) -> list[dict[str, Any]]:
        """Set every pin that a component's worktree holds of another component of the candidate to
        the candidate's commit of it (issue 38): a descent candidate (aiter a6, vLLM held at v5) is
        otherwise built with the aiter v5's ``ARG AITER_BRANCH`` names, whatever the aiter worktree
        holds -- vLLM's ROCm build reads the ARG. Text pins through :func:`bisectbot.pins.rewrite_pin`
        (Dockerfile ARGs, requirement lines), gitlinks in the worktree's index (``git submodule
        update`` reads it). Pins that already resolve to the candidate's commit stay as they are
        (every candidate that is not a descent's). Returns one ``{component, pin, path, line,
        before, after}`` per rewritten line (shown in the probe's evidence and the report); a pin
        not found where it was read is reported with ``after`` None, never guessed."""
        from .. import pins as P
        from ..sources.pinned import resolve_pin

        out: list[dict[str, Any]] = []
        for comp, sha in commits.items():
            for pin in self._pins_of(comp, sha):
                other = next((o for o in commits if o != comp and self._pins_component(pin, o)), None)
                if other is None:
                    continue
                want = commits[other]
                if resolve_pin(self.repos[other], pin.ref) == want:
                    continue
                wt = worktrees[comp]
                row: dict[str, Any] = {"component": other, "pin": pin.name, "path": pin.path, "line": pin.line,
                                       "before": pin.ref, "after": None}
                if pin.kind == "submodule":
                    subprocess.run(["git", "-C", str(wt), "update-index", "--cacheinfo",
                                    f"160000,{want},{pin.path}"], check=True, capture_output=True,
                                   stdin=subprocess.DEVNULL)
                    row.update(before=f"{pin.path} gitlink {pin.ref}", after=f"{pin.path} gitlink {want}")
                else:
                    f = wt / pin.path
                    inside = not f.is_symlink() and f.resolve().is_relative_to(wt.resolve()) and f.is_file()
                    # a commit's symlink (or a linked directory) would make the bot write outside the tree
                    done = (P.rewrite_pin(f.read_text(), pin, want, Path(self.repos[other].path).resolve().as_uri())
                            if inside else None)
                    if done is not None:
                        f.write_text(done[0])
                        row.update(line=done[1].line, before=done[1].before, after=done[1].after)
                out.append(row)
        return out

    def primary(self, candidate: Candidate) -> str:
        return candidate.component if candidate.component in self.repos else next(iter(self.commits_of(candidate)))

    def _stack_and_hash(self) -> tuple[Any, str]:
        if not self.recipe.patches:
            return None, ""
        from .. import patches as P  # lands with the patches area (issue 5)

        if self._stack is None:
            self._stack = P.load_stack(self.stack_path)
        return self._stack, P.stack_hash(self._stack, list(self.recipe.patches))

    def build_key(self, candidate: Candidate) -> str:
        """What will run, computed without a checkout: component trees + patch-stack hash + build
        command, then ``|env:<SHA-256, 16 hex>`` of the runner profile's ``env`` when it sets any
        (the recipe names its profile, whose variables can change a verdict)."""
        try:
            commits = self.commits_of(candidate)
        except MissingPin as e:  # a skip (prepare says why); fetching the ref later gives another key
            return f"local|missing-pin:{hashlib.sha256(str(e).encode()).hexdigest()[:16]}"
        trees = ",".join(f"{c}:{self.repos[c].tree(s)}" for c, s in sorted(commits.items()))
        _, sh = self._stack_and_hash()
        build = " ".join(self.recipe.server.build_command or [])
        env = ""
        if self.profile_env:
            blob = json.dumps(self.profile_env, sort_keys=True).encode()
            env = f"|env:{hashlib.sha256(blob).hexdigest()[:16]}"
        change = change_of(candidate)
        return f"local|{trees}|patches:{sh}|build:{build}{env}" + (change.key() if change else "")

    # ------------------------------------------------------------------ prepare / release
    def prepare(self, candidate: Candidate) -> Prepared | PrepareFailed:
        """Worktree(s) at the candidate's commit(s), patch stack applied, build command run.

        A patch conflict of a required patch or a failed build is a :class:`PrepareFailed`
        (verdict ``skip``) with the reason and the log path.
        """
        try:
            commits = self.commits_of(candidate)
        except MissingPin as e:  # inside the range a skip naming file, pin and repository (issue 35)
            return PrepareFailed(candidate, MissingPin.prefix + str(e))
        root = Path(tempfile.mkdtemp(prefix=f"cand-{candidate.ref[:10]}-", dir=self.workdir))
        worktrees: dict[str, Path] = {}
        prepared = Prepared(candidate=candidate, build_key=self.build_key(candidate),
                            meta={"root": str(root), "worktrees": worktrees, "commits": commits})
        try:
            for comp, sha in commits.items():
                wt = root / comp
                with _worktree_lock(self.repos[comp]):
                    gitenv.neutralise_repo(self.repos[comp].path)  # commands planted since (sandbox off)
                    self.repos[comp].repo.git.worktree("add", "--detach", "--force", str(wt), sha)
                worktrees[comp] = wt
            prepared.source = worktrees[self.primary(candidate)]
            prepared.meta["pins_rewritten"] = self._rewrite_pins(commits, worktrees)
            stack, _ = self._stack_and_hash()
            if stack is not None:
                from .. import patches as P

                try:
                    app = P.apply_stack(stack, list(self.recipe.patches), prepared.source, None)
                except PatchError as e:  # StackConflict: a required patch conflicts, nothing written
                    self.release(prepared)
                    app = getattr(e, "application", None)
                    states = list(app.to_dict().get("patches", [])) if app is not None else []
                    return PrepareFailed(candidate, f"patch conflict: {e}", patches=states)
                d = app.to_dict()
                prepared.patches = list(d.get("patches", [])) if isinstance(d, dict) else []
            change = change_of(candidate)
            if change is not None:  # a try job's patch or a subset of a culprit (issue 42): before the build
                where = worktrees.get(change.component) if change.component else prepared.source
                if where is None:
                    self.release(prepared)
                    return PrepareFailed(candidate, f"the change's component {change.component!r} is not one "
                                         f"of this candidate's repositories ({', '.join(worktrees)})")
                try:
                    prepared.meta["change"] = apply_change(change, where).to_dict()
                except ChangeConflict as e:
                    self.release(prepared)
                    return PrepareFailed(candidate, f"the change does not apply: {e}")
            if self.recipe.server.build_command:
                log_path = self.log_dir / f"build-{candidate.ref[:12]}-{root.name}.log"
                argv = self.substitute(self.recipe.server.build_command, prepared, port=0)
                benv0 = self.env(prepared)

                def build(launch: sandbox.Launch | None) -> ProcessRun:
                    wargv, benv = self.sandboxed(argv, prepared, benv0, launch=launch)
                    return run_process(wargv, timeout_s=self.recipe.server.build_timeout_s, cwd=prepared.source,
                                       env=benv, log_path=log_path, pass_fds=launch.pass_fds if launch else ())

                try:  # output streams (redacted, capped) to the log; the process group is killed on timeout
                    with progress.phase("build"):
                        r, launch = sandbox.launched(build, lambda r: r.stderr_tail,
                                                     what=f"building {candidate.label or candidate.ref[:12]}")
                    failed = sandbox.ended(launch, argv[0])
                    rc = failed[0] if failed is not None else r.returncode
                    if failed is not None:
                        log_path.write_text(failed[1] + "\n")
                except OSError as e:
                    log_path.write_text(f"cannot run build command: {e}\n")
                    rc = 127
                prepared.log_paths.append(str(log_path))
                if rc != 0:
                    why = (f"timed out after {self.recipe.server.build_timeout_s:.0f} s, server.build_timeout_s"
                           if rc is None else f"exit {rc}")
                    last = _last_line(_tail(log_path))
                    self.release(prepared)
                    return PrepareFailed(candidate, f"build failed ({why}){': ' + last if last else ''}",
                                         log_paths=[str(log_path)])
            return prepared
        except Exception:
            self.release(prepared)
            raise

    def release(self, prepared: Prepared) -> None:
        """Remove the candidate's worktrees and temporary directory (idempotent).

        The bot deletes the candidate's directory itself and then lets git forget the worktrees
        (``git worktree prune``); it never asks git to remove a worktree by its path. The candidate
        owned that tree: it may have put a symlink where its worktree was and a ``.git`` file that
        points back at its worktree's metadata into the link's target, and ``git worktree remove
        --force`` then deleted the target (the whole ``~/.cache``, hostile pass of issue 36).
        :func:`shutil.rmtree` neither follows a symlink inside the tree nor deletes through a
        symlink given as the path."""
        worktrees: dict[str, Path] = prepared.meta.get("worktrees") or {}
        root = prepared.meta.get("root")
        for wt in list(worktrees.values()):
            if wt.is_symlink():  # a link the candidate put there: the link goes, never its target
                wt.unlink(missing_ok=True)
        if root:
            rp = Path(root)
            if rp.is_symlink():
                rp.unlink(missing_ok=True)
            else:
                shutil.rmtree(rp, ignore_errors=True)
        for comp in list(worktrees):  # every worktree lies in root (prepare): gone with it
            with _worktree_lock(self.repos[comp]):
                try:
                    self.repos[comp].repo.git.worktree("prune")
                except Exception:  # pragma: no cover
                    pass
            worktrees.pop(comp, None)

    def _track(self, proc: subprocess.Popen) -> Path:
        """Note a started process group in ``workdir/pids`` (removed when it is killed)."""
        d = self.workdir / "pids"
        d.mkdir(exist_ok=True)
        f = d / str(proc.pid)
        f.write_text(_start_time(proc.pid) or "")
        return f

    def cleanup_stale(self) -> None:
        """Kill process groups and remove worktrees a killed run (``kill -9``) left behind in ``workdir``."""
        for f in (self.workdir / "pids").glob("*") if (self.workdir / "pids").is_dir() else []:
            try:
                pid = int(f.name)
            except ValueError:
                continue
            started = f.read_text().strip()
            if started and _start_time(pid) == started:  # the same process, not a reused pid
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            f.unlink(missing_ok=True)
        for p in self.workdir.glob("cand-*"):
            shutil.rmtree(p, ignore_errors=True)
        for comp, repo in self.repos.items():
            with _worktree_lock(self.repos[comp]):
                repo.repo.git.worktree("prune")

    # ------------------------------------------------------------------ run
    def substitute(self, argv: list[str], prepared: Prepared, port: int) -> list[str]:
        """Fill ``{port}``, ``{model}``, ``{tp}``, ``{source}``, ``{source:NAME}`` into argv."""
        subs = {"{port}": str(port), "{model}": self.recipe.model, "{tp}": str(self.recipe.tp),
                "{source}": str(prepared.source or "")}
        for comp, wt in (prepared.meta.get("worktrees") or {}).items():
            subs[f"{{source:{comp}}}"] = str(wt)
        out = []
        for a in argv:
            for k, v in subs.items():
                a = a.replace(k, v)
            out.append(a)
        return out

    def cache_base(self) -> str:
        """What every candidate of this runner shares beside its component trees (the build key without
        them): the base of the caches keyed by components (:func:`bisectbot.run.caches.cache_key`)."""
        _, sh = self._stack_and_hash()
        env = json.dumps(self.profile_env, sort_keys=True)
        return f"local|patches:{sh}|build:{' '.join(self.recipe.server.build_command or [])}|env:{env}"

    def keyed_caches(self, prepared: Prepared) -> dict[str, Path]:
        """``{variable: host directory}`` of ``prepared``'s compile/JIT caches (:mod:`bisectbot.run.caches`),
        made once per prepared candidate; empty with ``server.keyed_caches: false``."""
        if not self.recipe.server.keyed_caches:
            return {}
        if "keyed_caches" not in prepared.meta:
            from .caches import keyed_dirs

            change = change_of(prepared.candidate)  # a change under test builds the component it edits anew
            prepared.meta["keyed_caches"] = keyed_dirs(
                prepared.build_key, str(prepared.meta.get("cache_base") or self.cache_base())
                + (change.key() if change is not None else ""),
                dict(prepared.meta.get("commits") or {}))
        return dict(prepared.meta["keyed_caches"])

    def env(self, prepared: Prepared, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Allow-listed environment of a candidate process (:func:`bisectbot.secrets.candidate_env`):
        never the bot's tokens, only what the profile, recipe and triage toggle set, and the variables
        that point its compilers at its keyed caches (:meth:`keyed_caches`; a variable the profile or the
        recipe sets wins)."""
        own = {"BISECTBOT_SOURCE": str(prepared.source or "")}
        for comp, wt in (prepared.meta.get("worktrees") or {}).items():
            own[f"BISECTBOT_SOURCE_{comp.upper().replace('-', '_')}"] = str(wt)
        keyed = {k: str(v) for k, v in self.keyed_caches(prepared).items()}  # the profile and recipe may override
        return candidate_env(keyed, self.profile_env, self.recipe.server.env, extra, own,
                             passthrough=self.recipe.env_passthrough)

    def sandboxed(self, argv: list[str], prepared: Prepared, env: dict[str, str],
                  bridge: sandbox.ServerBridge | None = None,
                  launch: sandbox.Launch | None = None) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` of a candidate process inside its sandbox (:func:`bisectbot.sandbox.wrap`):
        the candidate's directory (all its components' worktrees) writable, the work and log
        directories and the repositories' git directories read-only, the network of
        ``recipe.server.network`` (``loopback``: its own namespace; a server then reached through
        ``bridge``; ``launch``: the pipe that says the sandbox was set up, :func:`bisectbot.sandbox.launched`).
        Unchanged with ``BISECTBOT_SANDBOX=off``. Raises :class:`bisectbot.sandbox.SandboxUnavailable` and, when
        ``argv[0]`` cannot be run, ``OSError`` (as ``Popen``)."""
        tree = prepared.meta.get("root") or prepared.source or self.workdir
        root = prepared.meta.get("root")
        keyed = self.keyed_caches(prepared)
        from .caches import keyed_root

        return sandbox.wrap(argv, tree=tree, env=env, cwd=prepared.source,
                            readonly=[self.workdir, self.log_dir], writable=list(keyed.values()),
                            hidden=[keyed_root()] if keyed else [],
                            network=self.recipe.server.network,
                            bridge=bridge, home=Path(root) / ".home" if root else None, launch=launch)

    @contextmanager
    def server(self, prepared: Prepared, env: dict[str, str] | None = None,
               args: list[str] | None = None) -> Iterator[Server]:
        """Start ``recipe.server.command`` from the worktree; yield when ``GET /health`` is 200.

        Raises :class:`ServerError` at once when the process exits before it is healthy,
        or after ``server.health_timeout_s`` seconds. The process group is always killed.
        """
        if not self.recipe.server.command:
            raise ServerError("recipe.server.command is empty: nothing to start")
        # in its own network namespace the server is reached through a bridge (issue 36): the bot's
        # 127.0.0.1:port -> a Unix socket bound into the sandbox -> 127.0.0.1:port of the sandbox's lo
        bridge = (sandbox.ServerBridge() if sandbox.enabled() and self.recipe.server.network == "loopback"
                  else None)
        port = bridge.port if bridge else free_port()
        argv = self.substitute(list(self.recipe.server.command), prepared, port) + list(args or [])
        log_path = self.log_dir / f"server-{prepared.candidate.ref[:12]}-{port}.log"
        prepared.log_paths.append(str(log_path))
        senv = self.env(prepared, env)
        timeout_s = self.recipe.server.health_timeout_s

        def start(launch: sandbox.Launch | None) -> tuple[subprocess.Popen, Any]:
            wargv, wenv = self.sandboxed(argv, prepared, senv, bridge, launch=launch)
            proc, finish = bounded.spawn_logged(wargv, log_path=log_path, cwd=prepared.source, env=wenv,
                                                pass_fds=launch.pass_fds if launch else ())
            if launch is not None:
                launch.spawned()
                up = launch.wait_setup(lambda: proc.poll() is None, timeout_s)
                if up is not True:  # no sandbox after the whole start time (None) or bwrap gave up (False)
                    _kill_group(proc)
                    finish()
                    if up is None:
                        raise ServerError(f"the server's sandbox was not set up after {timeout_s:.0f} s "
                                          f"(log: {log_path})")
            return proc, finish

        try:  # output streams to the log, redacted line by line and capped (bisectbot.bounded)
            (proc, finish_log), launch = sandbox.launched(
                start, lambda _r: _last_line(_tail(log_path)),
                what=f"starting the server of {prepared.candidate.ref[:12]}")
        except OSError as e:
            if bridge:
                bridge.close()
            raise ServerError(f"cannot start server {argv[0]!r}: {e}") from None
        except BaseException:
            if bridge:
                bridge.close()
            raise
        pidfile = self._track(proc)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + self.recipe.server.health_timeout_s
            http = bounded.session()
            beat = progress.heartbeat("server start: waiting for /health")
            while True:
                beat.beat()
                rc = proc.poll()
                if rc is not None:
                    failed = launch.exec_failure(argv[0]) if launch is not None else None
                    last = failed[1] if failed is not None else _last_line(_tail(log_path))
                    raise ServerError(f"server exited with code {rc} before it was healthy"
                                      f"{': ' + last if last else ''} (log: {log_path})")
                try:
                    if bounded.request(http, "GET", base + "/health", total_s=2,
                                       max_bytes=64 * 1024).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(f"server not healthy after {self.recipe.server.health_timeout_s:.0f} s "
                                      f"(log: {log_path})")
                time.sleep(0.1)
            yield Server(base_url=base, log_path=log_path, meta={"pid": proc.pid, "argv": argv})
        finally:
            _kill_group(proc)
            if bridge:
                bridge.close()
            if launch is not None:
                launch.close()
            finish_log()
            pidfile.unlink(missing_ok=True)

    def run_command(self, prepared: Prepared, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None) -> CommandRun:
        """Run ``argv`` in the worktree in its own process group; kill the group on timeout.

        A command that cannot be started comes back as exit 126 (found but not executable) or
        127 (not found), as from a shell, with the reason in ``stderr_tail``.
        Output streams to ``log_dir/command-<ref>-<n>.log``; only the last ``_TAIL`` bytes of each
        stream stay in memory (:func:`bisectbot.bounded.run_process`)."""
        argv = self.substitute(list(argv), prepared, port=0)
        pidfiles: list[Path] = []
        log_path = self.log_dir / f"command-{prepared.candidate.ref[:12]}-{time.time_ns()}.log"
        cenv = self.env(prepared, env)

        def once(launch: sandbox.Launch | None) -> ProcessRun:
            wargv, wenv = self.sandboxed(argv, prepared, cenv, launch=launch)
            return run_process(wargv, timeout_s=timeout_s, cwd=prepared.source, env=wenv,
                               log_path=log_path, tail_bytes=_TAIL, grace_s=2,
                               on_start=lambda proc: pidfiles.append(self._track(proc)),
                               pass_fds=launch.pass_fds if launch else ())

        try:
            r, launch = sandbox.launched(once, lambda r: r.stderr_tail,
                                         what=f"running the command of {prepared.candidate.ref[:12]}")
        except OSError as e:  # as a shell reports it: 126 found but not executable, 127 not found
            if is_host_errno(e):  # the disk filled under the bot's log or launcher: the host, not a skip
                raise
            rc = 126 if isinstance(e, PermissionError) else 127
            return CommandRun(returncode=rc, duration_s=0.0, stderr_tail=f"cannot run {argv[0]!r}: {e}")
        finally:
            for f in pidfiles:
                f.unlink(missing_ok=True)
        failed = sandbox.ended(launch, argv[0])
        if failed is not None:  # the launcher could not exec it: the command never ran (126/127, as a shell)
            return CommandRun(returncode=failed[0], duration_s=r.duration_s, stderr_tail=failed[1])
        return CommandRun(returncode=r.returncode, duration_s=r.duration_s, stdout_tail=r.stdout_tail,
                          stderr_tail=r.stderr_tail, timed_out=r.timed_out)
