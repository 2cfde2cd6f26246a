"""The ``bisectbot`` command line (click).

Each command group lives in its own module of this package (``*_cmd.py``); the
top-level group and global options are in :mod:`bisectbot.cli.base`.

Exit codes: 0 done / culprit found, 1 error (``probe``: garbage found), 2 usage or bad input,
3 inconclusive, 4 server error (``probe``), 70 internal error (a bug: never 1). See
:mod:`bisectbot.errors`.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import TextIO

import click

from ..errors import (
    EXIT_BAD_INPUT,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    BisectbotError,
    UpstreamUnreachable,
)
from ..secrets import install_stream_redaction
from ..terminal import inert
from . import (  # noqa: F401  (modules register their commands on import)
    build_cmd,
    dashboard_cmd,
    demo_cmd,
    launch_cmd,
    nightlies_cmd,
    patches_cmd,
    probe_cmd,
    recipe_cmd,
    report_cmd,
    round_cmd,
    run_cmd,
    runner_cmd,
    try_cmd,
)
from .base import Ctx, JsonOut, cli, error_document, json_anywhere, pass_ctx

__all__ = ["Ctx", "cli", "main", "pass_ctx"]


def _kind(exc: BaseException) -> str:
    """``BadInput`` -> ``bad-input``, ``RecipeError`` -> ``recipe``, ``UsageError`` -> ``usage``."""
    if isinstance(exc, UpstreamUnreachable):  # one kind for registry, package index and GitHub
        return "upstream-unreachable"
    name = re.sub(r"(?<!^)(?=[A-Z])", "-", type(exc).__name__.replace("GitHub", "Github")).lower()
    return name.removesuffix("-error").removesuffix("-exception") or "error"


def _swap_stdout() -> TextIO:
    """Send file descriptor 1 (and ``sys.stdout``, and any child process) to stderr; return a stream on
    the real stdout for the one ``--json`` document."""
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(real, "w", encoding="utf-8")


def _invoke(args: list[str], as_json: bool) -> int:
    def fail(kind: str, message: str, code: int) -> int:
        if as_json and not JsonOut.emitted:
            JsonOut.write(error_document(kind, message, code))
        return code

    try:
        rv = cli.main(args=args, prog_name="bisectbot", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return fail("interrupted", "aborted", EXIT_INTERRUPTED)
    except click.ClickException as e:
        e.show()
        code = EXIT_BAD_INPUT if isinstance(e, click.UsageError) else e.exit_code
        return fail(_kind(e), e.format_message(), code)
    except BisectbotError as e:
        click.echo(f"bisectbot: error: {inert(str(e), multiline=True)}", err=True)
        return fail(_kind(e), str(e), e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return fail("interrupted", "interrupted", EXIT_INTERRUPTED)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_ERROR)
        if code and not isinstance(e.code, int):
            click.echo(str(e.code), err=True)
        rv = code
    except OSError as e:
        from ..run.host import exception_cause, host_message, is_host_errno

        if not is_host_errno(e):
            return _internal(e, fail)
        # the boundary for every command: the disk filled (or a quota, a read-only file system) under
        # one of the bot's own writes, wherever it was -- a ledger row, a log, a worktree -- is the host,
        # exit 1 with the cause, never a traceback and exit 70 (issue 41, item 12)
        msg = host_message("writing the bot's files", exception_cause(e) or str(e))
        click.echo(f"bisectbot: error: {inert(msg, multiline=True)}", err=True)
        return fail("host", msg, EXIT_ERROR)
    except Exception as e:  # a bug: the traceback goes to stderr, the contract still holds on stdout
        return _internal(e, fail)
    code = rv if isinstance(rv, int) else 0
    if as_json and not JsonOut.emitted:  # a command without a document of its own (e.g. --help)
        if code:
            return fail("failed", f"exited with code {code}", code)
        JsonOut.write({"exit_code": code})
    return code


def _internal(e: Exception, fail: Callable[[str, str, int], int]) -> int:
    """A bug: the traceback goes to stderr, the contract still holds on stdout."""
    # never exit 1: probe's "garbage found" (issue 25: a reply made of Rich markup crashed
    # the table and read as a garbage verdict)
    traceback.print_exc()
    click.echo(f"bisectbot: internal error (a bug, exit {EXIT_INTERNAL}): {type(e).__name__}: "
               f"{inert(str(e))[:500]}", err=True)
    return fail("internal", f"{type(e).__name__}: {e}", EXIT_INTERNAL)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning :class:`BisectbotError` into one line and its exit code.

    With ``--json`` (before or after the subcommand) exactly one JSON document goes to stdout, on
    success and on error (``{"error": {"kind", "message"}, "exit_code"}``); everything else, child
    processes included, goes to stderr. Everything the process prints passes
    :func:`bisectbot.secrets.redact`.
    """
    from .. import gitenv
    from ..reaper import harden_process
    from ..secrets import RedactingStream, take_secrets

    harden_process()  # non-dumpable, child subreaper (issue 24, input 2: bisectbot.reaper)
    take_secrets()  # tokens leave os.environ: no child of the bot inherits one (issue 36, input 1)
    gitenv.install()  # the bot's git runs no hook, fsmonitor or driver a repository chose (input 2)
    args = list(sys.argv[1:] if argv is None else argv)
    args = json_anywhere(args)
    as_json = bool(args) and args[0] == "--json"
    out = RedactingStream(_swap_stdout()) if as_json else None
    install_stream_redaction()
    JsonOut.reset(out)
    try:
        code = _invoke(args, as_json)
    finally:
        if out is not None:
            out.flush()
    sys.exit(code)
