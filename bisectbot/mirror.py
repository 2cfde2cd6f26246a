"""Registry mirrors: where a runner fetches a recipe's nightly images from (``$BISECTBOT_REGISTRY_MIRROR``).

A shipped recipe names the images where they are published (``registry-1.docker.io``,
``rocm/vllm-dev``). A runner behind a pull-through cache, an air-gapped mirror or a local
registry holding copies of those images says so once, in its environment (the runner's ``.env``:
``runners/install-runner.sh --registry-mirror URL``), instead of every recipe being edited:

``BISECTBOT_REGISTRY_MIRROR=URL[,UPSTREAM=URL...]``

* a bare ``URL`` mirrors Docker Hub (``registry-1.docker.io``, ``docker.io``,
  ``index.docker.io``), as dockerd's ``registry-mirrors`` does; ``UPSTREAM=URL`` mirrors that
  registry host (``ghcr.io=https://mirror.example.com/ghcr``);
* ``URL`` is ``http[s]://HOST[:PORT][/PREFIX]``: ``http`` is a plain-HTTP registry (a local one
  on 127.0.0.1), a ``PREFIX`` is prepended to the repository (Harbor-style proxy projects:
  ``https://harbor.example.com/dockerhub`` serves ``rocm/vllm-dev`` as
  ``dockerhub/rocm/vllm-dev``).

The mirror replaces the recipe source's ``registry``, ``repository`` and ``insecure``, and drops
``hub_api`` (Docker Hub's tags API describes Hub, not the mirror: tag dates then come from the
tag names). Digests are content addresses, so a faithful mirror yields the same candidates and
probe cache keys; the ledger records the nightlies under the mirrored repository.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .errors import BadInput

ENV = "BISECTBOT_REGISTRY_MIRROR"
DOCKER_HUB_NAMES = ("registry-1.docker.io", "docker.io", "index.docker.io")

_URL = re.compile(r"^(https?)://([A-Za-z0-9.-]+(?::[0-9]{1,5})?)((?:/[a-z0-9][a-z0-9._-]*)*)/?$")


@dataclass(frozen=True)
class Mirror:
    """One mirror: ``registry`` host[:port], ``insecure`` (plain HTTP), repository ``prefix`` ('' for none)."""

    registry: str
    insecure: bool
    prefix: str

    def repository(self, upstream_repository: str) -> str:
        """The mirror's name of ``upstream_repository`` (``rocm/vllm-dev`` -> ``PREFIX/rocm/vllm-dev``)."""
        return f"{self.prefix}/{upstream_repository}" if self.prefix else upstream_repository


def parse_mirrors(text: str) -> dict[str, Mirror]:
    """``URL[,UPSTREAM=URL...]`` -> upstream registry host -> :class:`Mirror`. A bare URL is Docker
    Hub's (under each of its names). Raises :class:`BadInput` naming the variable when malformed."""
    out: dict[str, Mirror] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        upstream, eq, url = part.partition("=")
        if not eq:
            upstream, url = "", part
        m = _URL.match(url.strip())
        if not m or (eq and not re.match(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$", upstream.strip())):
            raise BadInput(f"{ENV}: expected URL or UPSTREAM=URL with URL http[s]://HOST[:PORT][/PREFIX], "
                           f"got {part[:200]!r}")
        mirror = Mirror(m.group(2), m.group(1) == "http", m.group(3).strip("/"))
        for host in (DOCKER_HUB_NAMES if not eq or upstream.strip() in DOCKER_HUB_NAMES else (upstream.strip(),)):
            out[host] = mirror
    return out


def mirrored_source(source: Any, environ: dict[str, str] | None = None) -> Any:
    """``source`` (a recipe's :class:`~bisectbot.recipe.RegistrySource`) as the runner's mirror
    serves it, or ``source`` itself when no mirror covers its registry (or it is no registry source)."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    if not text.strip() or getattr(source, "kind", None) != "registry":
        return source
    mirror = parse_mirrors(text).get(source.registry)
    if mirror is None:
        return source
    return source.model_copy(update={"registry": mirror.registry, "insecure": mirror.insecure,
                                     "repository": mirror.repository(source.repository), "hub_api": None})
