"""Run candidates as Docker containers (implements :class:`bisectbot.run.base.CandidateRunner`).

:func:`server_container` is the core: it holds a GPU-slot lock (:mod:`bisectbot.slots`),
starts the server container with the runner profile's devices, groups, IPC, shm,
security options, capabilities, GPU slot environment, recipe env and mounts, publishes
the server port on 127.0.0.1 only (a free host port), streams the container's logs to a
file, waits for ``GET /health`` == 200 (failing fast, with the last 50 log lines, when the
container exits), and **always** stops and removes the container: on success, failure,
timeout, ``KeyboardInterrupt`` and ``SIGTERM`` (turned into ``KeyboardInterrupt`` while
the server runs in the main thread). Docker's init (tini) runs as PID 1 unless the profile
says ``init: false``, so the server itself receives the stop signal (stop waits 10 s, then kills).

Containers carry the label ``bisectbot=server`` (plus ``bisectbot.pid``) so a leftover
from a killed process can be found with ``docker ps -a --filter label=bisectbot``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from .. import bounded, progress
from ..build import BuildRequest, FullSourceBuildRequired, Overlay, _default_patch_fn, build_image, stack_file
from ..change import ChangeConflict, change_of
from ..components import container_labels
from ..confine import check_mount
from ..errors import BisectbotError, HostFailure, ServerError
from ..models import Candidate, CandidateKind
from ..runner_profile import RunnerProfile, container_path, docker_run_kwargs, merge_mounts
from ..secrets import host_env, passthrough_env
from ..slots import gpu_slot
from ..sources.git import local_repo
from .base import CommandRun, Prepared, PrepareFailed, Server

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 50


def _client(client: Any = None) -> Any:
    if client is not None:
        return client
    import docker

    try:
        return docker.from_env()
    except docker.errors.DockerException as e:
        raise HostFailure(f"cannot reach the Docker daemon: {e}") from None


class _LogPump(threading.Thread):
    """Copies a container's log stream to a file and keeps the last lines in memory."""

    def __init__(self, container: Any, path: Path | None):
        super().__init__(daemon=True, name=f"logs-{container.short_id}")
        self.container = container
        self.path = path
        self.tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        self._partial = ""

    def run(self) -> None:
        fh = open(self.path, "ab") if self.path else None
        try:
            for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                if fh:
                    fh.write(bounded.redact_bytes(chunk))  # docker streams one line per chunk
                    fh.flush()
                text = self._partial + chunk.decode("utf-8", "replace")
                lines = text.split("\n")
                self._partial = lines.pop()
                self.tail.extend(lines)
        except Exception as e:  # container removed under us: the stream ends
            log.debug("log stream ended: %s", e)
        finally:
            if self._partial:
                self.tail.append(self._partial)
            if fh:
                fh.close()

    def last_lines(self) -> list[str]:
        return list(self.tail) + ([self._partial] if self._partial else [])


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _remove_named(client: Any, name: str) -> None:
    """Remove container ``name`` if it exists: ``containers.run`` creates before it starts, and a
    start Docker refuses (an rlimit, a device, a group) leaves the created container behind."""
    import docker

    with contextlib.suppress(docker.errors.APIError, requests.RequestException):
        _remove(client.containers.get(name), stop_timeout_s=1)


def _remove(container: Any, stop_timeout_s: int = 10) -> None:
    """Stop (SIGTERM, then SIGKILL after ``stop_timeout_s``) and remove; never raises."""
    import docker

    with contextlib.suppress(docker.errors.APIError, requests.RequestException):
        container.stop(timeout=stop_timeout_s)
    for _ in range(3):
        try:
            container.remove(force=True)
            return
        except docker.errors.NotFound:
            return
        except (docker.errors.APIError, requests.RequestException) as e:
            log.warning("removing container %s: %s", container.short_id, e)
            time.sleep(1)


def container_env(profile: RunnerProfile, slot: str | None, *envs: dict[str, str] | None) -> dict[str, str]:
    """Environment of a server container: profile env, slot GPUs, ``pass_env`` from the host,
    then each of ``envs`` in order (later wins). Values are never logged."""
    env = dict(profile.env)
    env.update(profile.slot_env(slot))
    env.update({k: v for k, v in host_env(profile.pass_env).items() if v})  # secrets taken at start-up too
    for e in envs:
        env.update(e or {})
    return env


