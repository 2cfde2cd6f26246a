"""Runner profiles (``runners/<name>.yaml``): how a host runs a candidate's server container.

A profile names the devices (``/dev/kfd``, ``/dev/dri``), supplementary groups, IPC mode,
shared-memory size, security options, capabilities, ulimits, GPU slots (e.g. ``0-3`` and
``4-7`` for TP=4 on an 8-GPU host), the variables that receive a slot's GPU list
(``HIP_VISIBLE_DEVICES``), extra environment, bind mounts (Hugging Face cache),
variables passed through from the host (``HF_TOKEN``: the value never reaches logs) and
cache directories ``runner check`` looks at.

``${VAR}`` and ``${VAR:-default}`` and a leading ``~`` are expanded in devices, mounts and cache
dirs. A runner's own differences from a profile (device nodes elsewhere, an ulimit its Docker
daemon cannot grant) go in ``$BISECTBOT_RUNNER_OVERRIDES`` (:func:`with_overrides`), not in a copy.
Errors are ``FILE:LINE:COL: field: message`` lines (:class:`bisectbot.errors.BadInput`, exit 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import BadInput
from .located import LocatedErrors, load_located, read_text, unknown_field_hint
from .slots import slot_gpus

DEFAULT_MIN_FREE_GB = 50.0
"""A profile's ``min_free_gb`` when it says none: a ROCm vLLM image is 10-30 GB compressed; room for two."""


class RunnerProfile(BaseModel):
    """One runner profile. ``shm_size`` in Docker's notation (``16g``); ``ulimits`` maps a
    name to a soft=hard limit (``-1`` unlimited)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    devices: list[str] = Field(default_factory=list, description="HOST[:CONTAINER[:PERMS]] device nodes or "
                               "directories of them (docker --device); the container path defaults to HOST")
    group_add: list[str] = Field(default_factory=list)
    ipc_mode: str | None = None
    shm_size: str | None = None
    security_opt: list[str] = Field(default_factory=list)
    cap_add: list[str] = Field(default_factory=list)
    ulimits: dict[str, int] = Field(default_factory=dict)
    gpu_slots: list[str] = Field(default_factory=list)
    visible_devices_env: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    mounts: list[str] = Field(default_factory=list, description="HOST:CONTAINER[:ro]")
    pass_env: list[str] = Field(default_factory=list)
    cache_dirs: list[str] = Field(default_factory=list)
    network: str | None = Field(None, description="docker network (default: bridge)")
    init: bool = Field(True, description="run docker's init (tini) as PID 1 so the server gets SIGTERM")
    min_free_gb: float = Field(DEFAULT_MIN_FREE_GB, ge=0, description="free disk (GB, 10^9 bytes) the host needs "
                               "for images, derived images and model weights: 'runner check' fails below it on "
                               "the Docker data root, runners/install-runner.sh refuses below it")

    def verdict_hash(self) -> str:
        """SHA-256 (hex, 16 chars) of :data:`VERDICT_FIELDS` as written in the profile (an
        ``env`` value such as ``VLLM_ROCM_USE_AITER=1`` changes what a server computes).
        ``pass_env`` contributes its variable names only, never the host's values (tokens)."""
        data = self.model_dump(mode="json", include=set(VERDICT_FIELDS))
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @field_validator("gpu_slots")
    @classmethod
    def _slots(cls, v: list[str]) -> list[str]:
        for s in v:
            slot_gpus(s)  # raises ValueError with the slot in the message
        return v

    @field_validator("devices", "cache_dirs")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        for p in v:
            expand(p)  # raises ValueError for a variable that holds a secret
        return v

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, v: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for m in v:
            parts = expand(m).split(":")  # ${VAR:-default} has a colon: split after expansion
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
                raise ValueError(f"mount {m!r}: expected HOST:CONTAINER or HOST:CONTAINER:ro")
            target = container_path(parts[1])
            if target in seen:  # Docker answers 400 "Duplicate mount point" (issue 24, input 1)
                raise ValueError(f"mounts {seen[target]!r} and {m!r} both mount the container path {target}")
            seen[target] = m
        return v

    def slot_env(self, slot: str | None) -> dict[str, str]:
        """The ``visible_devices_env`` variables set to the slot's GPUs (``0,1,2,3``)."""
        if not slot:
            return {}
        gpus = ",".join(str(g) for g in slot_gpus(slot))
        return {k: gpus for k in self.visible_devices_env}

    def expanded_devices(self) -> list[tuple[str, str, str]]:
        """``(host, container, permissions)`` of each device with variables and ``~`` expanded; the
        container path defaults to the host's, permissions to ``rwm``."""
        out = []
        for d in self.devices:
            parts = expand(d).split(":")  # ${VAR:-default} has a colon: split after expansion
            host = parts[0]
            out.append((host, parts[1] if len(parts) > 1 and parts[1] else host, parts[2] if len(parts) > 2 else "rwm"))
        return out

    def expanded_mounts(self) -> list[tuple[str, str, str]]:
        """``(host, container, mode)`` with variables and ``~`` expanded."""
        out = []
        for m in self.mounts:
            parts = expand(m).split(":")
            out.append((parts[0], parts[1], parts[2] if len(parts) == 3 else "rw"))
        return out

    def expanded_cache_dirs(self) -> list[str]:
        return [expand(c) for c in self.cache_dirs]


