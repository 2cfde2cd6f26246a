"""The prefill-threshold reproducer: the bot's eyes.

Public API (other areas call these):

* :func:`bisectbot.reproduce.threshold.search_threshold` ``(endpoint, spec, model=None, log=None,
  timeout_s=600.0) -> ThresholdResult`` -- one running OpenAI-compatible server.
* :func:`bisectbot.reproduce.command.search_threshold_command` ``(run, spec, log=None) -> ThresholdResult``
  where ``run(size) -> CommandRun``; :func:`bisectbot.reproduce.command.run_argv` ``(argv, size, source,
  timeout_s, cwd=None, env=None) -> CommandRun`` runs one command in a fresh process.
* :func:`bisectbot.reproduce.classify.classify` ``(reply, spec, needles) -> Classification``.
* :class:`bisectbot.reproduce.client.Client` / :class:`Reply`, :class:`bisectbot.reproduce.prompts.PromptBuilder`.

Modules: ``prompts`` (token-sized deterministic prompts with needles), ``client``
(OpenAI-compatible chat), ``classify`` (garbage classifiers), ``threshold`` (sweep +
refine), ``command`` (command reproducer). Sizes are prompt **tokens** everywhere.
"""

from __future__ import annotations

from .classify import Classification, Signal, classify
from .client import Client, Reply
from .command import run_argv, search_threshold_command
from .search import SizeResult, ThresholdResult
from .threshold import search_threshold

__all__ = ["Classification", "Client", "Reply", "Signal", "SizeResult", "ThresholdResult", "classify",
           "run_argv", "search_threshold", "search_threshold_command"]
