"""Compile and JIT caches shared by the candidates of one key (issue 40: cheaper starts).

A server start spends its time importing, loading weights, compiling (torch.compile / Inductor,
Triton kernels, aiter's HIP modules) and capturing graphs. What it compiles is a function of the
code that compiles it, so a cache written by one start serves every later start of a candidate
whose relevant code is the same: the verification re-probe of a build, the next night's probe of
the same nightly, the reference's start and the probe of that build, and -- for aiter's JIT modules,
which only aiter's sources and the toolchain decide -- every vLLM commit overlaid on one nightly.

**The boundary** (the sandbox issue's): a cache directory belongs to one *key*; a candidate gets the
directories of its own keys, writable, and no other (the sandbox and the container see nothing else of
them), so an entry is written only by a candidate of its key and read by no other. The key of a
cache (:func:`cache_key`) is SHA-256 over what writes it: by default the candidate's whole build key
(image digest or trees, overlay, patch stack, build command, runner profile); for a cache whose
``shared_across`` names components known not to write it, the candidate's *base* -- everything but those
components that builds it: the nightly's digest with the patch stack, runner profile and change under test
(:meth:`bisectbot.run.container.ContainerRunner.keyed_caches`), the local runner's build minus its
components, a per-commit wheel's own build (its environment is resolved at its install) -- and the commits of every *other* component it has of
its own (an unknown component name keys it: sharing is only ever across a known non-writer).

The caches (:data:`KEYED_CACHES`), each pointed at by the variable its tool reads:

* ``vllm`` -- ``VLLM_CACHE_ROOT`` (vLLM's ``envs.py``: its ``torch_compile_cache`` of compiled graphs);
* ``inductor`` -- ``TORCHINDUCTOR_CACHE_DIR`` (PyTorch Inductor's FX-graph and kernel cache);
* ``triton`` -- ``TRITON_CACHE_DIR`` (compiled Triton kernels);
* ``aiter`` -- ``AITER_JIT_DIR`` (aiter's JIT guide: the HIP modules its JIT builds on first use),
  keyed by the base and every component's commit but vLLM's (vLLM's code does not build aiter's modules).

What is **not** shared here, and why: model weights are the runner's (``HF_HOME``, staged by a step that
runs no candidate code, mounted by the runner profile); image layers are Docker's (a derived image
reuses its base's layers already); CUDA/HIP graph capture and the KV-cache profile run at every start
(they are a function of the process's memory, not of files); Python's bytecode lives in the image or
the worktree. The measured effect is in ``benchmarks/start_breakdown.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTAINER_ROOT", "KEYED_CACHES", "KeyedCache", "cache_key", "keyed_dirs", "keyed_root"]


@dataclass(frozen=True)
class KeyedCache:
    """One cache: its ``name`` (a directory), the variable ``env`` its tool reads, and ``shared_across``:
    the components known **not** to write it, across whose commits it is shared (empty: the whole build
    keys it). Every other component's commit keys it -- a component under a name the bot does not know
    (a repository directory ``aiter-src``, the pip name ``amd-aiter``) never shares, so an unknown name
    costs a compile, never a stale module."""

    name: str
    env: str
    shared_across: tuple[str, ...] = ()


KEYED_CACHES: tuple[KeyedCache, ...] = (
    KeyedCache("vllm", "VLLM_CACHE_ROOT"),
    KeyedCache("inductor", "TORCHINDUCTOR_CACHE_DIR"),
    KeyedCache("triton", "TRITON_CACHE_DIR"),
    KeyedCache("aiter", "AITER_JIT_DIR", ("vllm",)),
)
"""The caches a candidate gets (module docstring)."""

CONTAINER_ROOT = "/var/cache/bisectbot"
"""Where a container candidate sees its keyed caches (``<CONTAINER_ROOT>/<name>``)."""


def keyed_root() -> Path:
    """The host directory of every keyed cache: ``<bot cache>/keyed`` (``$BISECTBOT_CACHE`` or
    ``~/.cache/bisectbot``; read-only to candidates except the directories of their own keys)."""
    from ..sources.releases import cache_dir_default

    return cache_dir_default() / "keyed"


def cache_key(cache: KeyedCache, build_key: str, base: str, commits: Mapping[str, str]) -> str:
    """24 hex characters of SHA-256 over what decides ``cache``'s content: the whole ``build_key`` when
    nothing is known not to write it (``shared_across`` empty), else ``base`` (the candidate's build without
    its own components: a nightly's digest) and the commits in ``commits`` (``{component: sha}``) of every
    component not in ``cache.shared_across``."""
    if not cache.shared_across:
        blob = json.dumps({"cache": cache.name, "build": build_key}, sort_keys=True)
    else:
        own = {c: sha for c, sha in commits.items() if c not in cache.shared_across}
        blob = json.dumps({"cache": cache.name, "base": base, "commits": own}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def keyed_dirs(build_key: str, base: str, commits: Mapping[str, str], root: Path | None = None,
               caches: tuple[KeyedCache, ...] = KEYED_CACHES) -> dict[str, Path]:
    """``{variable: host directory}`` of a candidate's keyed caches (made when missing) under ``root``
    (default :func:`keyed_root`): ``<root>/<name>/<key>``."""
    root = root or keyed_root()
    out: dict[str, Path] = {}
    for cache in caches:
        d = root / cache.name / cache_key(cache, build_key, base, commits)
        d.mkdir(parents=True, exist_ok=True)
        out[cache.env] = d
    return out
