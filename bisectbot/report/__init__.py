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

import importlib
from typing import TYPE_CHECKING, Any

from .fingerprint import fingerprint, marker  # light modules: bound now (their names clash with
from .history import NightlyResult, Streak, problem_present  # the submodules', so never lazily)
from .sanitize import GITHUB_BODY_LIMIT, code_block, redact, sanitize

# The rest is imported from its module on first use (PEP 562): rendering a report must not pay for
# the GitHub client (PyGithub, ~0.2 s), which only filing needs (issue 15).
_WHERE = {
    "Command": "github", "FilingOutcome": "github", "GitHubClient": "github", "acknowledge": "github",
    "dispatch_bisection": "github", "file_or_update": "github", "read_commands": "github",
    "report_not_reproduced": "github",
    "ReportPaths": "render", "blame_decision": "render", "load_result": "render", "render_comment": "render",
    "render_issue": "render", "render_json": "render", "render_markdown": "render", "write_report": "render",
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
