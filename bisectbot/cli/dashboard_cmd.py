"""``bisectbot dashboard``: render the static site of the ledger (:mod:`bisectbot.dashboard`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import EXIT_BAD_INPUT, BadInput
from .base import Ctx, cli, pass_ctx

DASHBOARD_EPILOG = """\b
Examples:
  bisectbot demo && bisectbot --state bisectbot-demo-out/work/state dashboard --out site/   # open site/index.html
  bisectbot dashboard --out site/ --recipes recipes/ --report bisectbot-demo-out/report.json \\
      --job-url https://github.com/o/r/actions/runs/123   # after a night (nightly.yml: --report out/)
"""


def _recipes(paths: tuple[Path, ...]) -> dict:
    from ..recipe import load_recipe

    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
        elif p.is_file():
            files.append(p)
        else:
            raise BadInput(f"--recipes {p}: no such file or directory")
    out = {}
    for f in files:
        r = load_recipe(f)  # a broken recipe names file, line and field
        out[r.name] = r
    return out


@cli.command("dashboard", epilog=DASHBOARD_EPILOG)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Site directory (kept between nights: only changed pages are rendered again).")
@click.option("--recipes", "recipe_paths", multiple=True, type=click.Path(path_type=Path),
              help="Recipe files or directories: kind, threshold-below and max size of each recipe (repeatable).")
@click.option("--report", "reports", multiple=True, type=click.Path(path_type=Path),
              help="report.json of tonight's runs (a file, or a directory searched for them), archived under the "
                   "state directory: the chain of stages, the issue fingerprint and the job log (repeatable).")
@click.option("--filed", "filed", multiple=True, type=click.Path(path_type=Path),
              help="filed.json of tonight's 'report file' (a file, or a directory searched for them), recorded in "
                   "this ledger's issues first: a filing made where another ledger lives (nightly.yml's hosted "
                   "'file' job) is linked from the site (repeatable).")
@click.option("--job-url", default="", help="Job-log URL of the run(s) that wrote --report (http or https).")
@click.option("--github-url", default="https://github.com", show_default=True,
              help="Web address issue links start with (a GitHub Enterprise server's).")
@pass_ctx
def dashboard(ctx: Ctx, out: Path, recipe_paths: tuple[Path, ...], reports: tuple[Path, ...],
              filed: tuple[Path, ...], job_url: str, github_url: str) -> None:
    """Render the static dashboard of the ledger into OUT (no server, no JavaScript).

    \b
    Pages: index.html (every recipe: last night, streak, flips over 30 nights, open issue),
    r/<recipe>.html (threshold over time, nights, bisections, patch stack), b/<key>.html (one
    bisection: chain of stages, probes with evidence, session logs). Model output is shown as
    inert text. It reads the ledger and writes only its issue table, with --filed.
    Exit codes: 0 rendered, 1 error, 2 bad input (a recipe or report that is not one).
    """
    from ..dashboard import build_dashboard
    from ..dashboard.safe import safe_url

    if job_url and safe_url(job_url) is None:
        raise BadInput(f"--job-url {job_url[:80]!r}: not a plain http(s) URL")
    if safe_url(github_url) is None:
        raise BadInput(f"--github-url {github_url[:80]!r}: not a plain http(s) URL")
    led = ctx.ledger()
    state = led.state_dir
    recorded = []
    refused: list[str] = []
    recipes = _recipes(recipe_paths)
    if filed:
        from ..report.filed import recipe_targets, record_filed

        # with --recipes, a filing counts only for its recipe's own repositories (issue 41, item 14)
        targets = {name: recipe_targets(r) for name, r in recipes.items()} if recipe_paths else None
        recorded = record_filed(led, [Path(p) for p in filed], targets, refused)
    stats = build_dashboard(state, out.resolve(), reports=[Path(p) for p in reports], job_url=job_url,
                            recipes=recipes, github_url=github_url)
    for line in refused:
        click.echo(line, err=True)
    if ctx.json:
        ctx.emit({"out": str(out.resolve()), "rendered": stats.rendered, "unchanged": stats.unchanged,
                  "removed": stats.removed, "seconds": round(stats.seconds, 3), "written": stats.written,
                  "charts": stats.charts, "filed": [f"{r}#{n}" for r, n in recorded]})
    else:
        click.echo(f"dashboard: {stats.line()}: {out.resolve() / 'index.html'}")
    if refused:  # rendered with what was genuine; the refused filings fail the job so that someone looks
        sys.exit(EXIT_BAD_INPUT)
