"""``bisectbot run`` and the ``bisectbot bisect`` group (``log``, ``replay``, ``plan``).

Exit codes of ``run``: 0 culprit found, 1 error, 2 bad input, 3 inconclusive (a range, a
failed verification or boundary, no regression, budget spent).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from .. import jsonio as _jsonio
from .. import terminal
from ..errors import BadInput
from .base import Ctx, cli, pass_ctx


class _PerThreadLedger:
    """A :class:`bisectbot.ledger.Ledger` per thread (SQLite connections stay in their thread):
    the container runner prepares candidates in prefetch threads."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self._local = threading.local()

    def __getattr__(self, name: str):
        led = getattr(self._local, "ledger", None)
        if led is None:
            from ..ledger import Ledger

            led = self._local.ledger = Ledger(self.state_dir)
        return getattr(led, name)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _stack_path(recipe, recipe_path: Path) -> Path | None:
    """The patch stack of a recipe that names patches (lookup order of :mod:`bisectbot.shipped`); None without."""
    if not recipe.patches:
        return None
    from ..shipped import find_stack

    return find_stack(None, recipe_path)


def runner_kind_of(recipe, kind: str) -> str:
    """``kind`` as given, or for ``auto`` the recipe's: ``local`` for a git source, ``release`` for a
    pypi source (a patch question, or each release installed and run: issue 39), else ``container``."""
    if kind != "auto":
        return kind
    return "local" if recipe.source.kind == "git" else "release" if recipe.source.kind == "pypi" else "container"


#: Checks of ``runner check`` that only warn before a run: a forecast, not a failure (the images may fit).
PREFLIGHT_WARN_ONLY = ("disk docker",)


def preflight(ctx: Ctx, recipe, recipe_path: Path, kind: str, echo) -> None:
    """``bisectbot runner check``'s checks (:func:`bisectbot.cli.runner_cmd.run_checks`) before the first
    probe (issue 35): a required check that fails ends the run with :class:`bisectbot.errors.HostFailure`
    (exit 1) naming each failure, before anything is probed, recorded or filed. The container runner
    needs the Docker daemon; the local runner checks its profile's devices and GPUs when the profile
    is found (the local runner runs without one) and the state directory; the release runner only the
    state directory. ``disk docker`` below the profile's ``min_free_gb`` is a warning here."""
    from ..errors import HostFailure
    from .runner_cmd import run_checks, state_writable

    kind = runner_kind_of(recipe, kind)
    state = ctx.ledger().state_dir
    try:
        if kind == "release":
            raise BadInput("no profile")
        checks = run_checks(recipe.runner, state, str(recipe_path), docker=kind == "container")
    except BadInput:
        if kind == "container":
            raise
        ok, detail = state_writable(Path(state))
        checks = [{"name": "state writable", "ok": ok, "detail": detail, "required": True}]
    # only what the bot saw fail stops the run (issue 35: a host failure is observed, never inferred):
    # a GPU count no tool could take is a warning here, as in `runner check` it is a failed check
    failed = [c for c in checks if not c["ok"] and c["required"] and c["name"] not in PREFLIGHT_WARN_ONLY
              and c.get("observed", True)]
    for c in checks:
        if not c["ok"] and c not in failed:
            echo(f"runner check: warning: {c['name']}: {c['detail']}")
    if failed:
        raise HostFailure(
            f"this host cannot probe with runner profile {recipe.runner!r} ({kind} runner): "
            + "; ".join(f"{c['name']}: {c['detail']}" for c in failed)
            + ". Nothing was probed, recorded or filed: fix the host (`bisectbot runner check --recipe "
            f"{recipe_path}` shows every check) and run the same command again")


