"""The contract between the bisection (``bisectbot.session``) and a runner.

A runner *prepares* a candidate (build an image / check out a worktree, apply the
patch stack) and then either starts its server (prefill reproducer) or runs a
command in it (command reproducer). Preparation failures are not errors of the
bot: they make the candidate ``skip`` with a reason.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..models import Candidate


@dataclass
class Prepared:
    """A candidate ready to run.

    ``build_key`` identifies exactly what will run (image digest/tag or tree hash +
    patch-stack hash + overlay); it is part of the probe cache key. ``source`` is a
    host path of the candidate's source tree when there is one (``{source}``).
    ``patches`` lists per-patch state and SHA-256 before/after (see ``bisectbot.patches``).
    """

    candidate: Candidate
    build_key: str
    source: Path | None = None
    image: str | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    log_paths: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class PrepareFailed:
    """The candidate cannot be tested (build failed, required patch conflicts...): verdict ``skip``."""

    candidate: Candidate
    reason: str
    log_paths: list[str] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Server:
    """A running OpenAI-compatible server. ``base_url`` like ``http://127.0.0.1:8123``."""

    base_url: str
    log_path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommandRun:
    """Result of one command-reproducer run. ``returncode`` None means killed by timeout;
    negative means killed by that signal. ``duration_s`` in seconds; tails are the last
    few KB of output."""

    returncode: int | None
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    timed_out: bool = False


class CandidateRunner(Protocol):
    """What ``bisectbot.session`` needs from a runner."""

    def prepare(self, candidate: Candidate) -> Prepared | PrepareFailed:
        """Build/check out the candidate and apply the patch stack."""
        ...

    def server(self, prepared: Prepared, env: dict[str, str] | None = None,
               args: list[str] | None = None) -> AbstractContextManager[Server]:
        """Start the server (extra ``env``/``args`` from triage toggles); always stopped on exit.

        Raises :class:`bisectbot.errors.ServerError` when it never becomes healthy.
        """
        ...

    def run_command(self, prepared: Prepared, argv: list[str], timeout_s: float) -> CommandRun:
        """Run one command (``{source}`` already substituted) in a fresh process."""
        ...

    def release(self, prepared: Prepared) -> None:
        """Drop what ``prepare`` made when it is no longer needed (worktree, image tag)."""
        ...


