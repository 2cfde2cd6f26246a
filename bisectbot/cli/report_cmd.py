"""``bisectbot report``: render a result, file it on GitHub, read maintainer commands.

The GitHub token is read from the environment (``BISECTBOT_GITHUB_TOKEN``, else ``GITHUB_TOKEN``,
else ``GH_TOKEN``), never from the command line (argv is visible to every user of the host).
"""

from __future__ import annotations

from pathlib import Path

import click

from .. import jsonio as _jsonio
from .. import terminal
from ..errors import BadInput
from .base import Ctx, cli, pass_ctx


def _target(recipe: Path | None, repo: str | None, api_url: str | None):
    from ..recipe import GitHubTarget, load_recipe

    base = None
    if recipe is not None:
        r = load_recipe(recipe)
        base = r.report.github
        if base is None and repo is None:
            raise BadInput(f"{recipe}: report.github is not set; pass --repo OWNER/NAME")
    data = base.model_dump() if base is not None else {}
    if repo:
        data["repo"] = repo
    if api_url:
        data["api_url"] = api_url
    if "repo" not in data:
        raise BadInput("no GitHub repository: pass --recipe (with report.github) or --repo OWNER/NAME")
    try:
        return GitHubTarget.model_validate(data)
    except Exception as e:  # pydantic ValidationError: one line
        raise BadInput(f"--repo/--api-url: {str(e).splitlines()[-1].strip()}") from None


def _recipe_arg(recipe: Path | None) -> Path | None:
    """``--recipe``: a path, or a shipped recipe's name as ``run``/``round`` take it (:func:`find_recipe`)."""
    if recipe is None:
        return None
    from ..shipped import find_recipe

    return find_recipe(recipe)


def _same_recipe(result, result_file: Path, recipe: Path | None) -> None:
    """Refuse (BadInput, exit 2) a result of another recipe than ``--recipe``: it would be filed in
    that recipe's repository under the wrong name (newuser defect 10)."""
    if recipe is None:
        return
    from ..recipe import load_recipe

    name = load_recipe(recipe).name
    if result.recipe != name:
        raise BadInput(f"{result_file}: result is of recipe {result.recipe!r}, not {name!r} (--recipe {recipe}); "
                       f"pass the recipe the result came from")


def _load(path: Path):
    from ..report.load import load_result

    return load_result(path)


@cli.group()
def report() -> None:
    """Render results, file or update GitHub issues, read /bisectbot commands.

    \b
    Examples:
      bisectbot demo     # writes bisectbot-demo-out/result.json
      bisectbot report render bisectbot-demo-out/result.json --out rendered/
      bisectbot report file bisectbot-demo-out/result.json --recipe bisectbot-demo-out/work/demo-engine-prefill.yaml --dry-run
      bisectbot report reply bisectbot-demo-out/result.json --recipe glm51-fp8-sparse-mla-prefill --issue 12 --comment 2345678
      bisectbot report commands --recipe glm51-fp8-sparse-mla-prefill
    """