def _make_runner(ctx: Ctx, recipe, recipe_path: Path, kind: str,
                 workdir: Path | None = None):  # -> CandidateRunner
    """The runner for a recipe: ``local`` (git worktrees), ``container`` (images) or
    ``release`` (patch questions on package releases: pypi source, patch regress mode).
    ``workdir``: the local runner's worktree directory (default ``STATE/worktrees/<recipe>``)."""
    kind = runner_kind_of(recipe, kind)
    if kind == "release":
        from ..models import is_patch_mode
        from ..patches import load_stack
        from ..run.local import load_profile_env
        from ..run.release import ReleaseRunner
        from ..shipped import find_stack

        state = ctx.ledger().state_dir
        return ReleaseRunner(recipe, load_stack(find_stack(None, recipe_path)) if is_patch_mode(recipe.regress) else None,
                             log_dir=state / "logs" / recipe.name, workdir=workdir or state / "worktrees" / recipe.name,
                             profile_env=load_profile_env(recipe.runner, [recipe_path.parent, recipe_path.parent.parent]))
    if kind == "local":
        from ..recipe import GitSource
        from ..run.local import LocalRunner, load_profile_env
        from ..sources.git import local_repo

        repos: dict[str, Path] = {}
        srcs = ([("", recipe.source)] if isinstance(recipe.source, GitSource) else []) + list(
            recipe.bisect.components.items())
        for name, src in srcs:
            p = local_repo(src.repo, recipe_path.parent)
            repos.setdefault(name or src.component or p.name, p)
        if not repos:
            raise BadInput(f"{recipe_path}: the local runner needs a git source or bisect.components")
        state = ctx.ledger().state_dir
        local = LocalRunner(recipe, repos, workdir=workdir or state / "worktrees" / recipe.name,
                            log_dir=state / "logs" / recipe.name,
                            profile_env=load_profile_env(recipe.runner, [recipe_path.parent, recipe_path.parent.parent]),
                            stack_path=_stack_path(recipe, recipe_path))
        wheels = getattr(recipe.source, "wheels", None)
        if wheels is None:
            return local
        from ..run.commit_wheels import CommitWheelRunner

        # issue 40: a commit's prebuilt wheel, else its source build
        return CommitWheelRunner(local, wheels, next(iter(repos)))
    from ..patches import default_stack_path
    from ..run.container import ContainerRunner
    from ..runner_profile import load_profile

    state = ctx.ledger().state_dir
    stack_dir = default_stack_path(recipe_path).parent if recipe.patches else None
    return ContainerRunner(recipe, load_profile(recipe.runner, recipe_path), state / "logs" / recipe.name, stack_dir=stack_dir,
                           ledger=_PerThreadLedger(state), lock_dir=state / "locks",
                           base_dir=recipe_path.parent)


def _mount_plan(recipe: Any, path: Path) -> str:
    """The plan's ``mount`` lines: each bind a candidate's server container gets, merged by container
    path with the recipe's winning (issue 24, input 1); ``""`` when neither side mounts anything or
    the runner profile is not found here."""
    from ..runner_profile import load_profile, merge_mounts

    try:
        plan = merge_mounts(load_profile(recipe.runner, path), list(recipe.server.mounts))
    except BadInput:
        return ""
    lines = [f"mount {b.host}:{b.container}:{b.mode} ({b.origin})" for b in plan.binds]
    lines += [f"mount clash: {r}" for r in plan.replaced]
    return "".join("\n" + ln for ln in lines)


@contextlib.contextmanager
def _writer(ctx: Ctx, recipe_file: str, wait_lock: float, dry_run: bool = False) -> Iterator[None]:
    """Hold the writer lock of the recipe's state (issue 16: one writer per session) around a
    run; a second writer waits ``wait_lock`` seconds (negative: forever), then exits naming
    the holder. Nothing is locked for ``--dry-run``."""
    if dry_run:
        yield
        return
    from ..recipe import load_recipe
    from ..session.lock import writer_lock
    from ..shipped import find_recipe

    recipe = load_recipe(find_recipe(recipe_file))
    echo = (lambda s: None) if ctx.verbosity < 0 else (lambda s: terminal.echo(s, err=True))
    with writer_lock(ctx.ledger().state_dir, recipe.name, wait_s=wait_lock, echo=echo):
        yield