@contextlib.contextmanager
def server_container(
    image: str,
    command: list[str] | None,
    profile: RunnerProfile,
    *,
    port: int = 8000,
    env: dict[str, str] | None = None,
    mounts: list[str] | None = None,
    log_path: Path | None = None,
    health_path: str = "/health",
    health_timeout_s: float = 2400.0,
    poll_s: float = 0.5,
    slot_timeout_s: float | None = None,
    lock_dir: Path | None = None,
    client: Any = None,
    entrypoint: list[str] | None = None,
) -> Iterator[Server]:
    """Start ``image`` (``command`` argv; ``port`` inside the container), yield a healthy
    :class:`Server` whose ``base_url`` is ``http://127.0.0.1:<host port>``; always remove it.

    ``mounts`` are extra ``HOST:CONTAINER[:ro]`` binds (the recipe's). ``health_timeout_s``
    and ``poll_s`` in seconds. Raises :class:`ServerError` when the container exits before
    it is healthy (message ends with the last 50 log lines; ``.log_tail`` holds them) or
    stays unhealthy past the timeout; :class:`bisectbot.slots.LockTimeout` when no GPU slot
    frees up within ``slot_timeout_s``.
    """
    import docker

    client = _client(client)
    with gpu_slot(profile.gpu_slots, runner=profile.name, lock_dir=lock_dir, timeout_s=slot_timeout_s) as slot:
        kw = docker_run_kwargs(profile, slot)
        for m in mounts or []:
            try:
                check_mount(m)  # again on this host: symlinks resolve here (issue 13)
            except ValueError as e:
                raise BisectbotError(str(e)) from None
        plan = merge_mounts(profile, mounts)  # by container path, the recipe wins (issue 24, input 1)
        for line in plan.replaced:
            log.info("mounts: %s", line)
        kw.pop("volumes", None)
        if plan.binds:
            kw["volumes"] = [b.spec() for b in plan.binds]
        name = f"bisectbot-{uuid.uuid4().hex[:12]}"
        if log_path:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        container = None
        pump: _LogPump | None = None
        with _sigterm_as_interrupt():
            try:
                run_kw: dict[str, Any] = {}
                if entrypoint is not None:
                    run_kw["entrypoint"] = entrypoint
                try:
                    container = client.containers.run(
                        image, command=command or None, detach=True, name=name,
                        ports={f"{port}/tcp": ("127.0.0.1", None)},
                        environment=container_env(profile, slot, env),
                        labels=container_labels("server"),
                        **run_kw, **kw,
                    )
                except docker.errors.ImageNotFound:
                    raise ServerError(f"image {image} not found") from None
                except docker.errors.APIError as e:
                    _remove_named(client, name)  # created but not started (a device, group or rlimit refused)
                    raise ServerError(f"cannot start {image}: {e.explanation or e}") from None
                pump = _LogPump(container, Path(log_path) if log_path else None)
                pump.start()
                container.reload()
                bindings = (container.attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{port}/tcp")
                if not bindings:
                    _fail_exited(container, pump, image, "before its port was published")
                host_port = int(bindings[0]["HostPort"])
                base_url = f"http://127.0.0.1:{host_port}"
                with progress.phase("server start", image[:120]):
                    _wait_healthy(container, pump, image, base_url + health_path, health_timeout_s, poll_s)
                log.info("server %s healthy at %s (slot %s)", name, base_url, slot)
                yield Server(base_url=base_url, log_path=Path(log_path) if log_path else None,
                             meta={"container": name, "container_id": container.id, "slot": slot, "image": image})
            finally:
                if container is not None:
                    _remove(container)
                if pump is not None:
                    pump.join(timeout=10)


def _fail_exited(container: Any, pump: _LogPump, image: str, when: str) -> None:
    container.reload()
    code = container.attrs.get("State", {}).get("ExitCode")
    pump.join(timeout=5)
    tail = pump.last_lines()[-LOG_TAIL_LINES:]
    err = ServerError(f"server container of {image} exited with code {code} {when}; last "
                      f"{len(tail)} log lines:\n" + "\n".join(tail))
    err.log_tail = tail  # type: ignore[attr-defined]
    raise err


def _wait_healthy(container: Any, pump: _LogPump, image: str, url: str, timeout_s: float, poll_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    http = bounded.session()
    beat = progress.heartbeat(f"waiting for {health_path_of(url)}")
    while True:
        beat.beat((pump.last_lines() or [""])[-1][:120])  # the last log line says how far the load is
        container.reload()
        if container.status in ("exited", "dead"):
            _fail_exited(container, pump, image, "before /health answered")
        try:
            r = bounded.request(http, "GET", url, total_s=min(5.0, max(poll_s, 1.0)), max_bytes=64 * 1024)
            if r.status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() >= deadline:
            tail = pump.last_lines()[-LOG_TAIL_LINES:]
            err = ServerError(f"server of {image} not healthy after {timeout_s:.0f} s ({url}); last "
                              f"{len(tail)} log lines:\n" + "\n".join(tail))
            err.log_tail = tail  # type: ignore[attr-defined]
            raise err
        time.sleep(poll_s)


def health_path_of(url: str) -> str:
    """The path part of a health URL (``/health``)."""
    from urllib.parse import urlsplit

    return urlsplit(url).path or "/"


def run_in_container(image: str, argv: list[str], profile: RunnerProfile, timeout_s: float,
                     env: dict[str, str] | None = None, client: Any = None,
                     lock_dir: Path | None = None, entrypoint: list[str] | None = None,
                     mounts: list[str] | None = None) -> CommandRun:
    """Run ``argv`` in a fresh container of ``image`` (``timeout_s`` seconds), always removed.
    ``mounts``: extra ``HOST:CONTAINER[:ro|rw]`` binds beside the profile's (merged by container path).

    Returns :class:`CommandRun` (``returncode`` None when killed by the timeout)."""
    import docker

    client = _client(client)
    start = time.monotonic()
    with gpu_slot(profile.gpu_slots, runner=profile.name, lock_dir=lock_dir) as slot:
        container = None
        with _sigterm_as_interrupt():
            try:
                run_kw: dict[str, Any] = {} if entrypoint is None else {"entrypoint": entrypoint}
                name = f"bisectbot-{uuid.uuid4().hex[:12]}"
                kw = docker_run_kwargs(profile, slot)
                if mounts:
                    plan = merge_mounts(profile, mounts)
                    kw["volumes"] = [b.spec() for b in plan.binds]
                try:
                    container = client.containers.run(
                        image, command=argv, detach=True, name=name, environment=container_env(profile, slot, env),
                        labels=container_labels("command"),
                        **run_kw, **kw,
                    )
                except docker.errors.APIError:
                    _remove_named(client, name)  # created but not started
                    raise
                timed_out = False
                try:
                    rc: int | None = int(container.wait(timeout=timeout_s).get("StatusCode", -1))
                except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                    timed_out, rc = True, None
                out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
                err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
                return CommandRun(rc, time.monotonic() - start, out[-4000:], err[-4000:], timed_out)
            except docker.errors.APIError as e:
                raise BisectbotError(f"cannot run {argv[:1]} in {image}: {e.explanation or e}") from None
            finally:
                if container is not None:
                    _remove(container, stop_timeout_s=2)


def stack_hash(stack_dir: Path | None, ids: list[str]) -> str:
    """Hash of the patch stack content for ``ids`` (``bisectbot.patches`` when available,
    else SHA-256 over ``stack.yaml`` and the files of each patch directory); ``""`` for none."""
    if not ids:
        return ""
    try:
        from .. import patches as patches_mod  # type: ignore[attr-defined]
    except ImportError:
        patches_mod = None
    if patches_mod is not None:
        return str(patches_mod.stack_hash(patches_mod.load_stack(stack_file(stack_dir)), list(ids)))[:16]
    import hashlib

    h = hashlib.sha256("\n".join(ids).encode())
    if stack_dir:
        for p in sorted(Path(stack_dir).rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(stack_dir)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


class ContainerRunner:
    """:class:`bisectbot.run.base.CandidateRunner` over Docker images.

    Candidates: a ``nightly`` candidate's ``ref`` is an image digest and ``meta['image']``
    (or the recipe's registry source) names its repository; a ``commit`` candidate's
    ``component`` (``vllm``/``aiter``) is overlaid at ``ref`` on ``meta['base']`` (an image
    reference) from the clone in ``recipe.bisect.components[component].repo``.
    ``log_dir`` receives ``build-*.log`` and ``server-*.log``; ``stack_dir`` is the patch stack.
    """

    #: a candidate's change under test (``meta["change"]``, issue 42) is applied before the build
    supports_change = True

    def __init__(self, recipe: Any, profile: RunnerProfile, log_dir: Path, stack_dir: Path | None = None,
                 client: Any = None, ledger: Any = None, lock_dir: Path | None = None,
                 keep_images: bool = True, base_dir: Path | None = None):
        self.recipe = recipe
        self.base_dir = base_dir  # resolves relative component repos (the recipe's directory)
        self._repos: dict[str, Path] = {}
        self.profile = profile
        self.log_dir = Path(log_dir)
        self.stack_dir = stack_dir
        self.client = client
        self.ledger = ledger
        self.lock_dir = lock_dir
        self.keep_images = keep_images
        self._stack_hash: str | None = None
        self._key_tail: str | None = None  # build_key's patch-stack and profile part

    def _base_ref(self, c: Candidate) -> str:
        if c.meta.get("base"):
            return str(c.meta["base"])
        if c.meta.get("image"):
            img = str(c.meta["image"])
            return img if "@" in img or not c.ref.startswith("sha256:") else f"{img.rsplit(':', 1)[0]}@{c.ref}"
        src = self.recipe.source
        if getattr(src, "kind", "") == "registry":
            from ..sources.registry import image_ref

            return image_ref(src.registry, src.repository, c.ref)
        raise BisectbotError(f"candidate {c.label or c.ref} names no image (meta 'image' or 'base')")

    def build_key(self, c: Candidate) -> str:
        """What will run, computed without Docker (part of the probe cache key).

        A commit candidate is an overlay: ``image|<base image reference>|<component>@<commit>|
        from:<base commit>``, so one commit overlaid onto two nightlies (the last-good one for
        attribution, the first-bad one when the others are pinned at the bad end) is two
        probes, never one cached verdict. A nightly's ``ref`` is its digest already: ``image``.
        With a patch stack, ``|patches:<content hash>`` follows (:func:`stack_hash` of the
        recipe's patch ids): the recipe's verdict hash names the patch ids only, so an edited
        diff must not reuse the verdicts of the old one (the local runner's key has the same part).
        Last comes ``|profile:<hash>`` (:meth:`RunnerProfile.verdict_hash`): the recipe names its
        runner profile, whose ``env``, devices and docker options can change a verdict.
        """
        tail = self._tail(c)
        if c.kind != CandidateKind.COMMIT or not c.meta.get("base"):
            return f"image{tail}"
        return f"image|{c.meta['base']}|{c.component}@{c.ref}|from:{c.meta.get('base_commit') or ''}{tail}"

    def _tail(self, c: Candidate) -> str:
        """What :meth:`build_key` adds to every candidate's image and overlay: the patch stack, the runner
        profile and the candidate's change under test (issue 42)."""
        if self._key_tail is None:
            sh = self._patch_hash()
            self._key_tail = (f"|patches:{sh}" if sh else "") + f"|profile:{self.profile.verdict_hash()}"
        change = change_of(c)
        return self._key_tail + (change.key() if change is not None else "")

    def _patch_hash(self) -> str:
        """:func:`stack_hash` of the recipe's patches, computed once per runner (``""`` for none)."""
        if self._stack_hash is None:
            self._stack_hash = stack_hash(self.stack_dir, list(self.recipe.patches))
        return self._stack_hash

    def prepare(self, candidate: Candidate) -> Prepared | PrepareFailed:
        try:
            base = self._base_ref(candidate)
            overlay = None
            if candidate.kind == CandidateKind.COMMIT:
                comp = candidate.component
                src = self.recipe.bisect.components.get(comp)
                if src is None:
                    raise BisectbotError(f"recipe has no bisect.components.{comp} git source for the overlay")
                if comp not in self._repos:  # a URL is cloned (or fetched) once per run
                    self._repos[comp] = local_repo(src.repo, self.base_dir)
                overlay = Overlay(comp, self._repos[comp], candidate.ref,
                                  base_commit=candidate.meta.get("base_commit"))
            ids = list(self.recipe.patches)
            sh = self._patch_hash()
            change = change_of(candidate)
            if overlay is None and not ids and change is None:
                from ..components import image_digest

                with progress.phase("pull", base[:120]):
                    digest = image_digest(base, self.client)
                return Prepared(candidate, build_key=digest, image=base, meta={"base_digest": digest})
            req = BuildRequest(
                base=base, recipe=self.recipe.name, recipe_hash=self.recipe.verdict_hash(), overlay=overlay,
                patch_ids=ids, stack_hash=sh, patch_fn=_default_patch_fn(self.stack_dir, ids) if ids else None,
                build_command=self.recipe.server.build_command, log_dir=self.log_dir, change=change,
            )
            with progress.phase("pull + build", base[:120]):
                res = build_image(req, client=self.client, ledger=self.ledger)
        except FullSourceBuildRequired as e:
            return PrepareFailed(candidate, str(e))
        except ChangeConflict as e:  # a change under test that does not apply (issue 42)
            return PrepareFailed(candidate, f"the change does not apply: {e}")
        except BisectbotError as e:
            return PrepareFailed(candidate, str(e), log_paths=[str(p) for p in self.log_dir.glob("build-*.log")][-1:])
        return Prepared(candidate, build_key=f"{res.base_digest}+{res.key}", image=res.tag,
                        patches=res.patches, log_paths=[res.log_path] if res.log_path else [],
                        meta={"labels": res.labels, "reused": res.reused, "base_digest": res.base_digest})

    def _command(self, prepared: Prepared, args: list[str] | None) -> list[str]:
        s = self.recipe.server
        subst = {"port": str(s.port), "model": self.recipe.model, "tp": str(self.recipe.tp),
                 "source": str(prepared.source or "")}
        return [a.format(**subst) for a in s.command] + list(args or [])

    def keyed_caches(self, prepared: Prepared) -> tuple[dict[str, str], list[str]]:
        """``(environment, mounts)`` that give ``prepared``'s container its compile/JIT caches
        (:mod:`bisectbot.run.caches`): each key's host directory bound at ``/var/cache/bisectbot/<name>``
        and its variable pointing there. The base of the component-keyed caches is the nightly's digest
        with everything else the build key adds to it (:meth:`_tail`: the patch stack -- ``aiter-chunkq-clamp``
        patches the image's aiter, whose JIT modules it changes --, the runner profile, a change under test);
        an overlay's component commit is the candidate's own. Empty with ``server.keyed_caches: false``;
        a cache is left out where a recipe mount takes its container path or the profile or recipe sets
        its variable (theirs wins)."""
        if not self.recipe.server.keyed_caches:
            return {}, []
        from .caches import CONTAINER_ROOT, KEYED_CACHES, keyed_dirs

        c = prepared.candidate
        commits = {c.component: c.ref} if c.kind == CandidateKind.COMMIT and c.meta.get("base") else {}
        digest = prepared.meta.get("base_digest")
        dirs = keyed_dirs(prepared.build_key, f"{digest}{self._tail(c)}" if digest else prepared.build_key, commits)
        taken = {container_path(m.split(":")[1]) for m in [*self.recipe.server.mounts, *self.profile.mounts]
                 if ":" in m}
        env: dict[str, str] = {}
        mounts: list[str] = []
        for cache in KEYED_CACHES:
            inside = f"{CONTAINER_ROOT}/{cache.name}"
            host = str(dirs[cache.env])
            if inside in taken or cache.env in self.profile.env or cache.env in self.recipe.server.env:
                continue  # the recipe's or profile's mount, or a variable the profile or the recipe sets, wins
            if ":" in host or "," in host:  # a bind spec cannot hold it (HOST:CONTAINER:MODE): no cache, not a wrong bind
                log.warning("keyed cache %s not bound: its host path %r holds ':' or ','", cache.name, host)
                continue
            env[cache.env] = inside
            mounts.append(f"{host}:{inside}:rw")
        return env, mounts

    @contextlib.contextmanager
    def server(self, prepared: Prepared, env: dict[str, str] | None = None,
               args: list[str] | None = None) -> Iterator[Server]:
        s = self.recipe.server
        log_path = self.log_dir / f"server-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}.log"
        prepared.log_paths.append(str(log_path))
        kenv, kmounts = self.keyed_caches(prepared)
        with server_container(
            prepared.image or "", self._command(prepared, args), self.profile, port=s.port,
            env={**kenv, **passthrough_env(self.recipe.env_passthrough), **s.env, **(env or {})},
            mounts=[*s.mounts, *kmounts], log_path=log_path,
            health_timeout_s=s.health_timeout_s, client=self.client, lock_dir=self.lock_dir,
        ) as srv:
            yield srv

    def run_command(self, prepared: Prepared, argv: list[str], timeout_s: float) -> CommandRun:
        kenv, kmounts = self.keyed_caches(prepared)
        env = {**kenv, **passthrough_env(self.recipe.env_passthrough), **self.recipe.server.env}
        return run_in_container(prepared.image or "", argv, self.profile, timeout_s, env=env,
                                client=self.client, lock_dir=self.lock_dir, mounts=kmounts)

    def release(self, prepared: Prepared) -> None:
        if self.keep_images or not prepared.image or not prepared.image.startswith("bisectbot/"):
            return
        import docker

        with contextlib.suppress(docker.errors.APIError):
            _client(self.client).images.remove(prepared.image)
