"""``bisectbot try``: does a change fix the first bad? (issue 42)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click

from .. import terminal
from ..errors import EXIT_ERROR, EXIT_INCONCLUSIVE, EXIT_OK, BadInput
from .base import Ctx, cli, pass_ctx

TRY_EPILOG = """\b
Examples:
  bisectbot try glm51-fp8-sparse-mla-prefill --patch workspace-fix.diff
  bisectbot try glm51-fp8-sparse-mla-prefill --on nightly_main_20260406 --ref my-fix-branch
  bisectbot demo && bisectbot --state bisectbot-demo-out/work/state try \\
      bisectbot-demo-out/work/demo-engine-prefill.yaml --patch fix.diff

\b
Exit codes:
  0  fixed: OK on every prompt on which the candidate failed without the change, no GARBAGE at any size asked
  1  still broken, or partly (the threshold moved; both thresholds are printed)
  2  bad input (recipe, patch, ref, a runner that cannot apply a change)
  3  untested: the candidate is not bad without the change, or the change does not apply / build / start
"""

EXIT_OF = {"fixed": EXIT_OK, "partly": EXIT_ERROR, "still broken": EXIT_ERROR, "untested": EXIT_INCONCLUSIVE}


def _change_from_ref(ctx: Ctx, recipe, path: Path, cand, ref: str, component: str | None,
                     echo=None):  # -> Change
    """The commits of ``ref`` not in the candidate ``cand`` (``git diff merge-base..ref``) in the
    repository of the recipe's git source, or of ``bisect.components[component]`` for nightlies (the
    merge base taken with the nightly's own commit of that component)."""
    from ..change import from_git
    from ..recipe import GitSource
    from ..sources.git import GitRepo, local_repo

    if isinstance(recipe.source, GitSource) and component is None:
        repo = GitRepo(local_repo(recipe.source.repo, path.parent))
        at, comp = cand.ref, ""
    else:
        comp = component or "vllm"
        src = recipe.bisect.components.get(comp)
        if src is None:
            raise BadInput(f"{path}: --ref needs bisect.components.{comp} (a git repository of {comp}) to take the "
                           "change from")
        repo = GitRepo(local_repo(src.repo, path.parent), comp)
        from ..components import image_info

        image = str(cand.meta.get("image") or "")
        at = ((image_info(image, ledger=ctx.ledger()).get(comp) or {}).get("commit") if image else None) or ""
        if not at:
            raise BadInput(f"the nightly {cand.label} names no {comp} commit (its version carries none): give "
                           "--patch with the change's diff instead")
    head = repo.resolve(ref)
    base = repo.merge_base(at, head)
    if base is None:
        raise BadInput(f"{ref} and {at[:12]} share no history in {repo.path}")
    if base == head:
        raise BadInput(f"--ref {ref} ({head[:12]}) adds nothing to the candidate {cand.label or at[:12]}: it is the "
                       "candidate or one of its ancestors")
    n = len(repo.commits(base, head)) - 1
    if n > 1 and echo is not None:  # a branch cut from a later commit carries every commit in between too
        echo(f"try: note: the change is every commit from {base[:12]} to {ref}: {n} commits; a branch cut from a "
             f"later commit than the candidate {at[:12]} carries the commits in between too (cut the fix from the "
             "candidate, or give --on)")
    return from_git(repo.path, base, head, component=comp, fuzz=2,
                    source=f"ref {ref} ({head[:12]}, {n} commit(s) on {base[:12]})")


def _request(path: Path) -> dict:
    """The resolved request's document; BadInput unless it is one (a dict with a source and a SHA-256)."""
    from ..jsonio import loads

    try:
        if not path.is_file() or path.stat().st_size > 1024 * 1024:  # a request.json is a few hundred bytes
            raise BadInput(f"{path}: not a resolved request (a regular file under 1 MiB is expected)")
        with path.open("rb") as fh:
            doc = loads(fh.read(1024 * 1024))
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: not a resolved request: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("source"), str) or not isinstance(doc.get("sha256"), str):
        raise BadInput(f"{path}: not a resolved request (report test-request's request.json: source, sha256)")
    return {k: doc[k] for k in ("kind", "source", "sha", "url", "repo", "request", "author", "link", "sha256")
            if k in doc}


@cli.command("try", epilog=TRY_EPILOG)
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--on", "on", metavar="REF", help="The candidate to try the change on (a commit of a git source, a "
              "nightly tag or digest). Default: the first bad of this recipe's last bisection in the ledger, "
              "else the newest nightly.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The change as a diff file (git diff / git format-patch; paths relative to the repository root).")