def _run(ctx: Ctx, recipe_file: str, good: str | None, bad: str | None, dry_run: bool, replay: str | None,
         out: str | None, runner_kind: str, parallel: int | None, prefetch: bool, file_issue: bool = False,
         emit: bool = True, reproducible: str | None = "", retry_errors: bool = False,
         verify: bool | None = None, commands_file: str | None = None, minimize: bool = False) -> int:
    """Run (or plan) a bisection of ``recipe_file``; returns the exit code.

    ``emit``: write the ``--json`` document (False when the caller writes its own, e.g. ``demo``).
    ``reproducible``: ``""`` gives the report a Reproduce command; any other text replaces it with
    that note (e.g. the demo's history is removed after ``--no-keep``).
    ``retry_errors``: probe cached skips again (``run --retry-errors``).
    ``verify``: override the recipe's ``bisect.verify`` (``run --no-verify``); None keeps it."""
    from ..recipe import load_bisection_recipe
    from ..session import Session, exit_code, make_source, parse_replay, plan_text, resolve_ends, write_report
    from ..shipped import find_recipe

    path = find_recipe(recipe_file)
    recipe = load_bisection_recipe(path)
    if parallel:
        recipe.bisect.parallel = parallel
    if verify is not None:
        recipe.bisect.verify = verify
    if minimize and (recipe.bisect.minimize is None or not recipe.bisect.minimize.enabled):
        from ..recipe import MinimizeSpec

        budget = recipe.bisect.minimize.max_probes if recipe.bisect.minimize is not None else None
        recipe.bisect.minimize = MinimizeSpec(enabled=True, max_probes=budget)
    if file_issue and recipe.report.github is None:
        raise BadInput(f"{path}: --file-issue needs report.github (repo, labels, api_url) in the recipe")
    published = pages_url(recipe)  # checked before the bisection: bad input loses nothing
    if runner_kind_of(recipe, runner_kind) == "container":  # a recipe mount replacing the profile's (issue 41, 1)
        from ..runner_profile import recipe_mount_clashes

        clashes, _unchecked = recipe_mount_clashes(recipe, path)
        if clashes:
            raise BadInput("\n".join(clashes))
    if dry_run and recipe.patches:  # what run loads before its first probe, the plan loads too (issue 41, 2)
        from ..patches import load_stack

        load_stack(_stack_path(recipe, path)).select(list(recipe.patches))
    if dry_run:
        g, b = good or recipe.bisect.good, bad or recipe.bisect.bad
        src = None
        if (not g or not b) and recipe.source.kind != "git":
            src = make_source(recipe, path.parent, ctx.ledger())
            g, b = resolve_ends(recipe, g, b, src)
        if not g or not b:
            raise BadInput("a bisection needs a good and a bad end: --good/--bad or bisect.good/bisect.bad")
        if "=" in g or "=" in b:
            text = f"plan: component bisection from {g} to {b}: mixed pairs first when several changed"
            ctx.emit({"recipe": str(path), "good": g, "bad": b, "kind": "component-pairs", "plan": text.splitlines(),
                      "candidates": []}, text)
            return 0
        cands = (src or make_source(recipe, path.parent, ctx.ledger())).candidates(g, b)
        from ..session.result import plan_estimate

        est = plan_estimate(recipe, len(cands), ctx.ledger()) if cands else None  # one pass over the ledger
        text = plan_text(recipe, cands, recipe.bisect.parallel, est) + _mount_plan(recipe, path)
        from ..session.probing.withheld import withheld, withheld_note

        held = withheld(recipe)
        if held:  # issue 23, input 4
            text += "\n" + withheld_note(recipe, held)
        ctx.emit({"recipe": str(path), "good": g, "bad": b, "kind": "range", "plan": text.splitlines(),
                  "estimate": None if est is None else {"probes": est.probes, "per_probe_s": est.per_probe_s,
                                                        "total_s": est.total_s, "measured": est.measured},
                  # built only for --json: 50,000 candidates are a cost a text plan need not pay (issue 15)
                  "candidates": [c.to_dict() for c in cands] if ctx.json else []}, text)
        return 0
    lines = None
    if replay:
        try:
            text = Path(replay).read_text(encoding="utf-8")
        except OSError as e:
            raise BadInput(f"{replay}: cannot read replay log: {e.strerror or e}") from None
        lines = parse_replay(text, replay)
        if not lines:  # an empty log would silently resume the old session (issue 25, input 6)
            raise BadInput(f"{replay}: no verdict lines ('good|bad|skip REF', as `bisectbot bisect log` prints "
                           "them): nothing to replay")
    echo = (lambda s: None) if ctx.verbosity < 0 else (lambda s: terminal.echo(s, err=True))
    preflight(ctx, recipe, path, runner_kind, echo)  # the host's failures are never verdicts (issue 35)
    runner = _make_runner(ctx, recipe, path, runner_kind)
    from .. import progress

    progress.enable(None if ctx.verbosity < 0 else echo)  # each probe's phases, heartbeats, requests
    commands, human = (load_commands(Path(commands_file)) if commands_file else
                       _maintainer_verdicts(recipe) if file_issue else ([], []))

    sessions: list = []

    def bisect(human):  # -> RunResult
        session = Session(recipe, ctx.ledger(), runner, echo=echo, replay=lines, base_dir=path.parent,
                          prefetch=prefetch, recipe_path=str(path), human=human, retry_errors=retry_errors)
        sessions.append(session)
        with _sigterm_as_interrupt():  # SIGTERM cleans up like Ctrl-C: servers killed, worktrees removed
            return session.run(good, bad)

    from ..session.probing.withheld import withheld, withheld_note

    held = withheld(recipe)
    if held:  # issue 23, input 4: said before the run, and in the report when it finds nothing
        echo(withheld_note(recipe, held))

    from ..reaper import kill_descendants

    try:
        result = bisect(human)
    except KeyboardInterrupt:
        pg, pb = pinned_ends(recipe, path, good, bad)
        terminal.echo(f"interrupted: the finished probes are in the ledger; resume with: "
                   f"{resume_command(ctx.ledger().state_dir, path, pg, pb, out)}", err=True)
        raise
    retracts = _retractions(ctx, result, commands)
    if retracts:  # the culprit was called wrong on its issue: search again with it excluded (skip)
        human = human + retracts
        echo(f"retracted by a maintainer: {', '.join(r.ref[:12] for r in retracts)}; searching again without it")
        result = bisect(human)
    kill_descendants()  # no candidate process lives while the report is written or filed (issue 24, input 2)
    if replay:
        replay_notes(result, replay, text, sum(x.prober.fresh_probes for x in sessions),
                     set().union(*(x.prober.fresh_refs for x in sessions)))
    if not recipe.bisect.verify:  # say so wherever the result is read: nothing was re-probed
        result.notes = [n.replace("verified in this run:", "measured in this run, not verified:")
                        .replace(" re-measured", " measured") for n in result.notes]
        result.notes.append("not verified (run --no-verify or bisect.verify: false): the culprit and its "
                            "predecessor were not probed again")
    if held and result.status.value in ("no-regression", "boundary-failed"):
        result.notes.append(withheld_note(recipe, held, result.status.value))
    from ..sandbox import MODE_ENV as SANDBOX_MODE_ENV
    from ..sandbox import enabled as sandbox_enabled

    if runner_kind_of(recipe, runner_kind) == "local" and not sandbox_enabled():  # issue 36: said where it is read
        result.environment["candidate sandbox"] = f"off ({SANDBOX_MODE_ENV}={os.environ.get(SANDBOX_MODE_ENV, '')})"
        result.notes.append(f"candidates ran unconfined on this host ({SANDBOX_MODE_ENV}="
                            f"{os.environ.get(SANDBOX_MODE_ENV, '')}): no sandbox kept them from its files, "
                            "processes and network")
    gh = recipe.report.github
    out_dir = Path(out or recipe.report.dir).resolve()
    if reproducible:
        result.reproduce = ""
        result.notes.append(reproducible)
    elif result.reproduce and result.final is not None:
        from ..report.reproduce_kit import reproduce_ends
        from ..session.result import end_arg

        rg, rb = reproduce_ends(result.final)
        if rg and rb:
            result.reproduce = reproduce_command(path, ctx.ledger().state_dir, out_dir, end_arg(rg), end_arg(rb))
    from ..report.reproduce_kit import facts

    if not reproducible:  # the Reproduce section without the bot (issue 25); none when its files go away
        result.reproduction = facts(recipe, path)
    result.pages_url = published
    diff = nightly_diff(ctx, result)
    if diff is not None:
        result.reproduction["nightly_diff"] = diff
    paths = write_report(result, out_dir, recipe.bisect.blame_confidence, list(gh.mentions) if gh else None)
    final = result.final
    if ctx.json:
        if emit:
            ctx.emit(result.to_dict())
    else:
        if final is not None:
            from ..bisect import confidence_text

            if final.first_bad is not None and final.status.value == "culprit":
                from ..report.views import culprit_word, patch_message
                from ..session.result import verified_word

                terminal.echo(f"{culprit_word(result).lower()}: {final.first_bad.component} {final.first_bad.ref} "
                           f"({final.first_bad.label}), confidence {confidence_text(final.confidence, percent=True)}, "
                           f"{verified_word(final, recipe.bisect.verify)}")
                if final.message.startswith("first-bad:"):  # patch modes: which release, which state
                    terminal.echo(patch_message(result, final.message))
            else:
                terminal.echo(f"{final.status.value}: {final.message}")
                if final.culprits:
                    from ..report.words import ends_words

                    first = ends_words(result.kind, result.regress)["first"]
                    if final.status.value == "inconclusive":  # a best guess, not a located range
                        terminal.echo(f"best guess (nobody blamed): {first} is one of "
                                   + " ".join(c.ref for c in final.culprits)
                                   + f" with probability {confidence_text(final.confidence, percent=True)}")
                    else:
                        terminal.echo(f"{first} is one of: " + " ".join(c.ref for c in final.culprits))
        from ..report.views import note_words

        for n in result.notes:
            terminal.echo(note_words(result, n))
        terminal.echo(f"report: {paths[1]} ({paths[0].name})")
    if file_issue:
        # After a retraction the new answer has its own fingerprint: it is filed (a new issue, or a
        # comment on the issue of that answer) and the acknowledgement on the old issue links to it.
        # The report is already on disk: a filing failure keeps it and has its own exit code.
        from ..errors import EXIT_FILING_FAILED, GitHubError, UpstreamUnreachable

        try:
            outcome = _file_with_retries(ctx, recipe, result, paths[0].parent, echo)
        except (GitHubError, UpstreamUnreachable) as e:
            terminal.echo(f"github: filing failed after {len(FILE_RETRY_WAITS_S) + 1} attempts: {e}", err=True)
            terminal.echo(f"github: the report is kept in {paths[0].parent}; file it later with: bisectbot report file "
                       f"{paths[0]} --recipe {path}", err=True)
            return EXIT_FILING_FAILED
        terminal.echo(f"github: {outcome.action}: {outcome.message}", err=ctx.json)
        try:
            for line in _acknowledge(recipe, commands, result, outcome):
                terminal.echo(f"github: {line}", err=ctx.json)
        except (GitHubError, UpstreamUnreachable) as e:  # the next run acknowledges them
            terminal.echo(f"github: acknowledging maintainer commands failed: {e}", err=True)
    return exit_code(result, recipe.bisect.blame_confidence)


