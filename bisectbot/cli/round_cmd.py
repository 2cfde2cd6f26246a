"""``bisectbot round plan|probe|import``: a bisection as rounds whose probes run anywhere.

The state between calls is the ledger only (see :mod:`bisectbot.session.rounds.plan`).
``plan`` and ``import`` are writers (they hold the recipe's writer lock,
:mod:`bisectbot.session.lock`); ``probe`` writes no ledger row and runs in parallel freely.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click

from .. import terminal
from ..errors import EXIT_BAD_INPUT, EXIT_ERROR, BadInput
from ..models import PromptKey
from .base import Ctx, cli, pass_ctx

_RUNNER = click.option("--runner", "runner_kind", type=click.Choice(["auto", "local", "container", "release"]),
                       default="auto", show_default=True, help="Where candidates run.")
_WAIT = click.option("--wait-lock", type=float, default=60.0, show_default=True, metavar="SECONDS",
                     help="Wait this long for another writer of the recipe's state (negative: forever).")


@cli.group("round")
def round_group() -> None:
    """Drive a bisection in rounds of K probes that run anywhere (plan -> probe x K -> import).

    \b
    Examples (after 'bisectbot demo'; S, SHA, KEY and N come from plan.json):
      bisectbot round plan demo-command --slots 4 > plan.json
      bisectbot round probe demo-command --session S --ref SHA --key KEY --round N [--focus SIZES] --out - > v1.json
      bisectbot round import demo-command --session S v1.json
      bisectbot round plan demo-command --session S     # the next round, or done + result
    """


def _load(recipe_file: str):  # -> (Recipe, Path)
    from ..recipe import load_bisection_recipe
    from ..shipped import find_recipe

    path = find_recipe(recipe_file)
    return load_bisection_recipe(path), path


def _load_for_rounds(recipe_file: str):  # -> (Recipe, Path)
    """:func:`_load`, also refusing what planned rounds cannot do (:func:`bisectbot.recipe.fanout_problems`,
    e.g. a ``last-good`` reference): raises :class:`bisectbot.recipe.RecipeError` (exit 2) before any
    candidate is built or served."""
    from ..located import read_text
    from ..recipe import RecipeError, fanout_problems

    recipe, path = _load(recipe_file)
    problems = fanout_problems(recipe, read_text(path), str(path))
    if problems:
        raise RecipeError(problems)
    return recipe, path


def triage_toggle(recipe, name: str | None, path: Path):  # -> TriageToggle | None
    """The recipe's triage toggle ``name`` (``None`` when no name is given); raises
    :class:`BadInput` naming the recipe file and the toggles it has when there is none of that name."""
    if not name:
        return None
    tog = next((t for t in recipe.triage if t.name == name), None)
    if tog is None:
        have = ", ".join(t.name for t in recipe.triage) or "none"
        raise BadInput(f"{path}: no triage toggle {name!r} (have: {have})")
    return tog


def _session_row(ctx: Ctx, recipe, session_id: str) -> dict:
    row = ctx.ledger().get_session(session_id)
    if row is None or (row.get("state") or {}).get("kind") != "rounds":
        raise BadInput(f"no round session {session_id!r} in {ctx.ledger().state_dir} "
                       "(start one with 'bisectbot round plan RECIPE --slots K')")
    if row["recipe"] != recipe.name:
        raise BadInput(f"round session {session_id} belongs to recipe {row['recipe']!r}, not {recipe.name!r}")
    return row


def _replay(ctx: Ctx, recipe, path: Path, good: str, bad: str, session_id: str, slots: int, runner_kind: str):
    """Clean up after dead probes, then replay the session from the ledger: ``(plan, result)``."""
    from ..run.local import LocalRunner
    from ..session import Session
    from ..session.lock import cleanup_free_probe_dirs
    from ..session.rounds.plan import PlanningExecutor, plan_round
    from .run_cmd import _make_runner

    runner = _make_runner(ctx, recipe, path, runner_kind)
    if isinstance(runner, LocalRunner):
        repos = {n: r.path for n, r in runner.repos.items()}
        cleanup_free_probe_dirs(_probe_root(ctx, recipe),
                                lambda d: LocalRunner(recipe, repos, workdir=d).cleanup_stale())
    recipe.bisect.parallel = slots
    echo = (lambda s: terminal.echo(s, err=True)) if ctx.verbosity > 0 else None
    session = Session(recipe, ctx.ledger(), runner, echo=echo, base_dir=path.parent, prefetch=False,
                      recipe_path=str(path), executor=PlanningExecutor(slots))
    return plan_round(session, good, bad, session_id, slots)


def _probe_root(ctx: Ctx, recipe) -> Path:
    from ..session.lock import _safe

    return ctx.ledger().state_dir / "worktrees" / _safe(recipe.name) / "probes"


@round_group.command("plan")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--slots", type=click.IntRange(1, 64), help="Probes per round (free runners). Fixed per session.")
@click.option("--session", "session_id", help="Continue this round session (default: the one of RECIPE's ends).")
@click.option("--good", help="Known-good candidate (new sessions).")
@click.option("--bad", help="Known-bad candidate (new sessions).")
@click.option("--out", type=click.Path(file_okay=False), help="Report directory (default: recipe report.dir).")
@click.option("--chain", default="", metavar="ID",
              help="Id of the chain of workflow runs driving the session (bisect-fanout.yml: the first round's "
                   "run id). A session driven by another chain that has not stopped is refused (exit 1): two "
                   "chains of one session never run at once.")
@_RUNNER
@_WAIT
@pass_ctx
def round_plan(ctx: Ctx, recipe_file: str, slots: int | None, session_id: str | None, good: str | None,
               bad: str | None, out: str | None, chain: str, runner_kind: str, wait_lock: float) -> None:
    """Print the next round of RECIPE's bisection as one JSON document.

    \b
    {"session", "round", "done", "probes": [{"ref", "component", "key", "focus", ...}], "result"}
    "result" is the path of result.json once done (the report is written then). A probe's
    "focus" (sizes, tokens: where the bad end failed) goes to 'round probe --focus'.
    Probes that never came back are planned again. Exit 0; 2 on bad input (also a recipe
    rounds cannot bisect: a last-good reference, before anything is built); 1 when the
    session has stopped (a round without progress, /bisectbot cancel), is past
    bisect.max_rounds, or is driven by another --chain.
    """
    from ..session import make_source, resolve_ends, write_report
    from ..session.lock import writer_lock
    from ..session.rounds.plan import rounds_session_id

    recipe, path = _load_for_rounds(recipe_file)
    led = ctx.ledger()
    if session_id:
        row = _session_row(ctx, recipe, session_id)
        if (good and good != row["good"]) or (bad and bad != row["bad"]):
            raise BadInput(f"round session {session_id} bisects {row['good']}..{row['bad']}; "
                           "--good/--bad differ (leave them out, or start a new session without --session)")
        good, bad = row["good"], row["bad"]
    else:
        g, b = good or recipe.bisect.good, bad or recipe.bisect.bad
        if (not g or not b) and recipe.source.kind != "git":
            g, b = resolve_ends(recipe, g, b, make_source(recipe, path.parent, led))
        if not g or not b:
            raise BadInput("a bisection needs a good and a bad end: --good/--bad or bisect.good/bisect.bad")
        good, bad = g, b
        session_id = rounds_session_id(recipe, good, bad)
        row = led.get_session(session_id)
    stored = (row or {}).get("state", {}).get("slots") if row else None
    if stored and slots and stored != slots:
        raise BadInput(f"round session {session_id} plans rounds of {stored} probes; --slots {slots} differs "
                       "(the rounds so far would change)")
    slots = slots or stored
    if not slots:
        raise BadInput("a new round session needs --slots K (probes per round)")
    with writer_lock(led.state_dir, recipe.name, wait_s=wait_lock, session=session_id,
                     echo=lambda s: terminal.echo(s, err=True)):
        row = led.get_session(session_id) or row  # under the lock: what the last writer left
        state = dict((row or {}).get("state") or {})
        _check_chain(session_id, state, chain)
        plan, result = _replay(ctx, recipe, path, good, bad, session_id, slots, runner_kind)
        if not plan.done and plan.round > recipe.bisect.max_rounds:
            from ..errors import BisectbotError

            led.save_session(session_id, recipe.name, recipe.verdict_hash(), good, bad, "stopped",
                             {**state, "stopped": f"past bisect.max_rounds {recipe.bisect.max_rounds}"})
            raise BisectbotError(f"round session {session_id}: round {plan.round} is past bisect.max_rounds "
                                 f"{recipe.bisect.max_rounds}: stopped (see 'bisectbot bisect log')")
        if plan.done and result is not None:
            gh = recipe.report.github
            paths = write_report(result, out or recipe.report.dir, recipe.bisect.blame_confidence,
                                 list(gh.mentions) if gh else None)
            plan.result = str(paths[0].resolve())
        led.save_session(session_id, recipe.name, recipe.verdict_hash(), good, bad,
                         plan.status or "running",
                         {"kind": "rounds", "slots": slots, "round": plan.round, "done": plan.done,
                          "pending": [j.key for j in plan.jobs], "result": plan.result,
                          "probes": plan.to_dict()["probes"], "chain": chain or state.get("chain", ""),
                          "stalled": state.get("stalled", 0)})
    terminal.echo(json.dumps(plan.to_dict(), sort_keys=True))


def _check_chain(session_id: str, state: dict, chain: str) -> None:
    """Refuse to plan a stopped session, or one another chain drives (issue 24, input 4)."""
    from ..errors import BisectbotError

    if state.get("stopped") and not state.get("done"):
        raise BisectbotError(f"round session {session_id} stopped: {state['stopped']}; start it again with "
                             "'bisectbot round resume RECIPE --session ID' once the cause is fixed")
    if chain and state.get("chain") and state["chain"] != chain and not state.get("done"):
        raise BisectbotError(f"round session {session_id} is driven by chain {state['chain']}, not {chain}: "
                             "two chains of one session never run at once")


@round_group.command("probe")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="The round session (from 'round plan').")
@click.option("--ref", required=True,
              help="The probe's ref as the plan printed it, or a unique prefix (7 hex digits or more) of one of the "
                   "refs of the session's plan in this ledger (without that plan: a commit of a git source by any "
                   "name git resolves).")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Verdict file to write ('-': standard output).")
@click.option("--key", help="The probe key the plan printed (default: the session's plan in this ledger, else "
                            "computed here, attempt 1).")
@click.option("--round", "round_no", type=int,
              help="The plan's round number (lets import refuse stale files; default: the session's plan; "
                   "refused when that plan names the probe in another round).")
@click.option("--attempt", type=click.IntRange(1, 100), default=None,
              help="Attempt number (default: the session's plan, else 1).")
@click.option("--toggle", default=None,
              help="Triage toggle name of the probe (plan's 'toggle'; '' for none; default: the one toggle the "
                   "session's plan in this ledger names for --ref, else none).")
@click.option("--focus", "focus_text", metavar="N,M",
              help="Prompt sizes (tokens) the threshold search asks first: the plan's 'focus', joined by commas "
                   "(where the bad end fails, issue 23; '' for none; default: the session's plan in this "
                   "ledger, else none). 'round import' refuses a file probed with other focus sizes than planned.")
@click.option("--runner-name", default="", help="Name of this runner in the verdict file (default: host name).")
@_RUNNER
@pass_ctx
def round_probe(ctx: Ctx, recipe_file: str, session_id: str, ref: str, out_file: str, key: str | None,
                round_no: int | None, attempt: int | None, toggle: str | None, focus_text: str | None,
                runner_name: str, runner_kind: str) -> None:
    """Run one probe of a round (anywhere) and write its verdict file; the ledger is not written.

    \b
    The file holds the probe key, verdict, threshold table, evidence, runner name and
    timings; 'bisectbot round import' records it. Exit 0 when the file is written.
    """
    from ..reaper import kill_descendants
    from ..run.probe import ProbeContext, ProbeJob
    from ..session.lock import probe_dir
    from ..session.probing.executor import build_key, focused_key, probe_key, reproducer_key, run_probe
    from ..session.rounds.plan import candidate_for, make_verdict, plan_ref
    from ..session.rounds.verdict_file import render_verdict, sha256, write_verdict
    from .run_cmd import _make_runner

    recipe, path = _load_for_rounds(recipe_file)
    focus = parse_focus(focus_text)
    if out_file != "-":  # refused before the probe spends its start, never after (issue 41, items 12, 13)
        from ..session.rounds.verdict_file import check_out

        check_out(Path(out_file))
    # the plan's ref, toggle, key, attempt, round and focus (issue 24: a hand-run probe wrote attempt 1);
    # with --key, only a plan that names that key
    planned = _planned(ctx, recipe, session_id, ref, toggle, key)
    if planned is not None:
        ref = planned["ref"]  # a unique prefix of it was given
        toggle = (planned.get("toggle") or "") if toggle is None else toggle
        key = key or planned["key"]
        attempt = attempt or int(planned.get("attempt") or 1)
        if round_no is not None and planned.get("round") is not None and round_no != planned["round"]:
            raise BadInput(f"round session {session_id} plans {ref[:40]} in round {planned['round']}, not in round "
                           f"{round_no}: 'round import' would refuse the file as stale; leave --round out (the "
                           f"plan's round) or pass --round {planned['round']}")
        round_no = round_no if round_no is not None else planned.get("round")
        plan_focus = tuple(PromptKey.parse(x) for x in planned.get("focus") or ())
        if focus is not None and tuple(focus) != plan_focus:  # refused before the device time is spent
            want, given = (",".join(map(str, f)) or "''" for f in (plan_focus, focus))
            raise BadInput(f"round session {session_id} plans {ref[:40]} with focus {want}, not {given}: "
                           f"'round import' would refuse the file; leave --focus out (the plan's) or pass --focus {want}")
        focus = plan_focus if focus is None else focus
    toggle = toggle or ""
    tog = triage_toggle(recipe, toggle, path)
    cand = candidate_for(recipe, ref, path.parent)
    if planned is None:
        ref = plan_ref(cand)  # a short SHA or branch of a git source: the commit, as a plan prints it
    from .. import progress

    progress.enable(None if ctx.verbosity < 0 else (lambda s: terminal.echo(s, err=True)))
    focus = focus or ()
    attempt = attempt or 1
    started = time.time()
    with probe_dir(_probe_root(ctx, recipe)) as work:
        runner = _make_runner(ctx, recipe, path, runner_kind, workdir=work)
        k = key or probe_key(cand.ref, build_key(runner, cand), focused_key(reproducer_key(recipe), focus), toggle,
                             attempt)
        res = run_probe(ProbeContext(recipe, runner), ProbeJob(cand, k, attempt, tog, tuple(focus)))
        kill_descendants()  # nothing the candidate started lives while its verdict file is written
    doc = make_verdict(res, session=session_id, round_no=round_no, key=k, ref=ref, recipe=recipe,
                       attempt=attempt, toggle=toggle, runner=runner_name, started=started, focus=focus)
    # the whole document is redacted (the candidate's output tails carried HF_TOKEN: issue 24, input 3)
    if out_file == "-":
        data = render_verdict(doc)
        terminal.echo(data.decode("utf-8"), nl=False)
        digest = sha256(data)
    else:
        _, digest = write_verdict(doc, Path(out_file))
    summary = {"key": k, "ref": ref, "verdict": res.verdict.value, "reason": res.reason, "out": out_file,
               "sha256": digest}
    gh_out = os.environ.get("GITHUB_OUTPUT")
    if gh_out and out_file != "-":  # in Actions: the digest goes to reduce outside the artifact
        with open(gh_out, "a", encoding="utf-8") as fh:
            fh.write(f"sha256={digest}\n")
    line = f"{ref[:40]}: {res.verdict.value}; {res.reason} ({res.duration_s:.1f}s) -> {out_file} (sha256 {digest})"
    if ctx.json and out_file != "-":
        ctx.emit(summary, line)  # the one --json document: {"key", "ref", "verdict", "reason", "out", "sha256"}
    else:
        terminal.echo(json.dumps(summary, sort_keys=True) if ctx.json else line, err=out_file == "-")


def parse_focus(text: str | None) -> tuple[PromptKey, ...] | None:
    """``--focus`` as prompts: ``"21822,24000"`` -> sizes (tokens), ``"21859@seed0w16210"`` -> the
    prompt of that filler seed and words (issue 35), ``""`` -> ``()``, None (not given) -> None.
    BadInput for anything else (ASCII digits only: ``str.isdigit`` also takes ``²``) joined by commas."""
    if text is None:
        return None
    parts = [x.strip() for x in text.replace(" ", ",").split(",") if x.strip()]
    try:
        if not all(x.isascii() for x in parts):
            raise ValueError(text)
        return tuple(PromptKey.parse(int(x) if x.isdigit() else x) for x in parts)
    except ValueError:
        raise BadInput(f"--focus {text[:80]!r}: prompt sizes (tokens) or prompts (N@seedSwW, as the plan's "
                       "'focus' names them) joined by commas expected, e.g. 21822,24000") from None


def _planned(ctx: Ctx, recipe, session_id: str, ref: str, toggle: str | None, key: str | None) -> dict | None:
    """The probe of ``ref`` in the session's last plan in this ledger, with its ``round``; None
    when this ledger has no such session, or (with ``key``) when the plan names no probe of that key.

    ``ref``: a planned ref, or a unique prefix (at least 7 hex digits) of one (issue 24). ``toggle``:
    the probe's triage toggle (``""``: none; None: the one the plan names for ``ref``). BadInput
    (without ``key``) when the plan does not name the probe, when the prefix or the toggle is
    ambiguous (naming the choices)."""
    row = ctx.ledger().get_session(session_id)
    if row is None or (row.get("state") or {}).get("kind") != "rounds":
        return None
    state = row["state"]
    probes = state.get("probes")
    if probes is None:  # a plan saved before the probes were kept
        return None
    rnd = state.get("round")
    if key is not None:
        hits = [p for p in probes if p.get("key") == key and p.get("ref") == _planned_ref(ref, probes, key=key)]
        return {**hits[0], "round": rnd} if hits else None
    full = _planned_ref(ref, probes, f"round session {session_id}: round {rnd}")
    of_ref = [p for p in probes if p.get("ref") == full]
    if toggle is None:
        toggles = sorted({p.get("toggle") or "" for p in of_ref})
        if len(toggles) > 1:
            raise BadInput(f"round session {session_id}: round {rnd} plans {full[:40]} with toggles "
                           + ", ".join(t or "none" for t in toggles) + ": pass --toggle NAME"
                           + (" (--toggle '' for the probe without one)" if "" in toggles else ""))
        hits = of_ref
    else:
        hits = [p for p in of_ref if (p.get("toggle") or "") == toggle]
    if hits:
        return {**hits[0], "round": rnd}
    raise BadInput(f"round session {session_id}: round {rnd} does not plan {ref[:40]}"
                   + (f" with toggle {toggle}" if toggle else "") + "; it plans: "
                   + (", ".join(p["ref"][:40] + (f" ({p['toggle']})" if p.get("toggle") else "") for p in probes)
                      or "nothing (done)")
                   + (" (a prefix of a ref needs at least 7 hex digits)" if _is_hex(ref) and len(ref) < 7
                      and any(p["ref"].lower().startswith(ref.lower()) for p in probes) else ""))


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text.lower())


def _planned_ref(ref: str, probes: list[dict], where: str = "", key: str | None = None) -> str:
    """``ref`` as one of the ``probes``' refs: itself, or the one ref it is a prefix of (at least 7 hex
    digits); ``ref`` unchanged when none. BadInput naming the refs when it is a prefix of several
    (among the probes of ``key`` only, when given)."""
    refs = sorted({p["ref"] for p in probes if key is None or p.get("key") == key})
    if ref in refs or len(ref) < 7 or not _is_hex(ref):
        return ref
    hits = [r for r in refs if r.lower().startswith(ref.lower())]
    if len(hits) > 1:
        raise BadInput(f"{where or 'the plan'}: --ref {ref} is a prefix of {len(hits)} planned refs ("
                       + ", ".join(h[:16] for h in hits) + "): pass more of it")
    return hits[0] if hits else ref


@round_group.command("import")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="The round session (from 'round plan').")
@click.option("--require-progress", is_flag=True,
              help="Exit 1 naming why when no file moved the session (nothing recorded, no transient answer "
                   "counted, and no repeat of an earlier import: files already recorded that are the probes their "
                   "round planned, none refused): the chain of rounds stops instead of planning the same round "
                   "again.")
@click.option("--digests", "digests_file", type=click.Path(dir_okay=False),
              help="'SHA256  NAME' lines (sha256sum format) from the probe jobs: a file whose SHA-256 differs, "
                   "or that has no line, is refused.")
@_RUNNER
@_WAIT
@pass_ctx
@click.pass_context
def round_import(cctx: click.Context, ctx: Ctx, recipe_file: str, files: tuple[str, ...], session_id: str,
                 require_progress: bool, digests_file: str | None, runner_kind: str, wait_lock: float) -> None:
    """Record verdict files of the session's current round in the ledger.

    \b
    Idempotent by probe key (a recorded key is 'already recorded', whatever round its
    file says). A file of another session or recipe hash, of a stale round (its "round"
    is not the session's current one: 'round probe --round') or for an unplanned probe
    is refused with the reason; the others are still recorded. So is each file that is
    not a regular file (a FIFO), over 4 MiB, not JSON, whose two verdicts differ, or
    (with --digests) whose SHA-256 is not the probe job's, or that was probed with other
    focus sizes than the plan's (round probe --focus). Exit 0 when none is refused, else 2.
    """
    from ..session.lock import writer_lock
    from ..session.rounds.plan import import_verdicts, made_progress
    from ..session.rounds.verdict_file import load_digests

    recipe, path = _load_for_rounds(recipe_file)
    digests = load_digests(Path(digests_file)) if digests_file else None
    led = ctx.ledger()
    row = _session_row(ctx, recipe, session_id)
    slots = int(row["state"].get("slots") or 1)
    with writer_lock(led.state_dir, recipe.name, wait_s=wait_lock, session=session_id,
                     echo=lambda s: terminal.echo(s, err=True)):
        plan, _ = _replay(ctx, recipe, path, row["good"], row["bad"], session_id, slots, runner_kind)
        outcomes = import_verdicts(led, plan, recipe, [Path(f) for f in files], digests)
        stalled = not made_progress(outcomes)
        if require_progress and stalled and not plan.done:
            why = "; ".join(f"{Path(o.path).name}: {o.action}" + (
                f" ({o.message.split(': ', 1)[-1][:200]})" if o.action != "already recorded" or not o.progress
                else "") for o in outcomes) or "no verdict file"
            if any(o.progress for o in outcomes):
                why += " (a file already recorded counts as a repeated import only when no file is refused)"
            row = led.get_session(session_id) or row
            reason = f"round {plan.round} made no progress: {why}"
            led.save_session(session_id, recipe.name, recipe.verdict_hash(), row["good"], row["bad"], "stopped",
                             {**row["state"], "stopped": reason[:600]})
    if ctx.json:
        ctx.emit([o.__dict__ for o in outcomes])
    else:
        for o in outcomes:
            terminal.echo(f"{o.action}: {o.message}", err=o.action == "refused")
    if require_progress and stalled and not plan.done:
        terminal.echo(f"round session {session_id} stopped: {reason}", err=True)
        cctx.exit(EXIT_ERROR)
    cctx.exit(EXIT_BAD_INPUT if any(o.action == "refused" for o in outcomes) else 0)


@round_group.command("cancel")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="The round session (from 'round plan').")
@click.option("--from-github", is_flag=True,
              help="Stop only when a maintainer asked: an unanswered '/bisectbot cancel' on an open issue of the "
                   "recipe (token in $BISECTBOT_GITHUB_TOKEN); each is answered. Exit 1 when stopped, 0 when not.")
@click.option("--reason", default="cancelled by hand", show_default=True, help="Why (without --from-github).")
@_WAIT
@pass_ctx
@click.pass_context
def round_cancel(cctx: click.Context, ctx: Ctx, recipe_file: str, session_id: str, from_github: bool, reason: str,
                 wait_lock: float) -> None:
    """Stop a round session: 'round plan' refuses it from then on (the chain of rounds ends).

    \b
    Examples:
      bisectbot round cancel demo-command --session S
      bisectbot round cancel demo-command --session S --from-github   # bisect-fanout.yml
    """
    from ..session.lock import writer_lock

    recipe, _ = _load(recipe_file)
    led = ctx.ledger()
    row = _session_row(ctx, recipe, session_id)
    asked = []
    if from_github:
        from ..report.github import acknowledge, read_commands, token_from_env

        token = token_from_env()
        gh = recipe.report.github
        if not token or gh is None:
            raise BadInput("--from-github needs report.github in the recipe and a token in $BISECTBOT_GITHUB_TOKEN")
        asked = [c for c in read_commands(gh, token) if c.kind == "cancel" and not c.error]
        if not asked:
            terminal.echo(f"round session {session_id}: no /bisectbot cancel")
            return
        reason = "; ".join(f"/bisectbot cancel by {c.author} in #{c.issue}" for c in asked)
    with writer_lock(led.state_dir, recipe.name, wait_s=wait_lock, session=session_id,
                     echo=lambda s: terminal.echo(s, err=True)):
        row = led.get_session(session_id) or row
        state = row.get("state") or {}
        if state.get("done"):
            terminal.echo(f"round session {session_id} is done already: nothing to stop")
            return
        led.save_session(session_id, recipe.name, recipe.verdict_hash(), row["good"], row["bad"], "stopped",
                         {**state, "stopped": reason[:600]})
    for c in asked:
        acknowledge(c, recipe.report.github, token,  # type: ignore[arg-type]
                    f"stopped the bisection (round session {session_id} at round {state.get('round')}).")
    terminal.echo(f"round session {session_id} stopped: {reason}", err=True)
    cctx.exit(EXIT_ERROR if from_github else 0)


@round_group.command("resume")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="The round session (from 'round plan').")
@_WAIT
@pass_ctx
def round_resume(ctx: Ctx, recipe_file: str, session_id: str, wait_lock: float) -> None:
    """Clear a stopped round session (after fixing what stopped it): 'round plan' plans it again.

    \b
    Example:
      bisectbot round resume demo-command --session S
    """
    from ..session.lock import writer_lock

    recipe, _ = _load(recipe_file)
    led = ctx.ledger()
    with writer_lock(led.state_dir, recipe.name, wait_s=wait_lock, session=session_id,
                     echo=lambda s: terminal.echo(s, err=True)):
        row = _session_row(ctx, recipe, session_id)
        state = {k: v for k, v in (row.get("state") or {}).items() if k not in ("stopped", "chain")}
        led.save_session(session_id, recipe.name, recipe.verdict_hash(), row["good"], row["bad"], "running", state)
    terminal.echo(f"round session {session_id}: resumed; plan it with 'bisectbot round plan {recipe_file} "
                  f"--session {session_id}'")
