"""Reports and GitHub: render results, sanitise untrusted text, file or update issues.

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

from .fingerprint import fingerprint, marker
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
from .history import NightlyResult, Streak, problem_present
from .render import (
    ReportPaths,
    blame_decision,
    load_result,
    render_comment,
    render_issue,
    render_json,
    render_markdown,
    write_report,
)
from .sanitize import GITHUB_BODY_LIMIT, code_block, redact, sanitize

__all__ = [
    "Command", "FilingOutcome", "GitHubClient", "acknowledge", "dispatch_bisection", "file_or_update",
    "read_commands", "report_not_reproduced",
    "GITHUB_BODY_LIMIT", "NightlyResult", "ReportPaths", "Streak", "blame_decision", "code_block", "fingerprint",
    "load_result", "marker", "problem_present", "redact", "render_comment", "render_issue", "render_json",
    "render_markdown", "sanitize", "write_report",
]