FILE_RETRY_WAITS_S = (2.0, 10.0)
"""Seconds waited before the 2nd and 3rd attempt to file (each attempt has the GitHub client's own
bounded retries inside). A retry is safe: the ledger's intent record and the fingerprint marker
make a repeated create find the issue of the first (issue 13)."""


def _file_with_retries(ctx: Ctx, recipe, result, out_dir: Path, echo):  # -> FilingOutcome
    """:func:`_file_issue` tried ``len(FILE_RETRY_WAITS_S) + 1`` times; re-raises the last failure."""
    import time

    from ..errors import GitHubError, UpstreamUnreachable

    waits = list(FILE_RETRY_WAITS_S)
    while True:
        try:
            return _file_issue(ctx, recipe, result, out_dir)
        except (GitHubError, UpstreamUnreachable) as e:
            if not waits:
                raise
            wait = waits.pop(0)
            echo(f"github: filing failed ({e}); retrying in {wait:.0f} s")
            time.sleep(wait)


def resume_command(state_dir: Path, recipe_path: Path, good: str | None, bad: str | None, out: str | None) -> str:
    """The command that resumes an interrupted ``run`` (finished probes come from the ledger)."""
    import shlex

    argv = ["bisectbot", "--state", str(Path(state_dir).resolve()), "run", str(Path(recipe_path).resolve())]
    for flag, val in (("--good", good), ("--bad", bad), ("--out", str(Path(out).resolve()) if out else None)):
        if val:
            argv += [flag, val]
    return shlex.join(argv)


