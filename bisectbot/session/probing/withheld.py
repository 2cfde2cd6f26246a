"""Host variables that configure the stack but never reach the candidates (issue 23, input 4).

Candidates see an allow-listed environment (:func:`bisectbot.secrets.candidate_env`): a
variable the user exported -- ``VLLM_ATTENTION_BACKEND=TRITON_ATTN``, the setting the bug
needs (vllm#34759) -- is dropped unless the recipe's ``env_passthrough`` names it. The
allow-list stays; :func:`withheld` names the dropped variables that look like configuration
of the stack, so the plan and the report can say so and show the ``env_passthrough`` line
that would pass them (:func:`passthrough_line`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ...recipe import Recipe
from ...secrets import BASE_ENV, is_secret_name

#: Name prefixes of variables that configure a serving stack (vLLM, ROCm/HIP/HSA, aiter, CUDA,
#: NCCL, PyTorch, Hugging Face).
CONFIG_PREFIXES = ("VLLM_", "HIP_", "ROCM_", "HSA_", "AITER_", "CUDA_", "NCCL_", "TORCH_", "HF_")
_NAMED = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def withheld(recipe: Recipe, environ: Mapping[str, str] | None = None) -> list[str]:
    """Sorted names of host variables (``environ``, default ``os.environ``) that look like stack
    configuration -- a :data:`CONFIG_PREFIXES` prefix, or named as ``$NAME`` in the recipe's
    server or reproducer command -- and that candidates do not get: not in ``env_passthrough``,
    not set by the recipe's ``server.env``, not a host basic, not used on the host by the recipe's
    runner profile (``HF_HOME`` in ``runners/mi355x.yaml``'s mount: the candidate gets the cache at
    the mount's container path, and the host path would be wrong inside). Secret-looking names
    (``HF_TOKEN``) are never listed: they are withheld on purpose."""
    env = os.environ if environ is None else environ
    named = {m.group(1) for a in [*recipe.server.command, *(recipe.reproducer.command or [])]
             for m in _NAMED.finditer(a)}
    keep = set(recipe.env_passthrough) | set(recipe.server.env) | set(BASE_ENV) | _profile_host_names(recipe)
    out = [k for k in env if (k.startswith(CONFIG_PREFIXES) or k in named) and k not in keep
           and not is_secret_name(k)]
    return sorted(out)


def _profile_host_names(recipe: Recipe) -> set[str]:
    """Variables the recipe's runner profile expands on the host (devices, mounts, cache dirs);
    none when the profile is not found here."""
    from ...errors import BadInput
    from ...runner_profile import load_profile

    try:
        prof = load_profile(recipe.runner)
    except BadInput:
        return set()
    return {m.group(1) for a in [*prof.devices, *prof.mounts, *prof.cache_dirs] for m in _NAMED.finditer(a)}


def passthrough_line(recipe: Recipe, names: list[str]) -> str:
    """The recipe line that would pass ``names`` to candidates (with what it passes already)."""
    return "env_passthrough: [" + ", ".join([*recipe.env_passthrough, *[n for n in names
                                                                      if n not in recipe.env_passthrough]]) + "]"


def withheld_note(recipe: Recipe, names: list[str], status: str = "") -> str:
    """One line for the plan, the progress and (with ``status``) the report."""
    head = (f"the run ended {status} while host variables that configure the stack were withheld from the "
            "candidates" if status else "withheld from the candidates (not in env_passthrough)")
    return f"{head}: {', '.join(names)}; to pass them, add to the recipe: {passthrough_line(recipe, names)}"


__all__ = ["CONFIG_PREFIXES", "passthrough_line", "withheld", "withheld_note"]