@click.option("--ref", "ref", help="The change as the commits of a git ref not in the candidate (a branch, a "
              "pull request's head SHA).")
@click.option("--request", "request_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The resolved /bisectbot test request (request.json of `report test-request`): names the change "
              "by what was asked (a ref or pull request at its SHA, a patch URL) and goes into try.json.")
@click.option("--component", help="With --ref on nightlies: the component repository (bisect.components) the ref "
              "is in (default vllm).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Where try.json and try.md go "
              "(default: the recipe's report.dir/try-<session>).")
@click.option("--runner", "runner_kind", type=click.Choice(["auto", "local", "container"]), default="auto",
              show_default=True, help="Where candidates run (auto: local for a git source, else container).")
@pass_ctx
@click.pass_context
def try_cmd(cctx: click.Context, ctx: Ctx, recipe_file: str, on: str | None, patch_file: Path | None,
            ref: str | None, component: str | None, out: Path | None, runner_kind: str,
            request_file: Path | None) -> None:
    """Probe the first bad (or --on REF) with a change applied, and answer fixed / partly / still broken.

    The candidate is probed as it is (the ledger answers when a bisection on this host measured it)
    and with the change applied after the recipe's patch stack, with the same reproducer; the
    changed probe asks first the prompts on which the candidate failed, and the two are compared on
    the same prompts. Both probes and the answer are recorded in the ledger (a session of stage
    "try", shown on the dashboard); try.json and try.md are written to --out.
    """
    from ..change import load_change
    from ..recipe import load_bisection_recipe
    from ..report.trial import render_try
    from ..session.trial import run_try
    from ..shipped import find_recipe
    from .run_cmd import _make_runner, _writer, pages_url, preflight

    if (patch_file is None) == (ref is None):
        raise BadInput("give the change as --patch FILE or --ref REF (one of them)")
    path = find_recipe(recipe_file)
    recipe = load_bisection_recipe(path)
    request = _request(request_file) if request_file is not None else None
    names = set(recipe.bisect.components) | ({getattr(recipe.source, "component", "") or Path(str(
        recipe.source.repo)).name} if recipe.source.kind == "git" else {"vllm", "aiter"})
    if component is not None and component not in names:
        raise BadInput(f"--component {component!r}: not a component of {path.name} ({', '.join(sorted(names))})")
    echo = (lambda s: None) if ctx.verbosity < 0 else (lambda s: terminal.echo(s, err=True))
    resolved = None
    if patch_file is not None:
        change = load_change(patch_file, source=str(request["source"]) if request else "",
                             component=str(component or ""))
        raw = hashlib.sha256(patch_file.read_bytes()).hexdigest() if request else ""  # its size was checked
        if request is not None and request["sha256"] != raw:
            raise BadInput(f"{request_file}: names a change of SHA-256 {request['sha256'][:16]}, but {patch_file} is "
                           f"{raw[:16]}: not the change that was resolved")
    else:
        from ..session.sources import make_source
        from ..session.trial import resolve_on

        source = make_source(recipe, path.parent, ctx.ledger())
        cand, why = resolve_on(recipe, ctx.ledger(), source, on)
        resolved = (source, cand, why)
        change = _change_from_ref(ctx, recipe, path, cand, ref, component, echo)
    with _writer(ctx, recipe_file, 0.0):
        preflight(ctx, recipe, path, runner_kind, echo)
        runner = _make_runner(ctx, recipe, path, runner_kind)
        from .. import progress

        progress.enable(None if ctx.verbosity < 0 else echo)
        outcome = run_try(recipe, ctx.ledger(), runner, change, on=on, echo=echo, base_dir=path.parent,
                          resolved=resolved)
    doc = outcome.to_dict()
    if request is not None:
        doc["request"] = request
    out_dir = Path(out) if out else Path(recipe.report.dir) / f"try-{outcome.session_id}"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "try.json").write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    site = pages_url(recipe)
    from ..dashboard.views import slug

    md = render_try(doc, probe_link=f"{site.rstrip('/')}/r/{slug(recipe.name)}.html#try-{outcome.session_id}"
                    if site else "")
    (out_dir / "try.md").write_text(md, encoding="utf-8")
    ctx.emit({**doc, "files": {"json": str(out_dir / "try.json"), "markdown": str(out_dir / "try.md")}},
             f"{outcome.verdict.words}\n(try.json and try.md in {out_dir})")
    cctx.exit(EXIT_OF.get(outcome.verdict.answer, EXIT_INCONCLUSIVE))
