"""Judge one prepared candidate: run the recipe's reproducer on it and decide its verdict.

:func:`judge` runs the reproducer the recipe names (a command's runs, a threshold search
over a command or a server, with the recipe's oracles) on a candidate a runner prepared, and
turns the measurement into a :class:`bisectbot.verdict.rules.Judgement` by the recipe's
regress mode (the rules of :mod:`bisectbot.verdict.rules`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..errors import BadInput
from ..models import PromptKey, Verdict, is_patch_mode
from ..recipe import Recipe
from ..run.base import Prepared
from ..run.probe import ProbeContext, ProbeJob
from .rules import UNRUNNABLE, Judgement, judge_command, judge_patches, judge_threshold


def threshold_regress(recipe: Recipe) -> str:
    """The regress mode :func:`bisectbot.verdict.judge_threshold` applies: ``diverges`` results
    are GARBAGE sizes of the search, so they are judged as ``garbage``."""
    return "garbage" if recipe.regress.mode == "diverges" else str(recipe.regress)


def judge(ctx: ProbeContext, prepared: Prepared, job: ProbeJob) -> tuple[Judgement, dict[str, Any]]:
    """Run the recipe's reproducer on ``prepared`` (``job``'s candidate) and decide the verdict
    by the regress mode. ``ctx``: the stage's recipe, runner and oracle; ``job.env``/``job.args``:
    a triage toggle's extra environment and arguments.

    Returns the judgement and extra evidence (``threshold``, ``table``, ``returncode``...).
    ``ctx.oracle`` is the run's reference (:class:`bisectbot.reproduce.oracle.Oracle`, issue 18).
    ``job.focus``: sizes (tokens) where the bisection's bad end failed, asked first by a threshold
    search (:mod:`bisectbot.reproduce.focus`, issue 23).
    Raises BadInput (recipe without a command in command mode), ServerError (not a verdict).
    """
    r, runner, oracle = ctx.recipe, ctx.runner, ctx.oracle
    env, args, focus = job.env, job.args, (list(job.focus) or None)
    if is_patch_mode(r.regress):
        return judge_patches(r.regress, prepared.patches), {}
    if r.regress.mode == "slower":  # issue 39: samples judged against the ends' samples
        from .measured import judge_measured

        return judge_measured(ctx, prepared, job)
    # a fix bisection (regress: success) with a command that takes no {size} is judged from the
    # exit code, inverted, as 'regress: command' is: no token sizes (newuser defect 6)
    sizeless_fix = (r.regress.mode == "success" and r.reproducer.kind == "command"
                    and not any("{size}" in a for a in (r.reproducer.command or [])))
    if r.regress.mode == "command" or sizeless_fix:
        if not r.reproducer.command:
            raise BadInput("regress mode 'command' needs reproducer.command (an argv; exit 0 good, "
                           "1..127 bad, 125 skip)")
        from .honesty import run_repeats

        run_command = runner.run_command
        argv = list(r.reproducer.command) + list(args or [])

        def once() -> tuple[Judgement, dict[str, Any]]:
            try:
                cr = run_command(prepared, argv, r.reproducer.command_timeout_s, env=env)  # type: ignore[call-arg]
            except TypeError:  # runners without an env argument
                cr = run_command(prepared, argv, r.reproducer.command_timeout_s)
            rc = cr.returncode
            if r.reproducer.command_crash == "skip" and rc is not None and (rc < 0 or rc > 128):
                # the recipe says a crash is untestable: a skip, not git bisect run's abort
                from ..reproduce.command import command_outcome

                j = Judgement(Verdict.SKIP, f"command {command_outcome(cr)[1]}: skip (command_crash: skip)")
            else:
                j = judge_command(rc, cr.timed_out, invert=sizeless_fix)
            extra = {"returncode": cr.returncode, "stdout_tail": cr.stdout_tail[-2000:],
                     "stderr_tail": cr.stderr_tail[-2000:]}
            if j.verdict is not Verdict.GOOD and cr.stderr_tail.strip():
                j.reason += ": " + cr.stderr_tail.strip().splitlines()[-1][:200]
            if j.signature is not None and j.signature.kind == UNRUNNABLE:  # a shim under the veiled home, said
                from .honesty import veiled_hint

                j.reason += veiled_hint(argv, (env or {}).get("PATH"))
            return j, extra

        # repeats combine one-sidedly (issue 12); without recipe rates every run is made so
        # that the bad end's hit rate can be estimated
        reps = r.reproducer.repeats
        return run_repeats(once, reps, all_runs=reps > 1 and r.bisect.flake is None, fix=sizeless_fix)
    if r.reproducer.kind == "command":
        from ..reproduce.command import search_threshold_command, substitute

        argv0 = list(r.reproducer.command or [])

        def run_size(size: int):  # -> CommandRun
            argv = substitute(argv0, size, prepared.source) + list(args or [])
            try:
                return runner.run_command(prepared, argv, r.reproducer.command_timeout_s,
                                          env=env)  # type: ignore[call-arg]
            except TypeError:  # runners without an env argument
                return runner.run_command(prepared, argv, r.reproducer.command_timeout_s)

        tr = search_threshold_command(run_size, r.reproducer, focus=focus)
    else:
        from ..reproduce.threshold import search_threshold  # the reproducer area (issue 3)

        oracle_extra: dict[str, Any] = {}
        with _server(ctx, prepared, job) as srv:
            if r.reproducer.reference is not None or r.reproducer.control is not None:
                from ..reproduce.oracle import reproduce  # issue 18: reference comparison, decode control

                tr, oracle_extra = reproduce(r, srv.base_url, oracle, focus=focus)
            else:
                tr = search_threshold(srv.base_url, r.reproducer, model=r.model or None,
                                      timeout_s=r.server.request_timeout_s, focus=focus)
    j = judge_threshold(threshold_regress(r), tr.status, tr.last_ok, tr.first_garbage, list(tr.reasons or []),
                        tr.error or _inconclusive_why(tr))
    if r.regress.mode == "diverges" and j.reason.startswith("garbage ("):
        j.reason = "bad (" + j.reason[len("garbage ("):]
    table = [t.to_dict() if hasattr(t, "to_dict") else t for t in (tr.table or [])]
    extra = {"threshold": (tr.last_ok, tr.first_garbage), "table": table, "requests": tr.requests,
             "status": tr.status}
    if getattr(tr, "transient", False):
        extra["transient"] = True  # a transient server error: never cached as a verdict (issue 11)
    if getattr(tr, "second_finding", None):
        extra["second_finding"] = tr.second_finding  # issue 23: a failure above the focus sizes
        j.reason += f"; second finding above the bad end's failing sizes: {str(tr.second_finding)[:200]}"
    if focus:
        extra["focus"] = [PromptKey.parse(k).json for k in focus]
    if getattr(tr, "flaky", None):
        extra["flaky_sizes"] = list(tr.flaky)
    if r.bisect.flake is None and tr.table:  # the bad end's hit rate (issue 12; verdict.honesty.adapt_rates)
        from ..reproduce.search import hit_counts

        runs, hits = hit_counts([t for t in tr.table if hasattr(t, "votes")], tr.first_garbage)
        if runs:
            extra["runs"], extra["hits"] = runs, hits
    if r.reproducer.kind == "prefill":
        extra.update(oracle_extra)  # issue 18: control, reference
    return j, extra


def _server(ctx: ProbeContext, prepared: Prepared, job: ProbeJob) -> Any:
    """The server a threshold search runs on: the reference's own when the probe was handed the
    reference's prepared build (:func:`bisectbot.reproduce.oracle.reference_start` decided so), else
    a new one from the runner (a context manager yielding an object with ``base_url``)."""
    from contextlib import nullcontext

    shared = ctx.oracle
    if shared is not None and getattr(shared, "prepared", None) is prepared and getattr(shared, "base_url", ""):
        return nullcontext(SimpleNamespace(base_url=shared.base_url))
    return ctx.runner.server(prepared, env=job.env, args=job.args)


def _inconclusive_why(tr: Any) -> str | None:
    """Why an ``inconclusive`` search decided no size: the distinct first reasons of its sizes
    (e.g. "reference unusable: its own reply is GARBAGE ...", issue 23), at most 300 characters;
    ``None`` for another status or when no size gave one."""
    if tr.status != "inconclusive":
        return None
    seen: list[str] = []
    for row in tr.table or []:
        why = (getattr(row, "reasons", None) or [None])[0]
        if why and why not in seen:
            seen.append(why)
    return "; ".join(seen)[:300] or None
