"""Reports and GitHub: render results, sanitise untrusted text, file or update issues.

One file per thing rendered:

* :mod:`.markdown` -- the run's ``report.md`` and ``result.json`` (:func:`render_markdown`,
  :func:`render_json`), and the Reproduce section;
* :mod:`.issue` -- the would-be GitHub issue (:func:`render_issue`) and its chart;
* :mod:`.comment` -- comments on a filed issue (:func:`render_comment`);
* :mod:`.reproduce_kit` -- the reproduce kit (request script, commands) beside a report;
* :mod:`.files` -- the report directory (:func:`write_report`) and the job summary;
* :mod:`.load` -- reading a ``result.json`` back (:func:`load_result`);
* shared by them: :mod:`.views` (headings, links, rows, excerpts), :mod:`.blame` (whether a
  culprit may be named), :mod:`.evidence` (a culprit's evidence), :mod:`.templating` (Jinja2
  and the size limit), :mod:`.words`, :mod:`.links`, :mod:`.chart`;
* GitHub: :mod:`.github` (filing, commands), :mod:`.reply` (answers to commands),
  :mod:`.fingerprint` (issue identity), :mod:`.filed`, :mod:`.published`, :mod:`.history`.

Size discipline: every body is kept under :data:`~bisectbot.sanitize.GITHUB_BODY_LIMIT`
(65,536 characters) by shrinking the least important parts first, in this order: log and
model-output excerpts (shorter, then fewer), reasons, rows of the probe tables, notes, patch
rows, environment values. Only if all that is not enough is the text cut hard (with the open
code fence closed and a note).

Expected ``Candidate.meta`` keys (all optional): ``subject`` (commit subject), ``author_login``
(or ``author``), ``url`` (http/https link to the commit or image), ``date``.
Expected ``ProbeResult.table`` row keys (all optional): ``prompt_tokens`` (measured), ``requested``
or ``size`` (prompt tokens asked for), ``outcome``, ``reasons`` (str or list), and free text
under ``reply``/``output``/``content``/``reasoning``/``excerpt``, shown collapsed.

Public API (other areas call these):

* :func:`render_markdown(result, nightly=None, *, limit=65536, for_issue=False, ...) -> str`
* :func:`render_json(result, nightly=None) -> str`
* :func:`write_report(result, out_dir, nightly=None, ...) -> ReportPaths`
* :func:`sanitize(text, limit) -> str`, :func:`code_block(text, limit, keep="tail")`
* :func:`fingerprint(result) -> str`
* :func:`file_or_update(result, target, token, ledger, dry_run, out_dir, ...) -> FilingOutcome`
* :func:`report_not_reproduced(fp_or_result, newest, target, token, ledger, dry_run, out_dir, ...)`
* :func:`read_commands(target, token, issues=None) -> list[Command]`, :func:`acknowledge(command, target, token, message)`
* :func:`dispatch_bisection(target, token, recipe, good, bad)` (e.g. a fix bisection)
* :class:`NightlyResult` (per-nightly probes, oldest first) and its :class:`Streak`
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..sanitize import GITHUB_BODY_LIMIT, code_block, redact, sanitize
from .fingerprint import fingerprint, marker  # light modules: bound now (their names clash with
from .history import NightlyResult, Streak, problem_present  # the submodules', so never lazily)

# The rest is imported from its module on first use (PEP 562): rendering a report must not pay for
# the GitHub client (PyGithub, ~0.2 s), which only filing needs (issue 15).
_WHERE = {
    "Command": "github", "FilingOutcome": "github", "GitHubClient": "github", "acknowledge": "github",
    "dispatch_bisection": "github", "file_or_update": "github", "read_commands": "github",
    "report_not_reproduced": "github",
    "ReportPaths": "files", "blame_decision": "blame", "load_result": "load", "render_comment": "comment",
    "render_issue": "issue", "render_json": "markdown", "render_markdown": "markdown", "write_report": "files",
}

__all__ = [
    "Command", "FilingOutcome", "GitHubClient", "acknowledge", "dispatch_bisection", "file_or_update",
    "read_commands", "report_not_reproduced",
    "GITHUB_BODY_LIMIT", "NightlyResult", "ReportPaths", "Streak", "blame_decision", "code_block", "fingerprint",
    "load_result", "marker", "problem_present", "redact", "render_comment", "render_issue", "render_json",
    "render_markdown", "sanitize", "write_report",
]
assert set(__all__) == set(_WHERE) | {"fingerprint", "marker", "NightlyResult", "Streak", "problem_present",
                                      "GITHUB_BODY_LIMIT", "code_block", "redact", "sanitize"}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:  # for type checkers and editors: the lazy names
    from .blame import blame_decision
    from .comment import render_comment
    from .files import ReportPaths, write_report
    from .github import (
        Command,
        FilingOutcome,
        GitHubClient,
        acknowledge,
        dispatch_bisection,
        file_or_update,
        read_commands,
        report_not_reproduced,
    )
    from .issue import render_issue
    from .load import load_result
    from .markdown import render_json, render_markdown
