"""The text of a new recipe (``bisectbot recipe init``): the shipped GLM recipe's shape for another
model and source, with comments saying what to edit.

Two sources: nightly images (``--image REPOSITORY[:TAG]``: a registry source whose tag pattern is
TAG with its date made a wildcard, served by the image's own vLLM under the runner profile) or a
git repository (``--repo``: a git source the local runner checks out, builds with
``pip install -e .`` and serves). The reproducer is the prefill threshold search (prompt tokens
from 1,000 to ``max_size``), the regression ``garbage``. Values are written as JSON strings (valid
YAML), so a model id or a path never changes the document's structure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import BadInput

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
"""A recipe name (the recipe model's ``name`` pattern)."""

_DATE = re.compile(r"\d{6,8}")


def tag_pattern(tag: str) -> str:
    """The fnmatch pattern of a nightly tag's series: its date (6-8 digits) made ``*``
    (``nightly_main_20260412`` -> ``nightly_main_*``); a tag without one -> ``TAG*``."""
    pat = _DATE.sub("*", tag)
    return pat if pat != tag else f"{tag}*"


#: Where vLLM's images read the Hugging Face cache (``HF_HOME`` of the container's root user).
HF_CACHE = "/root/.cache/huggingface"


def _profile_targets(runner: str) -> set[str]:
    """Container paths runner profile ``runner`` mounts (empty when it is not found here): ``recipe
    init`` writes no mount the profile provides (issue 41, item 1: a recipe mount replaces the
    profile's, and the MI355X profile's is the runner's shared ``$HF_HOME``)."""
    from .runner_profile import container_path, load_profile

    try:
        profile = load_profile(runner)
    except BadInput:
        return set()
    return {container_path(c) for _h, c, _m in profile.expanded_mounts()}


def _q(v: object) -> str:
    return json.dumps(v)


def _sizes(max_size: int) -> list[int]:
    out, s = [], 1000
    while s < max_size:
        out.append(s)
        s *= 2
    return [*out, max_size]


def recipe_text(name: str, model: str, *, image: str | None = None, repo: str | None = None, tp: int = 1,
                runner: str = "cpu", good: str | None = None, bad: str | None = None,
                max_size: int = 30000) -> str:
    """The YAML text of recipe ``name`` (one of ``image``/``repo``). Raises :class:`BadInput` for a
    name that is not a recipe name, an empty model, or neither/both sources."""
    if not NAME.match(name):
        raise BadInput(f"recipe init: name {name!r} must be lower case letters, digits, '.', '_' or '-' "
                       "(it names the report directory and the ledger's sessions)")
    if not model.strip() or any(c in model for c in "\n\r"):
        raise BadInput("recipe init: --model must be a model id (e.g. Qwen/Qwen3-8B)")
    if (image is None) == (repo is None):
        raise BadInput("recipe init: give one of --image REPOSITORY[:TAG] or --repo URL|PATH")
    lines = ["# written by `bisectbot recipe init`; edit, then `bisectbot recipe validate` this file",
             f"name: {name}",
             f"description: {_q(f'{model}: garbage output above a prompt-size threshold (prefill)')}",
             f"model: {_q(model)}", f"tp: {tp}", f"runner: {_q(runner)}        # runners/<name>.yaml: devices, env, GPU slots",
             ""]
    if image is not None:
        from .sources.registry import DOCKER_HUB_REGISTRY, split_image_ref

        registry, repository, tag = split_image_ref(image.strip())
        if tag.startswith("sha256:"):
            raise BadInput(f"recipe init: --image {image}: give a tag of the nightly series, not a digest")
        hub = registry == DOCKER_HUB_REGISTRY
        lines += ["source:", "  kind: registry", f"  registry: {_q(registry)}", f"  repository: {_q(repository)}",
                  f"  tag_pattern: {_q(tag_pattern(tag))}      # which tags are nightlies"]
        if hub:
            lines.append('  hub_api: "https://hub.docker.com"   # tag dates')
        lines += ["", "server:   # the image's own vLLM",
                  '  command: [vllm, serve, "{model}", --host, 0.0.0.0, --port, "{port}", -tp, "{tp}"]',
                  "  port: 8000", "  health_timeout_s: 1800      # seconds: a large model loads for minutes"]
        if HF_CACHE not in _profile_targets(runner):  # the runner profile's mount is the runner's shared cache
            lines.append(f'  mounts: ["~/.cache/huggingface:{HF_CACHE}"]')
    else:
        assert repo is not None
        src = repo.strip()
        comp = Path(re.sub(r"(\.git)?/*$", "", src)).name or "repo"
        comp = re.sub(r"[^A-Za-z0-9._-]+", "-", comp)
        lines += ["source:", "  kind: git", f"  repo: {_q(src)}", f"  component: {_q(comp)}",
                  "", "server:   # built and served from each candidate's checkout (local runner)",
                  "  build_command: [python3, -m, pip, install, --no-build-isolation, -e, .]",
                  '  command: [python3, -m, vllm.entrypoints.openai.api_server, --model, "{model}", --port, "{port}",'
                  ' -tp, "{tp}"]',
                  "  build_timeout_s: 14400       # seconds: a from-source vLLM build takes minutes to hours",
                  "  health_timeout_s: 1800"]
    lines += ["", "reproducer:   # the prefill threshold search: prompt sizes in tokens",
              "  kind: prefill", f"  sizes: {_sizes(max_size)}", "  min_size: 1000", f"  max_size: {max_size}",
              '  question: "What is 2+2? Answer in one sentence."', '  expected_answer: "4"', "  needles: 1",
              "  max_tokens: 256", "  temperature: 0.0", "  seed: 0",
              "regress: garbage", "", "bisect:", "  confidence: 0.99"]
    if good:
        lines.append(f"  good: {_q(good)}")
    if bad:
        lines.append(f"  bad: {_q(bad)}")
    lines += ["", "report:", f"  dir: {_q('bisectbot-out/' + name)}",
              "  # github: {repo: OWNER/REPO, labels: [bisectbot]}   # to file the issue", ""]
    return "\n".join(lines)


__all__ = ["NAME", "recipe_text", "tag_pattern"]
