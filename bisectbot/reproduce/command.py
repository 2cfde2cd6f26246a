"""Command reproducer: the same threshold search over a size, one fresh process per run.

For kernel-level checks (is ``rocm_fp8_mqa_logits`` itself wrong past ~25K tokens?)
the recipe gives an argv with ``{size}`` (tokens) and ``{source}`` (the candidate's
source tree) placeholders. The exit status says what happened, as ``git bisect run``:

* 0 -- OK at that size
* 1..124 -- bad (``GARBAGE`` in the table, reason ``exit N``)
* 125 -- cannot test at that size (``INCONCLUSIVE``, reason ``skip``)
* 126/127 -- the command cannot run (not executable / not found): ``ERROR``
* killed by a signal (or exit > 128, a shell's report of one) or timed out -- bad with
  reason ``crash`` / ``timeout``, unless ``spec.command_crash`` is ``"skip"``
  (then ``INCONCLUSIVE``). A GPU fault poisons the process, hence a fresh one per size.

Stdout/stderr tails (last 4 KB) are kept in each size's ``evidence``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from .. import sandbox
from ..bounded import ProcessRun, run_process
from ..errors import BadInput
from ..models import Outcome
from ..recipe import ReproducerSpec
from ..run.base import CommandRun
from ..secrets import candidate_env
from .search import SizeResult, ThresholdResult, effective_repeats, one_sided, search

TAIL_BYTES = 4096


def substitute(argv: list[str], size: int, source: Path | None) -> list[str]:
    """Replace ``{size}`` and ``{source}`` in every argument.

    Raises :class:`BadInput` when ``{source}`` is used but there is no source tree.
    """
    out = []
    for a in argv:
        if "{source}" in a:
            if source is None:
                raise BadInput(f"command argument {a!r} uses {{source}} but the candidate has no source tree")
            a = a.replace("{source}", str(source))
        out.append(a.replace("{size}", str(size)))
    return out


def _git_dirs(source: Path | None) -> list[Path]:
    """The git directory of a source tree that is a checkout (``DIR/.git``, or the directories a
    worktree's ``.git`` file names): read-only to the command, which could plant hooks there."""
    if source is None:
        return []
    dot = Path(source) / ".git"
    if dot.is_dir():
        return [dot]
    if dot.is_file():
        # the command may have written this file (a probe runs it many times in the same tree): what it
        # names is shown only when it is a git directory outside every hidden path -- else a `.git`
        # naming ~/.config/gh/hosts.yml showed that file to the next size (second hostile pass, issue 36)
        text = dot.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = (Path(source) / text.removeprefix("gitdir:").strip()).resolve()
            common = gitdir / "commondir"
            out = [gitdir]
            if common.is_file():
                out.append((gitdir / common.read_text().strip()).resolve())
            hide = sandbox.hidden_paths()

            def shown(g: Path) -> bool:
                is_git = (g / "HEAD").is_file() and ((g / "objects").is_dir() or (g / "commondir").is_file())
                return is_git and not any(g == h or h in g.parents or g in h.parents for h in hide)

            return [g for g in out if shown(g)]
    return []


def run_argv(argv: list[str], size: int, source: Path | None, timeout_s: float, cwd: str | Path | None = None,
             env: dict[str, str] | None = None, passthrough: list[str] | tuple[str, ...] = (),
             log_path: str | Path | None = None, network: str = "loopback") -> CommandRun:
    """Run ``argv`` once for ``size`` (tokens) in a fresh process (its own process group).
    ``network``: the sandbox's network (:data:`bisectbot.sandbox.NETWORKS`; the recipe's
    ``server.network``, default ``loopback``: a private ``lo`` only).

    ``timeout_s`` seconds; on timeout the whole process group is killed and
    ``CommandRun(returncode=None, timed_out=True)`` is returned. Stdout/stderr go to ``log_path``
    (when given) and only their last :data:`TAIL_BYTES` stay in memory. ``env`` is added to an
    allow-listed environment (:func:`bisectbot.secrets.candidate_env`: the bot's tokens never
    reach the command; ``passthrough`` names more host variables). A command that cannot start gives return code 127
    (not found) or 126 (not executable), like a shell. Raises :class:`BadInput` for a
    ``{source}`` placeholder without a source tree, :class:`bisectbot.sandbox.SandboxUnavailable`
    when the command cannot be sandboxed, and :class:`bisectbot.sandbox.SandboxSetupFailed` when the
    sandbox could not be set up in any attempt (the host, never the command's outcome) (``BISECTBOT_SANDBOX=off`` opts out). The command runs in
    the candidates' sandbox (:func:`bisectbot.sandbox.wrap`): ``source`` (else ``cwd``, else the
    working directory) is its writable tree, a checkout's git directory is read-only.
    """
    args = substitute(argv, size, source)
    full_env = candidate_env(env, passthrough=passthrough)
    t0 = time.monotonic()

    def once(launch: sandbox.Launch | None) -> ProcessRun:
        # the sandbox of every candidate process (issue 36): ``bisectbot probe --recipe R --source DIR``
        # runs the candidate's code outside any runner; DIR (else the working directory) is its tree
        wargv, wenv = sandbox.wrap(args, tree=Path(source or cwd or "."), env=full_env, cwd=cwd,
                                   readonly=_git_dirs(source), network=network, launch=launch)
        # output streams through reader threads: only TAIL_BYTES of each stay in memory (issue 13)
        return run_process(wargv, timeout_s=timeout_s, cwd=cwd, env=wenv, log_path=log_path, tail_bytes=TAIL_BYTES,
                           pass_fds=launch.pass_fds if launch else ())

    try:
        r, launch = sandbox.launched(once, lambda r: r.stderr_tail, what=f"running {args[0]!r} for {size} tokens")
    except FileNotFoundError as e:
        return CommandRun(127, time.monotonic() - t0, "", f"cannot run {args[0]!r}: {e.strerror}")
    except PermissionError as e:
        return CommandRun(126, time.monotonic() - t0, "", f"cannot run {args[0]!r}: {e.strerror}")
    failed = sandbox.ended(launch, args[0])
    if failed is not None:  # the launcher could not exec it: the command never ran (126/127, as a shell)
        return CommandRun(failed[0], r.duration_s, "", failed[1])
    return CommandRun(r.returncode, r.duration_s, r.stdout_tail, r.stderr_tail, timed_out=r.timed_out)


def command_outcome(run: CommandRun, crash: str = "bad") -> tuple[Outcome, str]:
    """(outcome, reason) of one run; ``crash`` is ``"bad"`` or ``"skip"`` for signals/timeouts."""
    rc = run.returncode
    if run.timed_out or rc is None:
        reason = f"timeout after {run.duration_s:.0f} s"
        return (Outcome.INCONCLUSIVE if crash == "skip" else Outcome.GARBAGE), reason
    if rc < 0 or rc > 128:
        sig = -rc if rc < 0 else rc - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return (Outcome.INCONCLUSIVE if crash == "skip" else Outcome.GARBAGE), f"crash ({name})"
    if rc == 0:
        return Outcome.OK, ""
    if rc == 125:
        return Outcome.INCONCLUSIVE, "skip (exit 125: cannot test at this size)"
    if rc in (126, 127):
        return Outcome.ERROR, f"command cannot run (exit {rc})"
    if rc == 128:
        return Outcome.ERROR, "exit 128 (aborts, as git bisect run)"
    return Outcome.GARBAGE, f"exit {rc}"


def search_threshold_command(run: Callable[[int], CommandRun], spec: ReproducerSpec,
                             log: Callable[[str], None] | None = None,
                             focus: list[int] | None = None) -> ThresholdResult:
    """Threshold search where ``run(size)`` runs the command once for ``size`` tokens in a
    fresh process. ``repeats`` runs per size combine one-sidedly (issue 12): the first run
    that fails decides GARBAGE (a healthy build essentially never fails; a majority vote
    would turn a bug that shows in 30 % of runs into an 84 % miss), as in
    :func:`bisectbot.reproduce.search.one_sided`. Returns a
    :class:`ThresholdResult` (``requests`` counts command runs); ``error`` status when the
    command cannot run at all. ``focus``: sizes (tokens) where the bisection's bad end failed,
    run first (:func:`bisectbot.reproduce.focus.focused_search`, issue 23).
    """
    n = max(1, effective_repeats(spec.model_copy(update={"concurrency": 1})))
    crash = spec.command_crash

    def probe(size: int) -> SizeResult:
        t0 = time.monotonic()
        outs: list[Outcome] = []
        reasons: list[str] = []
        runs: list[CommandRun] = []
        for _ in range(n):
            r = run(size)
            runs.append(r)
            o, why = command_outcome(r, crash)
            outs.append(o)
            if why:
                reasons.append(why)
            if o in (Outcome.ERROR, Outcome.GARBAGE):
                break
            if outs.count(Outcome.OK) == n:
                break
        votes: dict[str, int] = {}
        for o in outs:
            votes[o.value] = votes.get(o.value, 0) + 1
        last = runs[-1]
        evidence = {"returncode": last.returncode, "timed_out": last.timed_out,
                    "stdout_tail": last.stdout_tail[-1000:], "stderr_tail": last.stderr_tail[-1000:]}
        if Outcome.ERROR in outs:
            return SizeResult(size, size, Outcome.ERROR, reasons[-1:], 1.0, votes, len(runs),
                              time.monotonic() - t0, evidence=evidence, error_kind="command")
        outcome, agreement = one_sided(outs)  # any failing run shows the bug
        if outcome == Outcome.INCONCLUSIVE:
            reasons = reasons or ["no run could test this size"]
        text = (last.stderr_tail or last.stdout_tail).strip().splitlines()
        return SizeResult(size, size, outcome, sorted(set(reasons)) if outcome != Outcome.OK else [], agreement,
                          votes, len(runs), time.monotonic() - t0, excerpt=(text[-1] if text else "")[:120],
                          evidence=evidence)

    # a command run's cost is mostly its start (a fresh process, often a model load), not the
    # size: plain bisection, the fewest runs, rather than the prompt-token-saving low splits
    if focus:
        from .focus import focused_search

        return focused_search(probe, spec, spec.min_size, spec.max_size, focus, log=log, size_budget=None)
    return search(probe, spec, log=log, size_budget=None)
