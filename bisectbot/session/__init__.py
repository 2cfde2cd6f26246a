"""Orchestration of ``bisectbot run``: candidates -> probes -> search -> verification -> report.

One :class:`Session` (:mod:`.core`) drives :class:`bisectbot.bisect.Bisection` (the pure search) with
a :class:`bisectbot.run.base.CandidateRunner` (local worktrees or containers):

* **Stage 1** over the recipe's source (a git range here; nightlies and releases plug in
  through :func:`register_source`), then, when the first-bad and last-good candidates
  name their component commits (``meta["commits"]``), the **component stage**: mixed
  pairs attribute the regression to one component when several changed, and that
  component's first-parent commits are bisected with the others pinned.
* Every probe is cached in the ledger under (candidate ref, build key, reproducer key =
  ``recipe.verdict_hash()``, triage toggle, attempt number). The search is
  deterministic given the verdicts, so a run that was interrupted (Ctrl-C, ``kill -9``,
  reboot) re-runs from the start, takes every finished probe from the cache, and
  continues with the first one that never finished: no probe is repeated.
* Each verdict is appended to the session's event log (``bisectbot bisect log``), printed
  as a progress line, and a replay file (``--replay``) can force verdicts instead.
* While a candidate is probed, the two candidates that can come next are prepared in
  the background (prefetch); the one not needed is released.

Result: a :class:`bisectbot.models.RunResult`, written by :func:`write_report` as JSON
and Markdown to ``recipe.report.dir``.

What lives where (the file list reads as the steps of a night). The session is composition,
not inheritance:

* :mod:`.core` -- :class:`Session`: builds the collaborators below and runs the stages in
  order (:meth:`Session.run`); a new stage is an object built there and called at its place.
  :mod:`.lock`: one writer per session.
* :mod:`.sources` -- stage-1 candidate sources (git, nightlies, releases).
* :mod:`.stages` -- the searches, in the order a run meets them: :mod:`.stages.first` (the
  recipe's source), :mod:`.stages.components` (attribution and the component-commit stage),
  :mod:`.stages.descent` (pins), :mod:`.stages.merges` (a merge culprit's branch),
  :mod:`.stages.drift` (the threshold-drift search), :mod:`.stages.triage` (toggles on the
  first bad). Each is given the prober, the loop and the recipe in its constructor.
* :mod:`.rounds` -- :class:`~.rounds.loop.RoundLoop`: one stage's search in rounds (plan with
  the search, run a batch through an executor, feed the verdicts back); :mod:`.rounds.plan`
  and :mod:`.rounds.verdict_file` for round-driven sessions (``bisectbot round``).
* :mod:`.probing` -- :class:`~.probing.prober.Prober` (the probe cache and the one writer of
  the run's ledger rows; it builds the stage's :class:`bisectbot.run.probe.ProbeContext`),
  :mod:`.probing.executor` (running probes), :mod:`.probing.prefetch`,
  :mod:`.probing.oracles` (the reference server, issue 18), :mod:`.probing.withheld`.
* :mod:`.replay` (session logs and replay files), :mod:`.result` (the run's result, report
  files, ``--dry-run`` plan).

Verdicts are decided in :mod:`bisectbot.verdict`, never here.
"""

from ..pins import parse_pins
from ..run.probe import ProbeJob
from .core import Session
from .probing.executor import Executor, LocalExecutor, probe_key, run_probe
from .probing.prefetch import Prefetcher
from .replay import LogLine, format_log, parse_replay
from .result import (
    exit_code,
    fill_patch_states,
    finish_result,
    new_result,
    nightly_history,
    patch_summary,
    plan_text,
    write_report,
)
from .rounds.loop import phase_of
from .sources import (
    CandidateSource,
    GitCandidates,
    RegistryCandidates,
    make_source,
    register_source,
    resolve_ends,
)

__all__ = [
    "CandidateSource", "Executor", "GitCandidates", "LocalExecutor", "LogLine", "Prefetcher", "ProbeJob",
    "RegistryCandidates", "Session", "exit_code", "fill_patch_states", "finish_result", "format_log",
    "make_source", "new_result", "nightly_history", "parse_pins", "parse_replay", "patch_summary", "phase_of",
    "plan_text", "probe_key", "register_source", "resolve_ends", "run_probe", "write_report",
]
