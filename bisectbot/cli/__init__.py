"""The ``bisectbot`` command line (click).

Each command group lives in its own module of this package (``*_cmd.py``); the
top-level group and global options are in :mod:`bisectbot.cli.base`.

Exit codes: 0 done / culprit found, 1 error, 2 usage or bad input, 3 inconclusive,
4 server error (``probe``). See :mod:`bisectbot.errors`.
"""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_BAD_INPUT, BisectbotError
from ..secrets import install_stream_redaction
from . import (  # noqa: F401  (modules register their commands on import)
    build_cmd,
    demo_cmd,
    nightlies_cmd,
    patches_cmd,
    probe_cmd,
    recipe_cmd,
    report_cmd,
    run_cmd,
    runner_cmd,
)
from .base import Ctx, cli, pass_ctx

__all__ = ["Ctx", "cli", "main", "pass_ctx"]


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning :class:`BisectbotError` into one line and its exit code.

    Everything the process prints passes :func:`bisectbot.secrets.redact`."""
    install_stream_redaction()
    try:
        rv = cli.main(args=argv, prog_name="bisectbot", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_BAD_INPUT if isinstance(e, click.UsageError) else e.exit_code)
    except BisectbotError as e:
        click.echo(f"bisectbot: error: {e}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


