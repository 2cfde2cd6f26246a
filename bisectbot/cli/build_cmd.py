"""``bisectbot build``: a derived image = base@digest + source overlay + patch stack."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import BadInput
from .base import Ctx, cli, pass_ctx


def default_stack_dir(recipe_path: Path | None = None) -> Path:
    """The stack directory by the lookup order of :mod:`bisectbot.shipped` (``$BISECTBOT_PATCHES_DIR``,
    next to the recipe, ``./patches``, the shipped stack). Raises BadInput when none exists."""
    from ..shipped import find_stack

    return find_stack(None, recipe_path).parent


BUILD_EPILOG = """\b
Examples:
  bisectbot build --recipe glm51-fp8-sparse-mla-prefill --base rocm/vllm-dev@sha256:...
  bisectbot build --recipe glm51-fp8-sparse-mla-prefill --base nightly_main_20260412 --overlay vllm=0f0f28b53 --repo ~/src/vllm
"""


@cli.command("build", epilog=BUILD_EPILOG)
@click.option("--recipe", "recipe_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="recipe path or shipped recipe's name (its patch stack, recipe hash and build command)")
@click.option("--base", required=True, help="base image (host/repo@sha256:..., or a tag/digest of the recipe's repository)")
@click.option("--overlay", help="COMPONENT=COMMIT: overlay vllm or aiter sources at COMMIT")
@click.option("--repo", "repo_path", type=click.Path(file_okay=False, path_type=Path),
              help="local clone for the overlay (default: recipe bisect.components.<component>.repo)")
@click.option("--base-commit", help="commit the base image was built from (when its version carries none)")
@click.option("--stack-dir", type=click.Path(file_okay=False, path_type=Path), help="patch stack directory")
@click.option("--no-patches", is_flag=True, help="ignore the recipe's patch stack")
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("bisectbot-out/logs"),
              show_default=True, help="where the build's log is written")
@pass_ctx
def build(ctx: Ctx, recipe_path: Path, base: str, overlay: str | None, repo_path: Path | None,
          base_commit: str | None, stack_dir: Path | None, no_patches: bool, log_dir: Path) -> None:
    """Build (or reuse) bisectbot/<recipe>:<hash> and print its tag."""
    from ..build import BuildRequest, Overlay, _default_patch_fn, build_image
    from ..recipe import load_recipe
    from ..run.container import stack_hash
    from ..shipped import find_recipe
    from ..sources.git import local_repo
    from .nightlies_cmd import _resolve

    recipe_path = find_recipe(recipe_path)  # a bare name as run/probe take it (issue 24, input 6)
    recipe = load_recipe(recipe_path)
    ov = None
    if overlay:
        comp, sep, commit = overlay.partition("=")
        if not sep or comp not in ("vllm", "aiter") or not commit:
            raise BadInput(f"--overlay {overlay!r}: expected vllm=COMMIT or aiter=COMMIT")
        repo = repo_path
        if repo is None:
            src = recipe.bisect.components.get(comp)
            if src is None:
                raise BadInput(f"--overlay {comp}: give --repo or bisect.components.{comp}.repo in the recipe")
            repo = local_repo(src.repo, recipe_path.parent)
        ov = Overlay(comp, repo, commit, base_commit=base_commit)
    ids = [] if no_patches else list(recipe.patches)
    sdir = (stack_dir or default_stack_dir(recipe_path)) if ids else None
    req = BuildRequest(
        base=_resolve(base, recipe_path), recipe=recipe.name, recipe_hash=recipe.verdict_hash(), overlay=ov,
        patch_ids=ids, stack_hash=stack_hash(sdir, ids), patch_fn=_default_patch_fn(sdir, ids) if ids else None,
        build_command=recipe.server.build_command, log_dir=log_dir,
    )
    res = build_image(req, ledger=ctx.ledger())
    verb = "reused" if res.reused else "built"
    text = f"{verb} {res.tag}"
    if not res.reused:
        text += f" ({len(res.changed_files)} file(s) changed, {len(res.deleted_files)} deleted; log {res.log_path})"
    ctx.emit(res.to_dict(), text)