def container_path(p: str) -> str:
    """A bind mount's container side as Docker compares it (normalised: ``/a/b/`` is ``/a/b``)."""
    import posixpath

    return posixpath.normpath(p) if p else p


@dataclass(frozen=True)
class Bind:
    """One bind mount of a server container: ``host`` and ``container`` paths (expanded),
    ``mode`` ``rw``/``ro``, ``origin`` ``profile NAME`` or ``recipe``."""

    host: str
    container: str
    mode: str
    origin: str

    def spec(self) -> str:
        return f"{self.host}:{self.container}:{self.mode}"


@dataclass(frozen=True)
class MountPlan:
    """The binds a server container gets (:func:`merge_mounts`) and, in ``replaced``, one line per
    profile mount a recipe mount took the place of (same container path: the recipe wins)."""

    binds: list[Bind]
    replaced: list[str]


def _recipe_bind(m: str) -> Bind:
    parts = m.split(":")
    return Bind(os.path.expanduser(parts[0]), container_path(parts[1]), parts[2] if len(parts) == 3 else "rw",
                "recipe")


def merge_mounts(profile: RunnerProfile, recipe_mounts: list[str] | None = None) -> MountPlan:
    """Merge the profile's mounts with the recipe's ``server.mounts`` by container path.

    Docker refuses two binds on one container path (``400 Duplicate mount point``), which made
    every candidate a server error on a runner whose profile and recipe both mount the Hugging
    Face cache (issue 24, input 1). The recipe's mount wins (it says what *this* problem needs);
    each replaced profile mount is named in ``MountPlan.replaced`` so the plan, ``recipe
    validate`` and ``runner check --recipe`` can say so. Order: the profile's (kept ones) first.
    """
    rec = [_recipe_bind(m) for m in recipe_mounts or []]
    by_target = {b.container: b for b in rec}
    binds: list[Bind] = []
    replaced: list[str] = []
    for h, c, mode in profile.expanded_mounts():
        c = container_path(c)
        if c in by_target:
            r = by_target[c]
            if os.path.normpath(r.host) == os.path.normpath(h) and r.mode == mode:
                continue  # the same bind twice: one is kept, nothing is replaced
            replaced.append(f"container path {c}: the recipe's mount {r.host}:{c}:{r.mode} replaces runner "
                            f"profile {profile.name}'s {h}:{c}:{mode}")
            continue
        binds.append(Bind(h, c, mode, f"profile {profile.name}"))
    return MountPlan(binds + rec, replaced)


_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")


#: Profile fields that can change a verdict (hashed into container probe keys by
#: :meth:`RunnerProfile.verdict_hash`); GPU slots, cache dirs, network, name and description
#: only say where and how fast a probe runs.
VERDICT_FIELDS = ("devices", "group_add", "ipc_mode", "shm_size", "security_opt", "cap_add", "ulimits",
                  "visible_devices_env", "env", "mounts", "pass_env", "init")


def expand(s: str, environ: dict[str, str] | None = None) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}``, ``$VAR`` and a leading ``~`` (after expansion).
    Raises ValueError for a variable whose name says it holds a secret
    (:func:`bisectbot.secrets.is_secret_name`: ``BISECTBOT_GITHUB_TOKEN``, ``HF_TOKEN``, ``*_KEY``): a device,
    mount or cache path carries its value into the server container (``/dev/NAME``, ``/proc/mounts``)
    and into Docker's arguments, where no redactor reaches."""
    from .secrets import is_secret_name

    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if is_secret_name(name):
            raise ValueError(f"{s!r} names ${name}, a secret: its value would reach the server container "
                             "and Docker's arguments (give the path itself)")
        val = env.get(name)
        if val:
            return val
        return m.group(2) if m.group(2) is not None else ""

    out = _VAR.sub(sub, s)
    if out.startswith("~"):
        out = os.path.expanduser(out)
    return out


def profile_search_path(recipe_path: str | Path | None = None) -> list[Path]:
    """Where profiles are looked up (:func:`bisectbot.shipped.runner_search_path`): ``$BISECTBOT_RUNNERS``
    (``:``-separated), ``runners/`` next to the recipe, ``./runners``, the shipped profiles."""
    from .shipped import runner_search_path

    return runner_search_path(recipe_path)