PAGES_ENV = "BISECTBOT_PAGES_URL"
"""The dashboard's address for every recipe without ``report.pages_url`` (the nightly workflow sets
it from the repository variable of the same name)."""


def pages_url(recipe) -> str:
    """Where the dashboard is published: the recipe's ``report.pages_url``, else ``$BISECTBOT_PAGES_URL``,
    else ``""``. Raises :class:`BadInput` for an environment value that is not a plain http(s) address."""
    from ..recipe import PAGES_URL

    if recipe.report.pages_url:
        return recipe.report.pages_url
    env = os.environ.get(PAGES_ENV, "").strip()
    if env and not re.fullmatch(PAGES_URL, env):
        raise BadInput(f"${PAGES_ENV} {env[:80]!r}: not a plain http(s) address (https://OWNER.github.io/REPO)")
    return env


_LOG_SESSION = re.compile(r"^# bisectbot session (\S+?):", re.M)


def replay_notes(result, log_name: str, log_text: str, probed: int, fresh: set[str] | None = None) -> None:
    """What a replayed report must say (issue 25, input 6): the log and the session it came from
    (the ``# bisectbot session ID`` header ``bisect log`` writes), how many probes ran for candidates
    the log lacks (``probed``; ``fresh``: their refs), and never that the culprit and its predecessor
    were re-probed unless both were probed in this run."""
    m = _LOG_SESSION.search(log_text)
    origin = f" of session {m.group(1)}" if m else ""
    result.notes.insert(0, f"replayed from {Path(log_name).name}{origin}: its verdicts were taken as given"
                           + (f"; {probed} probe{'s' if probed != 1 else ''} run for candidates the log lacks"
                              if probed else "; nothing was probed"))
    final, fresh = result.final, fresh or set()
    ends = [c for c in (final.first_bad, final.last_good) if c is not None] if final is not None else []
    if ends and all(c.ref in fresh for c in ends):
        return
    said = ("the culprit's and its predecessor's verdicts come from the log (not re-probed)"
            if not any(c.ref in fresh for c in ends) else
            "only " + " and ".join(f"{c.ref[:12]}" for c in ends if c.ref in fresh) + " of the culprit and its "
            "predecessor was probed in this run; the other's verdict comes from the log")
    result.notes = [n.replace("the culprit and its predecessor were re-probed", said) for n in result.notes]


def nightly_diff(ctx: Ctx, result) -> dict | None:
    """What changed between the final range's last good and first bad nightly (the ``nightlies diff``
    of their images: vLLM, aiter, torch, ROCm versions and commits; introspected once per image and
    kept in the ledger), as ``{"old", "new", "components"}``; None when the range is not of nightlies.
    A failure is a note, never a failed run (issue 25, input 4)."""
    final = result.final
    ends = (final.last_good, final.first_bad) if final is not None else (None, None)
    if any(c is None or c.kind.value != "nightly" or not c.meta.get("image") for c in ends):
        return None
    from ..components import diff_images, image_info

    try:
        a, b = (image_info(str(c.meta["image"]), ledger=ctx.ledger()) for c in ends)
        changes = diff_images(a, b)
    except Exception as e:  # noqa: BLE001 - docker, registry or an odd image: the report says so
        result.notes.append(f"nightlies diff of the final range unavailable: {type(e).__name__}: {str(e)[:200]}")
        return None
    return {"old": {"image": a.get("image"), "digest": a.get("digest")},
            "new": {"image": b.get("image"), "digest": b.get("digest")},
            "components": [c.to_dict() for c in changes]}


