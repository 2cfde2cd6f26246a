"""``bisectbot recipe list|init|validate|schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import terminal
from ..errors import EXIT_BAD_INPUT, RecipeError
from .base import Ctx, cli, error_document, pass_ctx


@cli.group(epilog="""\b
Examples:
  bisectbot recipe list                                        # the shipped examples, by name
  bisectbot recipe validate vllm-workspace-fix-retirement     # a shipped example, by name
  bisectbot recipe init qwen3-prefill --model Qwen/Qwen3-8B --repo https://github.com/vllm-project/vllm.git \\
      --good v0.10.0 --bad main > qwen3.yaml
  bisectbot recipe validate qwen3.yaml
  bisectbot recipe schema > recipe.schema.json
""")
def recipe() -> None:
    """List, write, validate recipes and print their JSON Schema."""


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
      bisectbot recipe validate glm51-fp8-sparse-mla-prefill demo
    """
    from ..errors import BadInput
    from ..located import read_text
    from ..patches import load_stack
    from ..recipe import bisection_problems, check_patch_ids, fanout_problems, load_recipe
    from ..runner_profile import recipe_mount_clashes
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
        fan = [] if bad_ids else fanout_problems(r, read_text(f), str(f))  # issue 23: what the fan-out cannot do
        if r.regress.mode == "slower" and r.bisect.executor != "actions":
            fan = []  # issue 39 (new-user pass): every measured recipe would warn of rounds it never uses
        if bad_ids:
            problems.extend(bad_ids)
        elif fan and r.bisect.executor == "actions":  # the workflows hand this recipe to the fan-out
            problems.extend(f"{w}; bisect.executor: actions hands this recipe to bisect-fanout.yml, whose "
                            "'round plan' refuses it (set bisect.executor: local)" for w in fan)
        else:
            ok[str(f)] = r.verdict_hash()
            warnings.extend(f"{w} (warning: bisectbot run refuses this)"
                            for w in bisection_problems(r, read_text(f), str(f)))
            warnings.extend(f"{w} (warning: bisectbot round refuses this)" for w in fan)
            clashes, unchecked = recipe_mount_clashes(r, f, read_text(f))
            problems.extend(clashes)  # bisectbot run refuses these too
            if unchecked:
                warnings.append(f"{unchecked} (warning)")
    if ctx.json:
        if problems:  # the documented failure shape (issue 24, input 6): one problem per line
            ctx.emit(error_document("bad recipe", "\n".join(problems + warnings), EXIT_BAD_INPUT))
        else:
            ctx.emit({"ok": ok, "problems": problems, "warnings": warnings})
    else:
        for f, h in ok.items():
            terminal.echo(f"{f}: ok (reproducer key {h}: the probe cache key of its verdicts)")
        for p in problems + warnings:
            terminal.echo(p, err=True)
    if problems:
        sys.exit(EXIT_BAD_INPUT)
    return 0


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


@recipe.command("list")
@pass_ctx
def list_cmd(ctx: Ctx) -> None:
    """List the example recipes shipped with bisectbot (inside the installed package): name, what
    it tracks, source kind, and the file. Any command taking RECIPE takes these names.

    \b
    Example:
      bisectbot recipe list
    """
    from ..recipe import load_recipe
    from ..shipped import shipped_dir, shipped_recipes

    rows = []
    for f in shipped_recipes():
        try:
            r = load_recipe(f)
            rows.append({"name": f.stem, "recipe": r.name, "description": r.description, "source": r.source.kind,
                         "model": r.model, "path": str(f)})
        except RecipeError as e:  # a shipped file that does not load is a bug worth seeing, not a crash
            rows.append({"name": f.stem, "recipe": "", "description": f"(does not load: {e.problems[0]})",
                         "source": "", "model": "", "path": str(f)})
    where = shipped_dir("recipes")
    width = max((len(x["name"]) for x in rows), default=4)
    text = "\n".join([f"{x['name']:<{width}}  {x['source']:<8}  {x['description']}" for x in rows]
                     + [f"({len(rows)} shipped recipe{'s' if len(rows) != 1 else ''} in {where}; "
                        f"copy one from there (`cp {where}/NAME.yaml mine.yaml`) or write one with `bisectbot recipe "
                        "init` to track your own)"])
    ctx.emit({"recipes": rows, "dir": str(where) if where else None}, text)


@recipe.command("init")
@click.argument("name")
@click.option("--model", required=True, help="Model id the server serves (e.g. Qwen/Qwen3-8B).")
@click.option("--image", help="Nightly image to bisect over, REPOSITORY[:TAG] (e.g. rocm/vllm-dev:nightly_main_20260412): "
                              "a registry source whose tag pattern comes from TAG.")
@click.option("--repo", help="Git repository to bisect over (URL or path): a git source built and served by the "
                             "local runner.")
@click.option("--tp", type=click.IntRange(1, 64), default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--runner", "runner_name", default="cpu", show_default=True, help="Runner profile (runners/<name>.yaml).")
@click.option("--good", help="Known-good end (tag, commit).")
@click.option("--bad", help="Known-bad end (default: the newest nightly / the branch tip).")
@click.option("--max-size", type=click.IntRange(1000, 1_000_000), default=30000, show_default=True,
              help="Largest prompt probed, in tokens.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (never over an existing file) instead of standard output.")
@pass_ctx
def init(ctx: Ctx, name: str, model: str, image: str | None, repo: str | None, tp: int, runner_name: str,
         good: str | None, bad: str | None, max_size: int, out_file: Path | None) -> None:
    """Write a recipe NAME for a prefill-garbage question on MODEL, over nightly images (--image) or
    a git repository (--repo): the shipped GLM recipe's shape with your model, source and ends.

    \b
    The recipe is checked as `recipe validate` checks it before it is written; edit the server
    command, the reproducer sizes and report.github, then `bisectbot run NAME.yaml --dry-run`.

    \b
    Example:
      bisectbot recipe init qwen3-nightly --model Qwen/Qwen3-8B --image rocm/vllm-dev:nightly_main_20260412 --tp 2
    """
    from ..errors import BadInput
    from ..recipe import load_recipe
    from ..recipe_init import recipe_text

    if (image is None) == (repo is None):
        raise BadInput("recipe init: give one of --image REPOSITORY[:TAG] or --repo URL|PATH")
    text = recipe_text(name, model, image=image, repo=repo, tp=tp, runner=runner_name, good=good, bad=bad,
                       max_size=max_size)
    if out_file is not None and out_file.exists():
        raise BadInput(f"{out_file}: exists; recipe init never writes over a file (give another --out)")
    import tempfile

    with tempfile.TemporaryDirectory() as d:  # the text is checked as the file it will be
        check = Path(d) / f"{name}.yaml"
        check.write_text(text, encoding="utf-8")
        load_recipe(check)
    if out_file is None:
        if ctx.json:
            ctx.emit({"name": name, "recipe": text})
        else:
            terminal.echo(text, nl=False)
        return
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with open(out_file, "x", encoding="utf-8") as fh:
        fh.write(text)
    ctx.emit({"name": name, "out": str(out_file)},
             f"wrote {out_file}; next: bisectbot recipe validate {out_file} && bisectbot run {out_file} --dry-run")
