"""``bisectbot nightlies``: discover nightly tags, record tag -> digest, show and diff images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import BadInput
from .base import Ctx, cli, pass_ctx


def _source(recipe: Path | None, registry: str | None, repository: str | None, pattern: str | None,
            hub_api: str | None, insecure: bool | None) -> Any:
    """A :class:`bisectbot.recipe.RegistrySource` from ``--recipe`` and/or the explicit options."""
    from ..recipe import RegistrySource, load_recipe
    from ..shipped import find_recipe

    base: dict[str, Any] = {}
    if recipe is not None:
        recipe = find_recipe(recipe)  # a bare name as run/probe take it (issue 24, input 6)
        r = load_recipe(recipe)
        if r.source.kind != "registry":
            raise BadInput(f"{recipe}: source.kind is {r.source.kind!r}, nightlies need a 'registry' source")
        base = r.source.model_dump()
    over = {"registry": registry, "repository": repository, "tag_pattern": pattern, "hub_api": hub_api,
            "insecure": insecure}
    base.update({k: v for k, v in over.items() if v is not None})
    if not base.get("repository"):
        raise BadInput("give --recipe or --repository (e.g. rocm/vllm-dev)")
    base["kind"] = "registry"
    return RegistrySource.model_validate(base)


def _source_options(f: Any) -> Any:
    opts = [
        click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="recipe with a registry source (path or shipped name)"),
        click.option("--registry", help="registry host[:port] (default registry-1.docker.io)"),
        click.option("--repository", help="image repository, e.g. rocm/vllm-dev"),
        click.option("--pattern", help="fnmatch tag pattern, e.g. 'nightly_main_*' ('a|b' for several)"),
        click.option("--hub-api", help="Docker Hub API base for last_updated dates (https://hub.docker.com)"),
        click.option("--insecure/--secure", default=None, help="plain HTTP registry (127.0.0.1 test registries)"),
        click.option("--page-size", type=click.IntRange(1, 10000), default=None, help="tags per request (n)"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


NIGHTLIES_EPILOG = """\b
Examples:
  bisectbot nightlies list --repository rocm/vllm-dev --pattern 'nightly_main_*' \\
      --hub-api https://hub.docker.com
  bisectbot nightlies record --recipe glm51-fp8-sparse-mla-prefill
  bisectbot nightlies show rocm/vllm-dev:nightly_main_20260412
  bisectbot nightlies diff nightly_main_20260411 nightly_main_20260412 --recipe glm51-fp8-sparse-mla-prefill
"""


@cli.group(epilog=NIGHTLIES_EPILOG)
def nightlies() -> None:
    """Nightly images: list tags, record tag -> digest in the ledger, show and diff images.

    A moving tag (nightly) becomes a dated history of digests by recording it every night.
    """


def _discover(src: Any, page_size: int | None, known: dict[str, str] | None = None) -> list[Any]:
    from ..sources.registry import discover

    return discover(src, page_size=page_size, known=known)


@nightlies.command("list")
@_source_options
@click.option("--refresh", is_flag=True,
              help="ask the registry for every tag's digest, also tags the ledger already holds")
@pass_ctx
def list_cmd(ctx: Ctx, recipe: Path | None, registry: str | None, repository: str | None, pattern: str | None,
             hub_api: str | None, insecure: bool | None, page_size: int | None, refresh: bool) -> None:
    """List matching tags with digest and date, oldest first (nothing is recorded).

    Digests the ledger already holds for dated tags are shown without asking the registry again
    (as for ``record``); --refresh asks for all.
    """
    src = _source(recipe, registry, repository, pattern, hub_api, insecure)
    infos = _discover(src, page_size, None if refresh else ctx.ledger().nightly_digests(src.repository))
    rows = [{**i.to_dict(), "date": _listed_date(i)} for i in infos]
    text = "\n".join(f"{i.tag:40} {i.digest or '-':72} {_listed_date(i) or '-'}" for i in infos) or "(no matching tags)"
    ctx.emit(rows, text)


def _listed_date(info: Any) -> str | None:
    """The date ``nightlies list`` shows for a tag: Docker Hub's ``last_updated`` where it was asked,
    else the ``YYYY-MM-DD`` in the tag's name (``nightly_main_20260412``; a mirror or a local
    registry has no dates of its own: the column was empty there, issue 41 item 11), else None."""
    from ..sources.registry import tag_date

    return info.last_updated or tag_date(info.tag)


@nightlies.command("record")
@_source_options
@click.option("--introspect", is_flag=True, help="also pull each new digest and record what it holds")
@click.option("--refresh", is_flag=True,
              help="ask the registry for every tag's digest, also tags the ledger already holds")
@pass_ctx
def record_cmd(ctx: Ctx, recipe: Path | None, registry: str | None, repository: str | None, pattern: str | None,
               hub_api: str | None, insecure: bool | None, page_size: int | None, introspect: bool,
               refresh: bool) -> None:
    """Record every matching tag -> digest in the ledger (first/last seen). The nightly job runs this.

    A tag with a date, version or commit in its name that the ledger already holds is not asked
    again unless dated within the last two days (one manifest request per new, recent or moving
    tag; --refresh asks for all).
    """
    from ..sources.registry import image_ref, record

    src = _source(recipe, registry, repository, pattern, hub_api, insecure)
    ledger = ctx.ledger()
    infos = _discover(src, page_size, None if refresh else ledger.nightly_digests(src.repository))
    known = {(r["tag"], r["digest"]) for r in ledger.nightlies(src.repository)}
    n = record(ledger, infos)
    new = [i for i in infos if (i.tag, i.digest) not in known]
    if introspect:
        from ..components import image_info

        for i in infos:
            if i.digest:
                info = image_info(image_ref(src.registry, src.repository, i.digest), ledger=ledger)
                ledger.record_nightly(src.repository, i.tag, i.digest, components=_components(info))
    ctx.emit({"repository": src.repository, "recorded": n, "new": [i.to_dict() for i in new]},
             f"recorded {n} tag(s) of {src.repository}; {len(new)} new: "
             + (", ".join(f"{i.tag}={(i.digest or '')[:19]}" for i in new) or "none"))


def _components(info: dict[str, Any]) -> dict[str, Any]:
    return {c: (info.get(c) or {}).get("version") for c in ("vllm", "aiter", "torch")} | {
        "hip": info.get("hip"), "python": info.get("python")}


def _resolve(image: str, recipe: Path | None) -> str:
    """A bare tag or digest becomes an image of the recipe's repository."""
    if recipe is None or "/" in image:
        return image
    from ..recipe import load_recipe
    from ..shipped import find_recipe
    from ..sources.registry import image_ref

    src = load_recipe(find_recipe(recipe)).source
    if src.kind != "registry":
        return image
    return image_ref(src.registry, src.repository, image)