def pinned_ends(recipe, path: Path, good: str | None, bad: str | None) -> tuple[str | None, str | None]:
    """``good``/``bad`` (else the recipe's ``bisect.good``/``bad``) of a git source as full SHAs: a
    resume line with ``HEAD~80`` or ``main`` means another range once the branch moves (issue 25).
    Other sources, and refs that do not resolve, are returned as given."""
    g, b = good or recipe.bisect.good, bad or recipe.bisect.bad
    if recipe.source.kind != "git":
        return good, bad
    try:
        from ..session.sources import GitCandidates

        repo = GitCandidates(recipe.source, path.parent).repo
        return (repo.resolve(g) if g else good), (repo.resolve(b) if b else bad)
    except Exception:  # noqa: BLE001 - the resume line must print even when git cannot answer
        return good, bad


def reproduce_command(recipe_path: Path, state_dir: Path, out_dir: Path, good: str, bad: str) -> str:
    """The report's Reproduce command: the recipe by absolute path, the same ``--state`` (ledger), the
    two ends, and a NEW output directory (``<out>/reproduce``), so running it never overwrites the
    report it came from (issue 14)."""
    import shlex

    argv = ["bisectbot", "--state", str(Path(state_dir).resolve()), "run", str(Path(recipe_path).resolve()),
            "--good", good, "--bad", bad, "--out", str(Path(out_dir).resolve() / "reproduce")]
    return shlex.join(argv)


def load_commands(path: Path):  # -> (list[Command], list[LogLine])
    """Maintainer commands from a ``report commands --json`` file and the human verdicts they give
    (as :func:`_maintainer_verdicts`). BadInput when the file is not such a list."""

    from ..models import Verdict
    from ..report.github import Command
    from ..session import LogLine

    try:
        raw = _jsonio.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise TypeError("not a list")
        commands = [Command.from_dict(d) for d in raw]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise BadInput(f"{path}: not a 'bisectbot --json report commands' list: {e}") from None
    human = [LogLine(Verdict(c.kind), c.ref, note=f"maintainer verdict by {c.author} in #{c.issue}")
             for c in commands if c.kind in ("good", "bad") and c.ref and not c.error]
    return commands, human


def _maintainer_verdicts(recipe):  # -> (list[Command], list[LogLine])
    """Trusted ``/bisectbot`` commands on the recipe's open issues (none without a token) and the
    human verdicts they give: ``good REF`` / ``bad REF`` hold on every run from then on."""
    from ..errors import GitHubError, UpstreamUnreachable
    from ..models import Verdict
    from ..report import read_commands
    from ..report.github import token_from_env
    from ..session import LogLine

    token = token_from_env()
    if not token or recipe.report.github is None:
        return [], []
    try:
        commands = read_commands(recipe.report.github, token, include_acknowledged=True)
    except (GitHubError, UpstreamUnreachable) as e:  # probe first: GitHub trouble never stops the bisection
        terminal.echo(f"github: cannot read maintainer commands, bisecting without them: {e}", err=True)
        return [], []
    human = [LogLine(Verdict(c.kind), c.ref, note=f"maintainer verdict by {c.author} in #{c.issue}")
             for c in commands if c.kind in ("good", "bad") and c.ref and not c.error]
    return commands, human


def _retractions(ctx: Ctx, result, commands):  # -> list[LogLine]
    """``/bisectbot retract`` on the issue this result's culprit was filed as: that culprit as skip."""
    from ..models import Status, Verdict
    from ..report import fingerprint
    from ..session import LogLine

    final = result.final
    if not commands or final is None or final.status is not Status.CULPRIT or final.first_bad is None:
        return []
    filed = ctx.ledger().github_issue(fingerprint(result))
    number = filed.get("number") if filed else None
    # the issue this culprit was filed as (this ledger knows it), or a bot issue whose body names the
    # culprit (read by the job that holds the token: the bisecting job has neither ledger row nor key)
    return [LogLine(Verdict.SKIP, final.first_bad.ref, note=f"culprit retracted by {c.author} in #{c.issue}")
            for c in commands if c.kind == "retract" and not c.error
            and ((number and c.issue == number) or final.first_bad.ref in (c.culprits or []))][:1]


