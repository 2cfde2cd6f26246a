"""``bisectbot launch RECIPE REF``: one candidate's server, up for a maintainer to poke by hand.

mozregression's ``--launch``: the candidate is prepared exactly as a probe prepares it (the
recipe's runner: a worktree and its build for a git source, the derived image for nightlies; the
patch stack; the runner profile's environment), its server started, its endpoint printed, and
everything kept until Ctrl-C (or SIGTERM), then stopped and cleaned up as after a probe. Nothing
is probed and the ledger is not written.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import click

from .. import terminal
from ..errors import EXIT_ERROR
from .base import Ctx, cli, pass_ctx

LAUNCH_EPILOG = """\b
Examples:
  bisectbot --state bisectbot-demo-out/work/state launch bisectbot-demo-out/work/demo-engine-prefill.yaml v0.4.0
  bisectbot launch glm51-fp8-sparse-mla-prefill nightly_main_20260412     # a shipped recipe, by name
  bisectbot launch glm51-fp8-sparse-mla-prefill nightly_main_20260412 --toggle aiter-mla-off   # a triage toggle
"""


def curl_line(base_url: str, model: str) -> str:
    """A one-line request a maintainer can paste to try the server (a short chat completion)."""
    body = json.dumps({"model": model or "default", "max_tokens": 64, "temperature": 0,
                       "messages": [{"role": "user", "content": "What is 2+2? Answer in one sentence."}]})
    return (f"curl -s {base_url}/v1/chat/completions -H 'Content-Type: application/json' "
            f"-d '{body}'")


@cli.command("launch", epilog=LAUNCH_EPILOG)
@click.argument("recipe_file", metavar="RECIPE")
@click.argument("ref", metavar="REF")
@click.option("--runner", "runner_kind", type=click.Choice(["auto", "local", "container"]), default="auto",
              show_default=True, help="How to prepare and run the candidate (auto: local for a git source, "
                                      "container for nightlies), as `run` would.")
@click.option("--toggle", default="", help="A triage toggle of the recipe to apply (its env and server args).")
@click.option("--for", "hold_s", type=click.FloatRange(min=0), default=None,
              help="Stop after this many seconds instead of waiting for Ctrl-C (scripts, CI).")
@pass_ctx
def launch(ctx: Ctx, recipe_file: str, ref: str, runner_kind: str, toggle: str, hold_s: float | None) -> int:
    """Start candidate REF of RECIPE as a probe would (build, patch stack, runner profile), print its
    endpoint and keep it up until Ctrl-C.

    \b
    RECIPE is a path or a shipped recipe's name (`bisectbot recipe list`); REF a commit (any
    name git resolves: the full SHA is printed), a nightly tag or digest. A command recipe has
    no server: its prepared tree is printed and kept instead. Exit 0 after Ctrl-C, 1 when the
    candidate cannot be prepared or its server never becomes healthy, 2 on bad input.
    """
    from ..errors import ServerError
    from ..recipe import load_recipe
    from ..run.base import PrepareFailed
    from ..session.lock import probe_dir
    from ..session.rounds.plan import candidate_for
    from ..shipped import find_recipe
    from .round_cmd import _probe_root, triage_toggle
    from .run_cmd import _make_runner, _sigterm_as_interrupt

    path = find_recipe(recipe_file)
    recipe = load_recipe(path)
    tog = triage_toggle(recipe, toggle, path)
    cand = candidate_for(recipe, ref, path.parent)
    say = (lambda s: None) if ctx.verbosity < 0 else (lambda s: terminal.echo(s, err=True))
    stop = threading.Event()

    def hold() -> None:
        say("up until Ctrl-C" if hold_s is None else f"up for {hold_s:g} s (--for)")
        stop.wait(hold_s)

    with _sigterm_as_interrupt(), probe_dir(_probe_root(ctx, recipe)) as work:
        runner = _make_runner(ctx, recipe, Path(path), runner_kind, workdir=work)
        say(f"preparing {recipe.name} at {cand.ref} ({cand.label or cand.ref}) as a probe would ...")
        prepared = runner.prepare(cand)
        if isinstance(prepared, PrepareFailed):
            terminal.echo(f"cannot prepare {cand.ref}: {prepared.reason}", err=True)
            for p in prepared.log_paths:
                terminal.echo(f"log: {p}", err=True)
            return EXIT_ERROR
        try:
            patches = ", ".join(f"{p.get('id')} {p.get('label') or p.get('state')}" for p in prepared.patches)
            doc = {"recipe": recipe.name, "ref": cand.ref, "label": cand.label, "build_key": prepared.build_key,
                   "patches": prepared.patches, "source": str(prepared.source) if prepared.source else None,
                   "image": prepared.image, "endpoint": None, "model": recipe.model}
            if recipe.reproducer.kind == "command":
                doc["log_paths"] = list(prepared.log_paths)
                ctx.emit(doc, f"prepared tree: {prepared.source or prepared.image}\nbuild key: {prepared.build_key}"
                              + (f"\npatches: {patches}" if patches else "")
                              + "\n(a command recipe starts no server)")
                try:
                    hold()
                except KeyboardInterrupt:
                    pass
                return 0
            try:
                with runner.server(prepared, tog.env if tog else None, tog.args if tog else None) as srv:
                    doc.update(endpoint=srv.base_url, server_log=str(srv.log_path) if srv.log_path else None,
                               curl=curl_line(srv.base_url, recipe.model))
                    ctx.emit(doc, "\n".join(
                        [f"endpoint: {srv.base_url}", f"model: {recipe.model or '-'}",
                         f"build key: {prepared.build_key}"]
                        + ([f"patches: {patches}"] if patches else [])
                        + ([f"server log: {srv.log_path}"] if srv.log_path else [])
                        + [f"try: {doc['curl']}",
                           f"probe: bisectbot probe --endpoint {srv.base_url} --recipe {recipe.name if _shipped(path) else path}"]))
                    try:
                        hold()
                    except KeyboardInterrupt:
                        pass
                    say("stopping the server ...")
            except ServerError as e:
                terminal.echo(f"server of {cand.ref} did not come up: {e}", err=True)
                return EXIT_ERROR
        finally:
            runner.release(prepared)
    say("stopped; worktree and server cleaned up")
    return 0


def _shipped(path: Path) -> bool:
    from ..shipped import shipped_dir

    d = shipped_dir("recipes")
    return d is not None and Path(path).resolve().parent == d.resolve()
