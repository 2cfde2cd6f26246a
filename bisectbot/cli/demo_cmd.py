"""``bisectbot demo``: the whole main job on the embedded default, no GPU, Docker, token or network.

The demo writes a temporary git history of the reference engine
(:func:`bisectbot.demo.history.make_history`), fills its path into the embedded recipe
(``bisectbot/demo/recipe.yaml``, the same as ``recipes/demo.yaml``) and runs exactly what
``bisectbot run RECIPE --runner local --out OUT`` runs (:func:`bisectbot.cli.run_cmd._run`):
build each candidate in a git worktree, start its server, run the prefill-threshold
reproducer, bisect, verify, triage and write the report. Without a GitHub token the
would-be issue is written to the output directory as Markdown.

Exit codes: 0 when the culprit found is the commit the history planted the regression
at, 1 otherwise (the message says what was found instead), 2 bad input.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

from .. import jsonio as _jsonio
from .. import sandbox, terminal
from ..errors import EXIT_ERROR, EXIT_OK, BadInput
from ..sandbox import SandboxUnavailable
from .base import Ctx, absolute_path, cli, error_document, pass_ctx

#: Default output directory (relative to the current directory).
DEFAULT_OUT = "bisectbot-demo-out"


def demo_recipe_text() -> str:
    """The embedded demo recipe (package data ``bisectbot/demo/recipe.yaml``) as YAML text."""
    return resources.files("bisectbot.demo").joinpath("recipe.yaml").read_text(encoding="utf-8")


def concrete_recipe(repo: Path, out: Path, python: str = sys.executable) -> dict[str, Any]:
    """The demo recipe as a mapping with ``source.repo`` = ``repo``, ``report.dir`` = ``out`` and
    every ``python3`` argv[0] (build and server command) replaced by ``python``."""
    data = yaml.safe_load(demo_recipe_text())
    data["source"]["repo"] = str(repo)
    data.setdefault("report", {})["dir"] = str(out)
    server = data.get("server", {})
    for key in ("command", "build_command"):
        argv = server.get(key)
        if argv and argv[0] in ("python3", "python"):
            server[key] = [python, *argv[1:]]
    return data


def subtle_recipe(data: dict[str, Any]) -> dict[str, Any]:
    """The demo recipe for ``demo --subtle`` (issue 18): a question without a checkable answer,
    the good end as the reference (``{candidate: last-good}``), regress ``garbage, diverges``
    and the decode control. ``data`` is changed in place and returned."""
    rep = data.setdefault("reproducer", {})
    rep.update(question="Summarize the document in two sentences.", expected_answer=None, needles=0,
               reference={"candidate": "last-good", "continuation_tokens": 32, "prompt_logprobs": True},
               control={"items": 300})
    data["name"] = "demo-engine-subtle"
    data["description"] = ("Demo engine answers fluently from the wrong part of the prompt above a threshold "
                           "(seen only by comparison with the last good build)")
    data["regress"] = "garbage, diverges"
    return data


def _result_json(out: Path) -> tuple[Path, dict[str, Any]] | None:
    """``result.json`` (a :meth:`RunResult.to_dict`) that ``bisectbot run`` wrote into ``out``."""
    p = out / "result.json"
    try:
        return p, _jsonio.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_would_be_issue(ctx: Ctx, recipe_path: Path, out: Path, since: float) -> list[Path]:
    """The would-be GitHub issue of the run in ``out`` (``issue.md``, written with the report by
    :func:`bisectbot.session.write_report` since ``since``, a POSIX time). Returns the paths."""
    return sorted(p for p in [*out.glob("issue.md"), *out.glob("issue-*.md")] if p.stat().st_mtime >= since)


@cli.command("demo")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Where the report, its JSON and the would-be GitHub issue are written.")
@click.option("--state", "state_dir", type=click.Path(file_okay=False, path_type=Path),
              callback=lambda _c, _p, v: absolute_path(v),
              help="Ledger directory (default: the global --state, else OUT/work/state with --keep, a "
                   "temporary one with --no-keep; the demo's own history is new each time, so it probes afresh).")
@click.option("--keep/--no-keep", default=True, show_default=True,
              help="Keep the engine history, the recipe and the ledger under OUT/work, so the report's "
                   "Reproduce command works after the demo; --no-keep removes them.")
@click.option("--commits", type=click.IntRange(8, 400), default=40, show_default=True,
              help="Commits in the engine history.")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of the history (where the regression and the broken commits are).")
@click.option("--subtle", is_flag=True, default=False,
              help="A regression the text classifier cannot see: above the threshold the engine answers "
                   "fluently from the wrong part of the prompt; the good end serves as the reference beside "
                   "each candidate and divergence is the bad verdict (issue 18).")
@pass_ctx
@click.pass_context
def demo(cctx: click.Context, ctx: Ctx, out: Path, state_dir: Path | None, keep: bool, commits: int,
         seed: int, subtle: bool = False) -> None:
    """Run the whole main job on the embedded default: no GPU, Docker, token or network.

    \b
    Writes a temporary git history of the reference engine (its prefill threshold
    drops below the probe sizes at one commit; a few commits do not build), then
    runs what `bisectbot run` runs on the embedded recipe (recipes/demo.yaml) with
    the local runner: build, start the server, probe, bisect, verify, report.

    \b
    Example:
      bisectbot demo --out /tmp/demo --keep
    Exit codes: 0 the planted culprit was found, 1 anything else.
    """
    from ..demo.history import BRANCH, GOOD_TAG, LOW_THRESHOLD, SUBTLE_THRESHOLD, make_history
    from .run_cmd import _run

    if shutil.which("git") is None:
        raise BadInput("bisectbot demo needs git on PATH for the engine history and its worktrees "
                       "(Debian/Ubuntu: apt-get install git)")
    t0 = time.monotonic()
    started = time.time() - 1
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work" if keep else Path(tempfile.mkdtemp(prefix="bisectbot-demo-"))
    if keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    state = state_dir or ctx.state_dir or work / "state"
    ctx.state_dir = Path(state)
    ctx._ledger = None
    def say(line: str = "", err: bool = False) -> None:  # with --json, the one document says it all
        terminal.echo(line, err=err or ctx.json)

    if sandbox.enabled():
        try:
            sandbox.require()
        except SandboxUnavailable as e:
            # the demo's candidates are the bot's own reference engine (bisectbot/demo/history.py
            # writes every commit): no stranger's code runs, so the demo runs them unconfined where
            # the host has no sandbox; a real recipe still fails closed (README, 'Sandbox')
            os.environ[sandbox.MODE_ENV] = "off"
            say(f"bisectbot demo: no candidate sandbox on this host ({str(e).split('; or run candidates unconfined')[0]}); the demo's "
                f"candidates are the bot's own reference engine, so they run unconfined here. A real recipe "
                f"stops instead (README, 'Sandbox').", err=True)
    try:
        hist = make_history(work / "engine-history", commits=commits, seed=seed, subtle=subtle)
        data = concrete_recipe(hist.path, out)
        recipe_path = work / "demo-engine-prefill.yaml"
        if subtle:
            data = subtle_recipe(data)
            recipe_path = work / "demo-engine-subtle.yaml"
        recipe_path.write_text("# written by `bisectbot demo` from bisectbot/demo/recipe.yaml\n"
                               + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        say(f"bisectbot demo: a history of {commits} commits of the reference engine in {hist.path}")
        what = (f"one commit in between makes the engine answer fluently from the wrong part of the prompt above "
                f"~{SUBTLE_THRESHOLD} prompt tokens (no text statistic sees it), " if subtle else
                f"one commit in between makes the engine return garbage above ~{LOW_THRESHOLD} prompt tokens, ")
        say(f"  good end {GOOD_TAG} ({hist.shas[hist.good][:12]}), bad end {BRANCH} ({hist.shas[-1][:12]}); " + what
            + f"{len(hist.unbuildable)} commits do not build and {len(hist.broken)} engine does not start")
        say(f"  running: bisectbot --state {state} run {recipe_path} --runner local --out {out}"
            f"   (progress below; one line per probe)")
        _run(ctx, str(recipe_path), None, None, False, None, str(out), "local", None, True, emit=False,
             reproducible="" if keep else "no Reproduce command: the demo removed its engine history and ledger "
                                          "(--no-keep); bisectbot demo --keep keeps them for one")
        issue = write_would_be_issue(ctx, recipe_path, out, started)
        found = _result_json(out)
        elapsed = time.monotonic() - t0
        if found is None:
            say(f"demo: FAILED: no run result was written to {out}", err=True)
            if ctx.json:
                ctx.emit(error_document("demo", f"no run result was written to {out}", EXIT_ERROR))
            cctx.exit(EXIT_ERROR)
        jpath, res = found
        final = (res.get("stages") or [{}])[-1]
        fb = (final.get("first_bad") or {}).get("ref")
        say("")
        if res.get("status") == "culprit" and fb == hist.culprit:
            say(f"demo: found the planted regression in {elapsed:.0f}s: commit {hist.first_bad + 1} of {commits}, "
                f"{hist.culprit[:12]} \"{hist.subjects[hist.first_bad]}\" (verified)")
            code = EXIT_OK
        else:
            got = f"{res.get('status')}" + (f", first bad {fb[:12]}" if fb else "")
            say(f"demo: FAILED: expected the culprit {hist.culprit[:12]} \"{hist.subjects[hist.first_bad]}\", "
                f"bisectbot found: {got} ({final.get('message', '')})", err=True)
            code = EXIT_ERROR
        say(f"report: {out / 'report.md'}  (JSON: {jpath})")
        if issue:
            say(f"would-be GitHub issue (no token, not filed): {issue[0]}")
        if keep:
            # the hint runs as printed: the opt-out this demo ran under, if any (issue 41: without it
            # a host with no sandbox stops the re-run)
            off = "" if sandbox.enabled() else f"{sandbox.MODE_ENV}=off "
            say(f"kept: history {hist.path}, recipe {recipe_path}, ledger {state}; "
                f"re-run with: {off}bisectbot --state {state} run {recipe_path}")
        if ctx.json:
            ctx.emit({"demo": {"ok": code == EXIT_OK, "expected_culprit": hist.culprit,
                               "expected_position": hist.first_bad + 1, "commits": commits, "seed": seed,
                               "elapsed_s": round(elapsed, 1), "report": str(out / "report.md"),
                               "result_json": str(jpath), "issue": str(issue[0]) if issue else None,
                               "kept": {"history": str(hist.path), "recipe": str(recipe_path),
                                        "state": str(state)} if keep else None},
                      "result": res, "exit_code": code})
        cctx.exit(code)
    finally:
        if ctx._ledger is not None:
            try:
                ctx._ledger.close()
            except Exception:  # pragma: no cover - closing is best effort
                pass
            ctx._ledger = None
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
