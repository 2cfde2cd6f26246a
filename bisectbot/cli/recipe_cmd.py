"""``bisectbot recipe validate|schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .. import terminal
from ..errors import EXIT_BAD_INPUT, RecipeError
from .base import Ctx, cli, error_document, pass_ctx


@cli.group(epilog="""\b
Examples:
  bisectbot recipe validate recipes/*.yaml
  bisectbot recipe validate vllm-workspace-fix-retirement     # a shipped example, by name
  bisectbot recipe schema > recipe.schema.json
""")
def recipe() -> None:
    """Validate recipes and print their JSON Schema."""


@recipe.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--stack", "stack_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Patch stack to check patch ids against (default: $BISECTBOT_PATCHES_DIR, patches/ next "
                   "to the recipe, ./patches, the shipped stack). Recipes without patches need none.")
@pass_ctx
def validate(ctx: Ctx, files: tuple[Path, ...], stack_path: Path | None) -> int:
    """Validate recipe FILES; every problem as FILE:LINE:COL: field: message (exit 2).

    Patch ids are checked against the patch stack.

    \b
    Example:
      bisectbot recipe validate recipes/*.yaml
    """
    from ..errors import BadInput
    from ..located import read_text
    from ..patches import load_stack
    from ..recipe import bisection_problems, check_patch_ids, load_recipe
    from ..shipped import find_recipe, find_stack

    stacks: dict[Path, list[str]] = {}
    problems: list[str] = []
    warnings: list[str] = []
    ok: dict[str, str] = {}
    for arg in files:
        try:
            f = find_recipe(arg)  # a path, or the name of a shipped example
            r = load_recipe(f)
        except RecipeError as e:
            problems.extend(e.problems)
            continue
        except BadInput as e:
            problems.append(str(e))
            continue
        bad_ids: list[str] = []
        if r.patches:  # a recipe without patches never needs a stack
            try:
                sp = find_stack(stack_path, f)
                if sp not in stacks:
                    stacks[sp] = load_stack(sp).ids
            except BadInput as e:
                problems.append(f"{f}: patches: {e}")
                continue
            bad_ids = check_patch_ids(r, stacks[sp], f.read_text(encoding="utf-8"), str(f))
        if bad_ids:
            problems.extend(bad_ids)
        else:
            ok[str(f)] = r.verdict_hash()
            warnings.extend(f"{w} (warning: bisectbot run refuses this)"
                            for w in bisection_problems(r, read_text(f), str(f)))
            warnings.extend(f"{w} (warning)" for w in _mount_clashes(r, f))
    if ctx.json:
        if problems:  # the documented failure shape (issue 24, input 6): one problem per line
            ctx.emit(error_document("bad recipe", "\n".join(problems + warnings), EXIT_BAD_INPUT))
        else:
            ctx.emit({"ok": ok, "problems": problems, "warnings": warnings})
    else:
        for f, h in ok.items():
            terminal.echo(f"{f}: ok (verdict hash {h})")
        for p in problems + warnings:
            terminal.echo(p, err=True)
    if problems:
        sys.exit(EXIT_BAD_INPUT)
    return 0


def _mount_clashes(r: Any, f: Path) -> list[str]:
    """Clashes of the recipe's ``server.mounts`` with its runner profile's mounts (issue 24, input 1);
    a profile that cannot be found here says so instead (the runner may hold its own)."""
    from ..errors import BadInput
    from ..located import read_text
    from ..runner_profile import load_profile, mount_clashes

    mounts = list(r.server.mounts)
    if not mounts:
        return []
    try:
        profile = load_profile(r.runner, f)
    except BadInput as e:
        return [f"{f}: runner: mounts not checked against the runner profile: {str(e).splitlines()[0]}"]
    return mount_clashes(profile, mounts, read_text(f), str(f))


@recipe.command()
@pass_ctx
def schema(ctx: Ctx) -> None:
    """Print the recipe JSON Schema (for editors).

    \b
    Example:
      bisectbot recipe schema > recipe.schema.json
    """
    from ..recipe import recipe_schema  # pydantic: imported only where used (--version stays fast)

    data = recipe_schema()
    ctx.emit(data, json.dumps(data, indent=2))