@nightlies.command("show")
@click.argument("image")
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="resolve a bare tag in its repository")
@click.option("--refresh", is_flag=True, help="ignore the ledger's cached introspection")
@pass_ctx
def show_cmd(ctx: Ctx, image: str, recipe: Path | None, refresh: bool) -> None:
    """What IMAGE holds: vLLM/aiter/torch/HIP/Python versions and commits, /app/versions.txt."""
    from ..components import image_info

    info = image_info(_resolve(image, recipe), ledger=ctx.ledger(), refresh=refresh)
    lines = [f"image   {info['image']}", f"digest  {info['digest']}"]
    for c in ("vllm", "aiter", "torch"):
        d = info.get(c) or {}
        if d:
            extra = f" (commit {d['commit']})" if d.get("commit") else ""
            lines.append(f"{c:7} {d.get('version')}{extra}  {d.get('dir') or ''}")
    lines.append(f"hip     {info.get('hip') or '-'}")
    lines.append(f"python  {info.get('python') or '-'}")
    for k, v in (info.get("versions_txt") or {}).items():
        lines.append(f"  {k}={v}")
    ctx.emit(info, "\n".join(lines))


@nightlies.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="resolve bare tags in its repository")
@click.option("--aiter-repo", type=click.Path(file_okay=False, path_type=Path),
              help="aiter clone: map commits from the rewritten history (by PR number / subject)")
@pass_ctx
def diff_cmd(ctx: Ctx, old: str, new: str, recipe: Path | None, aiter_repo: Path | None) -> None:
    """Components that changed between images OLD and NEW (vllm, aiter, base) with commit ranges."""
    from ..components import diff_images, image_info, resolve_in_history

    ledger = ctx.ledger()
    a = image_info(_resolve(old, recipe), ledger=ledger)
    b = image_info(_resolve(new, recipe), ledger=ledger)
    changes = diff_images(a, b)
    if aiter_repo is not None:
        for ch in changes:
            if ch.component == "aiter" and ch.range:
                m = resolve_in_history(aiter_repo, ch.range[0], ch.range[1])
                if m.how != "identical":
                    ch.note = m.note()
                    if m.new:
                        ch.range = (m.new, ch.range[1])
    data = {"old": {"image": a["image"], "digest": a["digest"]}, "new": {"image": b["image"], "digest": b["digest"]},
            "changed": [c.component for c in changes if c.changed], "components": [c.to_dict() for c in changes]}
    lines = []
    for c in changes:
        mark = "changed  " if c.changed else "unchanged"
        rng = f"  range {c.range[0]}..{c.range[1]}" if c.range else ""
        lines.append(f"{mark} {c.component:6} {c.old} -> {c.new}{rng}" if c.changed else f"{mark} {c.component:6} {c.old}")
        for k, (x, y) in c.details.items():
            if c.component == "base" or k not in ("version",):
                lines.append(f"            {k}: {x} -> {y}")
        if c.note:
            lines.append(f"            note: {c.note}")
    ctx.emit(data, "\n".join(lines))