def _acknowledge(recipe, commands, result, filed=None) -> list[str]:
    """Reply once to every command not acknowledged yet, saying what this run did with it
    (``filed``: the :class:`~bisectbot.report.github.FilingOutcome` of this run's result, linked
    from the reply to a retraction)."""
    from ..report import acknowledge
    from ..report.blame import blame_decision
    from ..report.github import token_from_env
    from ..report.views import heading

    token = token_from_env()
    out = []
    now = heading(result, blame_decision(result, recipe.bisect.blame_confidence))
    for c in commands:
        if c.acknowledged or c.kind in ("bisect", "cancel", "test"):  # bisect.yml, bisect-fanout.yml, try.yml answer those
            continue
        if c.kind == "retract":
            msg = f"the culprit is excluded and the search was run again. Now: {now}"
        else:
            msg = f"{c.ref} is taken as {c.kind} on this and later runs. Now: {now}"
        link = filed.url if c.kind == "retract" and filed is not None and filed.url else None
        o = acknowledge(c, recipe.report.github, token, msg, filed_url=link)
        out.append(f"{o.action}: {o.message}")
    return out


def newest_probe(result):  # -> ProbeResult | None
    """Tonight's probe of the newest nightly: the stage-1 probe of the bad end (the last candidate
    of stage 1), when that end is the newest nightly the run was given. None when stage 1 never
    probed it (e.g. a component-pair run)."""
    if not result.stages or not result.stages[0].candidates:
        return None
    st = result.stages[0]
    last = st.candidates[-1]
    for p in reversed(st.probes):
        if p.candidate.ref == last.ref and p.verdict.value in ("good", "bad"):
            return p
    return None


def _file_issue(ctx: Ctx, recipe, result, out_dir: Path):  # -> FilingOutcome
    """File the result on ``recipe.report.github``, or on the culprit component's ``github`` target
    (:func:`bisectbot.report.github.culprit_target`; issue 26), or comment on the issue with its fingerprint
    through :func:`bisectbot.report.file_or_update`; the token comes from the environment
    (:data:`bisectbot.report.github.TOKEN_ENV`); without one the would-be issue is written."""
    from ..report import file_or_update
    from ..report.github import culprit_target, token_from_env

    png = out_dir / "threshold.png"  # this run's chart (write_report removes an earlier run's)
    return file_or_update(result, culprit_target(recipe, result), token_from_env(), ctx.ledger(), False, out_dir,
                          newest=newest_probe(result), blame_confidence=recipe.bisect.blame_confidence,
                          chart_png=png if png.is_file() else None)


_run_options = [
    click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False)),
    click.option("--good", help="Known-good candidate (commit, tag; component=commit,... for component pairs)."),
    click.option("--bad", help="Known-bad candidate."),
    click.option("--dry-run", is_flag=True, help="Print the plan and the first candidates; probe nothing."),
    click.option("--out", type=click.Path(file_okay=False), help="Report directory (default: recipe report.dir)."),
    click.option("--runner", "runner_kind", type=click.Choice(["auto", "local", "container", "release"]),
                 default="auto", show_default=True,
                 help="Where candidates run (release: patch questions on package releases, no server)."),
    click.option("--parallel", type=click.IntRange(1, 64), help="Candidates probed at once (k-ary plan)."),
    click.option("--no-prefetch", "prefetch", is_flag=True, flag_value=False, default=True,
                 help="Do not prepare the next candidates in the background."),
]