def parse_profile(text: str, filename: str = "<profile>") -> RunnerProfile:
    """Parse a profile's YAML text. Raises :class:`BadInput` with located one-line errors."""
    try:
        return load_located(RunnerProfile, text, filename, "runner-profile fields")
    except LocatedErrors as e:
        raise BadInput(str(e)) from None


def load_profile(name_or_path: str | Path, recipe_path: str | Path | None = None) -> RunnerProfile:
    """Load a profile file path, or ``<name>.yaml`` searched in :func:`profile_search_path`
    (``recipe_path``: the recipe whose neighbourhood is searched).

    Raises :class:`BadInput` when not found (naming ``--profile`` and ``BISECTBOT_RUNNERS``) or invalid.
    """
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        candidates = [p]
    else:
        candidates = [d / f"{name_or_path}.yaml" for d in profile_search_path(recipe_path)]
    for c in candidates:
        if c.is_file():
            try:
                text = read_text(c)  # size-limited, UTF-8 checked
            except LocatedErrors as e:
                raise BadInput(str(e)) from None
            known = _known_profiles(recipe_path) if os.environ.get(OVERRIDES_ENV) else None  # only to check them
            return with_overrides(parse_profile(text, str(c)), known=known)
    from .shipped import shipped_dir

    shipped = shipped_dir("runners")
    names = sorted(x.stem for x in shipped.glob("*.yaml")) if shipped else []
    raise BadInput(
        f"runner profile {name_or_path!r} not found (looked in {', '.join(str(c) for c in candidates)}); "
        f"give --profile NAME|FILE or set BISECTBOT_RUNNERS=DIR; shipped profiles: {', '.join(names) or 'none'}"
    )


OVERRIDES_ENV = "BISECTBOT_RUNNER_OVERRIDES"


def _known_profiles(recipe_path: str | Path | None = None) -> set[str]:
    """Names of the profiles :func:`load_profile` can find: ``*.yaml`` stems in
    :func:`profile_search_path` and the shipped ``runners/`` directory."""
    from .shipped import shipped_dir

    dirs = [*profile_search_path(recipe_path), shipped_dir("runners")]
    return {x.stem for d in dirs if d and Path(d).is_dir() for x in Path(d).glob("*.y*ml")}


def with_overrides(profile: RunnerProfile, environ: dict[str, str] | None = None,
                   known: set[str] | None = None) -> RunnerProfile:
    """``profile`` with this runner's overrides: ``$BISECTBOT_RUNNER_OVERRIDES`` names a YAML file
    mapping profile names to fields that replace the profile's (``mi355x: {devices: [...]}``), for
    what one host does differently from a shipped profile (device nodes elsewhere, a Docker daemon
    that cannot grant an ulimit) without copying it. The result is validated as a profile and its
    :meth:`~RunnerProfile.verdict_hash` covers the replaced fields. Raises :class:`BadInput` for a
    missing or malformed file (naming the variable), and -- given ``known``, the profile names
    that exist -- for a section naming no known profile (a mistyped ``cpuu:`` would otherwise be
    dropped silently, and the host's device paths with it)."""
    from pydantic import ValidationError

    from .located import compose, where

    path = (os.environ if environ is None else environ).get(OVERRIDES_ENV, "")
    if not path:
        return profile
    try:
        data, marks = compose(read_text(Path(path)), path, "profile names")
    except LocatedErrors as e:
        raise BadInput(f"{OVERRIDES_ENV}: {e}") from None
    except OSError as e:
        raise BadInput(f"{OVERRIDES_ENV}={path}: cannot read: {e.strerror or e}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a mapping of profile names to profile fields")
    stray = sorted(k for k in data if isinstance(k, str) and known is not None and k not in known | {profile.name})
    if stray:
        raise BadInput("\n".join(f"{where(marks, data, (k,), path, True)}: no runner profile of this name "
                                  f"(known: {', '.join(sorted(known | {profile.name}))})" for k in stray))
    section = data.get(profile.name)
    if section is None:
        return profile
    if not isinstance(section, dict) or "name" in section:
        raise BadInput(f"{path}: {profile.name}: expected a mapping of profile fields (not 'name')")
    try:
        return RunnerProfile.model_validate({**profile.model_dump(), **section})
    except ValidationError as e:  # one FILE:LINE:COL: NAME.field: message line per problem, as a profile's
        problems = []
        for err in e.errors():
            unknown = err["type"] == "extra_forbidden"
            msg = ("unknown field" + unknown_field_hint(RunnerProfile, tuple(err["loc"])) if unknown
                   else err["msg"].removeprefix("Value error, "))
            loc = (profile.name, *err["loc"])
            if err["loc"] and err["loc"][0] in section:
                problems.append(f"{where(marks, data, loc, path, unknown)}: {msg}")
            else:
                problems.append(f"{path}: {'.'.join(map(str, loc))}: {msg}")
        raise BadInput("\n".join(problems)) from None