@report.command("render")
@click.argument("result_file", metavar="RESULT.json", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default: next to RESULT.json).")
@click.option("--nightly", "nightly_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Nightly history JSON (NightlyResult.to_dict()) for the streak table and the chart.")
@pass_ctx
def render_cmd(ctx: Ctx, result_file: Path, out_dir: Path | None, nightly_file: Path | None) -> None:
    """Write report.md, report.json, issue.md (and the threshold chart) for RESULT.json."""
    from ..report import NightlyResult, write_report

    result, nightly = _load(result_file)
    if nightly_file is not None:
        try:
            nightly = NightlyResult.from_dict(_jsonio.loads(nightly_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BadInput(f"{nightly_file}: not a nightly history: {type(e).__name__}: {e}") from None
    try:
        paths = write_report(result, out_dir or result_file.parent, nightly)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        # the shape check passed but a value inside (a table row, an evidence field) is unusable
        raise BadInput(f"{result_file}: cannot render this result: {type(e).__name__}: {e}") from None
    ctx.emit({k: str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v
              for k, v in paths.__dict__.items()},
             "\n".join(f"wrote {p}" for p in paths.all()))


@report.command("file")
@click.argument("result_file", metavar="RESULT.json", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="Recipe whose report.github to use.")
@click.option("--repo", help="OWNER/NAME (overrides the recipe).")
@click.option("--api-url", help="GitHub API base URL (GitHub Enterprise; default https://api.github.com).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where would-be issue/comment Markdown and filed.json (what was filed: repository, issue "
                   "number, fingerprints; for 'dashboard --filed') go (default: next to RESULT.json).")
@click.option("--newest", "newest_file", type=click.Path(dir_okay=False, path_type=Path),
              help="ProbeResult JSON of the re-test on the newest nightly; not reproducing there files nothing.")
@click.option("--dry-run", is_flag=True, help="Send nothing; write the would-be Markdown.")
@click.option("--commands", "commands_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The maintainer commands the run took (--json report commands --all): each not yet "
                   "acknowledged gets its reply after filing (needs --recipe).")
@pass_ctx
def file_cmd(ctx: Ctx, result_file: Path, recipe: Path | None, repo: str | None, api_url: str | None,
             out_dir: Path | None, newest_file: Path | None, dry_run: bool, commands_file: Path | None) -> None:
    """File RESULT.json as a GitHub issue, or comment on the open issue with the same fingerprint.

    Token: $BISECTBOT_GITHUB_TOKEN, $GITHUB_TOKEN or $GH_TOKEN; without one this is a dry run.
    """
    from ..models import ProbeResult
    from ..report.github import file_or_update, token_from_env

    result, nightly = _load(result_file)
    recipe = _recipe_arg(recipe)
    _same_recipe(result, result_file, recipe)
    target = _target(recipe, repo, api_url)
    newest = None
    if newest_file is not None:
        try:
            newest = ProbeResult.from_dict(_jsonio.loads(newest_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BadInput(f"{newest_file}: not a ProbeResult: {type(e).__name__}: {e}") from None
    bc = 0.66
    if recipe is not None:
        from ..recipe import load_recipe

        bc = load_recipe(recipe).bisect.blame_confidence
    png = result_file.parent / "threshold.png"  # the chart `run` or `report render` wrote beside it
    out = file_or_update(result, target, token_from_env(), ctx.ledger(), dry_run, out_dir or result_file.parent,
                         nightly=nightly, newest=newest, blame_confidence=bc,
                         chart_png=png if png.is_file() else None)
    from ..report.filed import write_filed

    # for the ledger that did not file it (nightly.yml: the file job's artifact -> the pages job)
    write_filed(out_dir or result_file.parent, result, target.repo, out)
    if commands_file is not None and recipe is not None and not dry_run and token_from_env():
        from ..errors import GitHubError, UpstreamUnreachable
        from ..recipe import load_recipe
        from .run_cmd import _acknowledge, load_commands

        commands, _ = load_commands(commands_file)
        try:
            for line in _acknowledge(load_recipe(recipe), commands, result, out):
                terminal.echo(f"github: {line}", err=True)
        except (GitHubError, UpstreamUnreachable) as e:  # the next night acknowledges them
            terminal.echo(f"github: acknowledging maintainer commands failed: {e}", err=True)
    ctx.emit(out.to_dict(), out.message)


@report.command("reply")
@click.argument("result_file", metavar="[RESULT.json]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--issue", "issue_number", type=click.IntRange(min=1), required=True,
              help="Issue the /bisectbot bisect request was made on.")
@click.option("--comment", "comment_id", type=click.IntRange(min=1), required=True,
              help="Id of the request's comment (github.event.comment.id).")
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="Recipe whose report.github to use.")
@click.option("--repo", help="OWNER/NAME (overrides the recipe).")
@click.option("--api-url", help="GitHub API base URL.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the would-be reply goes in a dry run (default: next to RESULT.json).")
@click.option("--failed", "run_url", metavar="URL",
              help="No result: say the bisection failed, linking this job log (instead of RESULT.json).")
@click.option("--dry-run", is_flag=True, help="Send nothing; write the would-be reply.")
@pass_ctx
def reply_cmd(ctx: Ctx, result_file: Path | None, issue_number: int, comment_id: int, recipe: Path | None,
              repo: str | None, api_url: str | None, out_dir: Path | None, run_url: str | None,
              dry_run: bool) -> None:
    """Answer a maintainer's /bisectbot bisect comment with RESULT.json (one reply, never twice),
    or with --failed URL say that the bisection failed (once; a later result still answers).

    The comment must be a /bisectbot bisect request by an OWNER, MEMBER or COLLABORATOR.
    Token: $BISECTBOT_GITHUB_TOKEN, $GITHUB_TOKEN or $GH_TOKEN; without one this is a dry run.

    \b
    Example:
      bisectbot report reply bisectbot-demo-out/result.json --recipe glm51-fp8-sparse-mla-prefill \\
        --issue 12 --comment 2345678 --dry-run
    """
    from ..report.github import token_from_env
    from ..report.reply import reply_failure, reply_with_result

    if (result_file is None) == (run_url is None):
        raise BadInput("give RESULT.json or --failed URL (one of them)")
    recipe = _recipe_arg(recipe)
    target = _target(recipe, repo, api_url)
    if run_url is not None:
        out = reply_failure(target, token_from_env(), issue_number, comment_id, run_url, out_dir or Path("."),
                            dry_run=dry_run)
        ctx.emit(out.to_dict(), out.message)
        return
    result, nightly = _load(result_file)
    bc = 0.66
    if recipe is not None:
        from ..recipe import load_recipe

        bc = load_recipe(recipe).bisect.blame_confidence
    out = reply_with_result(result, target, token_from_env(), issue_number, comment_id, out_dir or result_file.parent,
                            nightly=nightly, dry_run=dry_run, blame_confidence=bc)
    ctx.emit(out.to_dict(), out.message)


@report.command("commands")
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), help="Recipe whose report.github to use.")
@click.option("--repo", help="OWNER/NAME (overrides the recipe).")
@click.option("--api-url", help="GitHub API base URL.")
@click.option("--issue", "issues", type=int, multiple=True, help="Issue number (repeatable; default: open bot issues).")
@click.option("--all", "include_ack", is_flag=True, help="Include commands already acknowledged.")
@pass_ctx
def commands_cmd(ctx: Ctx, recipe: Path | None, repo: str | None, api_url: str | None, issues: tuple[int, ...],
                 include_ack: bool) -> None:
    """List /bisectbot commands (retract, good REF, bad REF, bisect good= bad=) from trusted maintainers."""
    from ..report.github import read_commands, token_from_env

    token = token_from_env()
    if not token:
        raise BadInput("reading commands needs a token in $BISECTBOT_GITHUB_TOKEN or $GITHUB_TOKEN")
    cmds = read_commands(_target(_recipe_arg(recipe), repo, api_url), token, list(issues) or None,
                         include_acknowledged=include_ack)
    lines = [f"#{c.issue} {c.kind}{' ' + c.ref if c.ref else ''}"
             f"{''.join(f' {k}={v}' for k, v in sorted(c.args.items()))} by {c.author} ({c.association})"
             f"{' [acknowledged]' if c.acknowledged else ''}{' error: ' + c.error if c.error else ''}"
             for c in cmds]
    ctx.emit([c.to_dict() for c in cmds], "\n".join(lines) or "(no pending commands)")


@report.command("test-request")
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Recipe whose report.github (the issues) and bisect.components (the repository of a ref) to use.")
@click.option("--issue", "issue_number", type=click.IntRange(min=1), required=True, help="Issue of the request.")
@click.option("--comment", "comment_id", type=click.IntRange(min=1), required=True,
              help="Id of the /bisectbot test comment (github.event.comment.id).")
@click.option("--component", help="Component whose GitHub repository holds a ref or pull request (default vllm).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where change.diff and request.json go.")
@pass_ctx
def test_request_cmd(ctx: Ctx, recipe: Path, issue_number: int, comment_id: int, component: str | None,
                     out_dir: Path) -> None:
    """Resolve a maintainer's /bisectbot test request into a diff pinned by SHA (runs no candidate).

    The comment is read again from GitHub: an issue the bot filed, an OWNER/MEMBER/COLLABORATOR, a
    well-formed command. A ref or pull request is resolved to its head SHA now (or the sha= the
    maintainer named) and its diff against the default branch taken at that SHA; a patch URL is
    fetched without a credential. Writes OUT/change.diff and OUT/request.json.
    Token: $BISECTBOT_GITHUB_TOKEN, $GITHUB_TOKEN or $GH_TOKEN.

    \b
    Example:
      bisectbot report test-request --recipe glm51-fp8-sparse-mla-prefill --issue 12 --comment 2345678 --out change
    """
    from ..recipe import load_recipe
    from ..report.github import token_from_env
    from ..report.try_request import component_repo, resolve_request

    token = token_from_env()
    if not token:
        raise BadInput("resolving a request needs a token in $BISECTBOT_GITHUB_TOKEN or $GITHUB_TOKEN")
    path = _recipe_arg(recipe)
    assert path is not None
    doc = resolve_request(_target(path, None, None), token, issue_number, comment_id, out_dir,
                          repo=component_repo(load_recipe(path), component))
    ctx.emit(doc, f"{doc['source']}: {out_dir / 'change.diff'} (sha256 {doc['sha256'][:16]})")


@report.command("try-reply")
@click.argument("try_file", metavar="[TRY.json]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--recipe", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Recipe whose report.github to use.")
@click.option("--issue", "issue_number", type=click.IntRange(min=1), required=True, help="Issue of the request.")
@click.option("--comment", "comment_id", type=click.IntRange(min=1), required=True,
              help="Id of the /bisectbot test comment.")
@click.option("--failed", "run_url", metavar="URL", help="No answer: say the try job failed, linking this job log.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the would-be reply goes in a dry run (default: next to TRY.json).")
@click.option("--dry-run", is_flag=True, help="Send nothing; write the would-be reply.")
@pass_ctx
def try_reply_cmd(ctx: Ctx, try_file: Path | None, recipe: Path, issue_number: int, comment_id: int,
                  run_url: str | None, out_dir: Path | None, dry_run: bool) -> None:
    """Answer a maintainer's /bisectbot test comment with the try job's TRY.json (once), or with
    --failed URL say that the try job failed.

    \b
    Example:
      bisectbot --json try glm51-fp8-sparse-mla-prefill --patch fix.diff > try.json
      bisectbot report try-reply try.json --recipe glm51-fp8-sparse-mla-prefill --issue 12 --comment 2345678 --dry-run
    """
    from ..jsonio import loads
    from ..recipe import load_recipe
    from ..report.github import token_from_env
    from ..report.try_request import reply_try
    from .run_cmd import pages_url

    if (try_file is None) == (run_url is None):
        raise BadInput("give TRY.json or --failed URL (one of them)")
    path = _recipe_arg(recipe)
    assert path is not None
    doc = None
    if try_file is not None:
        try:
            doc = loads(try_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BadInput(f"{try_file}: not a try job's try.json: {e}") from None
        if not isinstance(doc, dict) or doc.get("kind") != "try":
            raise BadInput(f"{try_file}: not a try job's try.json (no \"kind\": \"try\")")
    from ..dashboard.views import slug

    rec = load_recipe(path)
    site = pages_url(rec)
    link = f"{site.rstrip('/')}/r/{slug(rec.name)}.html#try-{doc.get('session')}" if site and doc else ""
    out = reply_try(_target(path, None, None), token_from_env(), issue_number, comment_id,
                    out_dir or (try_file.parent if try_file else Path(".")), doc=doc, run_url=run_url,
                    dry_run=dry_run, probe_link=link)
    ctx.emit(out.to_dict(), out.message)