def _apply(opts):
    def deco(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return deco


@cli.command("run")
@_apply(_run_options)
@click.option("--replay", type=click.Path(dir_okay=False, exists=True),
              help="Take verdicts from a 'bisectbot bisect log' file instead of probing those candidates.")
@click.option("--file-issue", is_flag=True,
              help="File the result on the recipe's report.github (or comment on the issue already filed for "
                   "it); token from BISECTBOT_GITHUB_TOKEN/GITHUB_TOKEN/GH_TOKEN, without one the would-be "
                   "issue is written to the report directory.")
@click.option("--retry-errors", is_flag=True,
              help="Probe again the candidates whose cached verdict is a skip (a failed build, a server that never "
                   "became healthy, an error); transient errors are never cached and need no flag.")
@click.option("--wait-lock", type=float, default=0.0, show_default=True, metavar="SECONDS",
              help="When another writer (run, round plan/import) holds this recipe's state: wait this long "
                   "for it (negative: forever), then exit naming it.")
@click.option("--verify/--no-verify", "verify", default=None,
              help="Re-probe the culprit and its predecessor before naming it (default: the recipe's "
                   "bisect.verify, true). --no-verify saves two probes and says so in the report.")
@click.option("--minimize", is_flag=True, help="After a verified culprit commit, search the smallest part of it "
              "(files, then hunks) that still fails on top of its predecessor (ddmin; bisect.minimize turns it on "
              "in the recipe, with its probe budget).")
@click.option("--commands", "commands_file", type=click.Path(dir_okay=False, exists=True),
              help="Maintainer /bisectbot commands as 'bisectbot --json report commands --all' wrote them: "
                   "their good/bad verdicts and retractions apply without a token (the bisecting job holds "
                   "no secret; a separate job reads and acknowledges the commands).")
@pass_ctx
@click.pass_context
def run(cctx: click.Context, ctx: Ctx, recipe_file: str, good: str | None, bad: str | None, dry_run: bool,
        out: str | None, runner_kind: str, parallel: int | None, prefetch: bool, replay: str | None,
        file_issue: bool, retry_errors: bool, wait_lock: float, verify: bool | None, minimize: bool,
        commands_file: str | None) -> None:
    """Bisect RECIPE between a good and a bad candidate; verify; write the report.

    \b
    Exit codes: 0 culprit found and blamed, 1 error, 2 bad input (recipe, arguments,
    a reproducer command that cannot run on either end), 3 inconclusive / range /
    no-regression / boundary-failed / culprit not blamed, 5 upstream unreachable,
    6 --file-issue: report written but filing failed, 130 interrupted.
    Interrupted runs resume from the ledger without re-probing (run the same command again).

    \b
    Examples:
      bisectbot run glm51-fp8-sparse-mla-prefill --dry-run
      bisectbot demo && bisectbot run bisectbot-demo-out/work/demo-engine-prefill.yaml --no-verify --out quick/
      bisectbot run glm51-fp8-sparse-mla-prefill --good nightly_main_20260401 --bad nightly_main_20260406
      GITHUB_TOKEN=... bisectbot run glm51-fp8-sparse-mla-prefill --file-issue   # up to the newest nightly
    """
    with _writer(ctx, recipe_file, wait_lock, dry_run):
        code = _run(ctx, recipe_file, good, bad, dry_run, replay, out, runner_kind, parallel, prefetch, file_issue,
                    retry_errors=retry_errors, verify=verify, commands_file=commands_file, minimize=minimize)
    cctx.exit(code)


BISECT_EPILOG = """\b
Examples:
  bisectbot demo                                              # leaves a session in its ledger
  bisectbot --state bisectbot-demo-out/work/state bisect log > session.log
  bisectbot --state bisectbot-demo-out/work/state bisect replay bisectbot-demo-out/work/demo-engine-prefill.yaml \\
      session.log --out replayed/
  bisectbot bisect plan vllm-workspace-fix-retirement
"""


@cli.group("bisect", epilog=BISECT_EPILOG)
def bisect_group() -> None:
    """Session logs, replays and plans of bisections."""


@bisect_group.command("log")
@click.argument("session", required=False)
@click.option("--recipe", "recipe_name", help="Latest session of this recipe name.")
@pass_ctx
def bisect_log(ctx: Ctx, session: str | None, recipe_name: str | None) -> None:
    """Print a session as a readable log (verdict lines replayable with --replay)."""
    from ..session import format_log

    led = ctx.existing_ledger()
    if session:
        s = led.get_session(session)
        if s is None:
            raise BadInput(f"no session {session!r} in {led.path}; 'bisectbot bisect log' lists the latest")
    else:
        all_s = led.sessions(recipe_name)
        if not all_s:
            raise BadInput(f"no bisection session{' for ' + recipe_name if recipe_name else ''} in {led.path}")
        s = max(all_s, key=lambda x: (x["updated"], x["created"]))
    events = led.events(s["id"])
    if ctx.json:
        ctx.emit({"session": s, "events": events})
    else:
        terminal.echo(format_log(s, events), nl=False)


@bisect_group.command("replay")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.argument("log_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--good", help="Known-good candidate (default: the recipe's bisect.good).")
@click.option("--bad", help="Known-bad candidate (default: the recipe's bisect.bad).")
@click.option("--out", type=click.Path(file_okay=False), help="Report directory (default: recipe report.dir).")
@click.option("--runner", "runner_kind", type=click.Choice(["auto", "local", "container", "release"]), default="auto",
              show_default=True, help="Where the candidates the log lacks run.")
@pass_ctx
@click.pass_context
def bisect_replay(cctx: click.Context, ctx: Ctx, recipe_file: str, log_file: str, good: str | None,
                  bad: str | None, out: str | None, runner_kind: str) -> None:
    """Re-run a bisection taking verdicts from LOG_FILE; candidates it lacks are probed."""
    with _writer(ctx, recipe_file, 0.0):
        code = _run(ctx, recipe_file, good, bad, False, log_file, out, runner_kind, None, True)
    cctx.exit(code)


@bisect_group.command("plan")
@click.argument("recipe_file", metavar="RECIPE", type=click.Path(dir_okay=False))
@click.option("--good", help="Known-good candidate (default: the recipe's bisect.good).")
@click.option("--bad", help="Known-bad candidate (default: the recipe's bisect.bad).")
@click.option("-k", "--parallel", type=click.IntRange(1, 64), help="Free runners: candidates probed at once.")
@pass_ctx
def bisect_plan(ctx: Ctx, recipe_file: str, good: str | None, bad: str | None, parallel: int | None) -> None:
    """Print the plan (range, search mode, first probes) without probing."""
    _run(ctx, recipe_file, good, bad, True, None, None, "auto", parallel, True)