def docker_run_kwargs(profile: RunnerProfile, slot: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``docker.containers.run`` from a profile (devices, groups, ipc,
    shm, security options, capabilities, ulimits, mounts). Environment is left to the caller."""
    import docker

    kw: dict[str, Any] = {"init": profile.init}
    if profile.devices:
        kw["devices"] = [f"{h}:{c}:{perms}" for h, c, perms in profile.expanded_devices()]
    if profile.group_add:
        kw["group_add"] = host_groups(profile.group_add)
    if profile.ipc_mode:
        kw["ipc_mode"] = profile.ipc_mode
    if profile.shm_size:
        kw["shm_size"] = profile.shm_size
    if profile.security_opt:
        kw["security_opt"] = list(profile.security_opt)
    if profile.cap_add:
        kw["cap_add"] = list(profile.cap_add)
    if profile.ulimits:
        kw["ulimits"] = [docker.types.Ulimit(name=k, soft=v, hard=v) for k, v in profile.ulimits.items()]
    if profile.network:
        kw["network"] = profile.network
    mounts = merge_mounts(profile).binds
    if mounts:  # a list of HOST:CONTAINER:MODE: a dict keyed by host path would drop a second bind of one host dir
        kw["volumes"] = [b.spec() for b in mounts]
    return kw


def host_groups(names: list[str]) -> list[str]:
    """``group_add`` as the host's GIDs: ``video``/``render`` name the groups that own the host's device
    nodes, and Docker would look a name up in the *image's* ``/etc/group`` (an image without a
    ``render`` group fails to start: "Unable to find group render"; one with another GID gets no
    access to ``/dev/dri/renderD*``). A number stays; a name the host lacks is left to Docker."""
    import grp

    out = []
    for g in names:
        if not g.isdigit():
            try:
                g = str(grp.getgrnam(g).gr_gid)
            except KeyError:
                pass
        out.append(g)
    return out


def mount_clashes(profile: RunnerProfile, recipe_mounts: list[str], text: str | None = None,
                  filename: str = "<recipe>") -> list[str]:
    """One line per recipe ``server.mounts`` entry whose container path the runner profile mounts
    too: ``FILE:LINE:COL: server.mounts[i]: ...`` when the recipe's ``text`` is given, else
    ``server.mounts[i]: ...``. The run merges them (the recipe wins, :func:`merge_mounts`); the
    line says which host directory the candidate gets instead of the profile's."""
    from .located import compose, where

    plan = merge_mounts(profile, recipe_mounts)
    if not plan.replaced:
        return []
    data, marks = compose(text, filename) if text is not None else ({}, None)
    out = []
    targets = [container_path(m.split(":")[1]) if ":" in m else "" for m in recipe_mounts]
    for line in plan.replaced:
        target = line.split(":", 1)[0].removeprefix("container path ")
        i = targets.index(target)
        loc = where(marks, data, ("server", "mounts", i), filename) if marks is not None else f"server.mounts[{i}]"
        out.append(f"{loc}: mount clash on {line}: remove this mount (the runner profile provides the container "
                   "path; a host that keeps it elsewhere says so in its profile or BISECTBOT_RUNNER_OVERRIDES) or "
                   "mount another container path")
    return out


def recipe_mount_clashes(recipe: Any, recipe_path: Path, text: str | None = None) -> tuple[list[str], str]:
    """``(clashes, unchecked)``: :func:`mount_clashes` of ``recipe``'s ``server.mounts`` with its runner
    profile's mounts -- the one check behind ``recipe validate`` and ``run`` (both refuse them, exit 2:
    issue 41, item 1 -- a recipe mounting ``~/.cache/huggingface`` silently replaced the runner's shared
    ``$HF_HOME`` and every probe would download the model into the runner user's home) -- and, when the
    profile is not found here, a line saying the mounts were not checked (the runner may hold its own
    profile; ``""`` otherwise). ``text``: the recipe file's text, for ``FILE:LINE:COL`` locations."""
    mounts = list(recipe.server.mounts)
    if not mounts:
        return [], ""
    try:
        profile = load_profile(recipe.runner, recipe_path)
    except BadInput as e:
        return [], f"{recipe_path}: runner: mounts not checked against the runner profile: {str(e).splitlines()[0]}"
    return mount_clashes(profile, mounts, text, str(recipe_path)), ""
