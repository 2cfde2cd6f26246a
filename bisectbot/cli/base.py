"""Top-level click group, global options and shared helpers of the CLI.

Each command group lives in its own module of this package; this module holds the
top-level group, the global options and the error-to-exit-code translation.

Exit codes: 0 done / culprit found, 1 error, 2 usage or bad input, 3 inconclusive,
4 server error (``probe``). See :mod:`bisectbot.errors`.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..errors import EXIT_ERROR
from ..secrets import install_stream_redaction

EPILOG = """\b
Examples:
  bisectbot demo                                   # the whole job on a built-in engine history
  bisectbot probe --endpoint http://127.0.0.1:8000 --recipe recipes/glm51-fp8-sparse-mla-prefill.yaml
  bisectbot run recipes/glm51-fp8-sparse-mla-prefill.yaml --dry-run
  bisectbot <command> --help                       # each command has its own examples

\b
Exit codes:
  0  done / culprit found
  1  error
  2  usage or bad input (recipe, patch, arguments)
  3  inconclusive
  4  server error (probe)
"""


@dataclass
class Ctx:
    """Global options shared by every command."""

    state_dir: Path | None = None
    json: bool = False
    verbosity: int = 0
    _ledger: Any = field(default=None, repr=False)

    def ledger(self) -> Any:
        """The :class:`bisectbot.ledger.Ledger` under ``--state`` (opened on first use)."""
        if self._ledger is None:
            from ..ledger import Ledger

            self._ledger = Ledger(self.state_dir)
        return self._ledger

    def emit(self, data: Any, text: str | None = None) -> None:
        """Print ``data`` as JSON with ``--json``, else ``text`` (or a readable dump)."""
        if self.json:
            click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        else:
            click.echo(text if text is not None else json.dumps(data, indent=2, default=str))


pass_ctx = click.make_pass_decorator(Ctx)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bisectbot")
@click.option("--state", "state_dir", type=click.Path(file_okay=False, path_type=Path), envvar="BISECTBOT_STATE",
              help="Ledger/state directory (default: $XDG_STATE_HOME/bisectbot).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("-v", "--verbose", count=True, help="More log output (repeatable).")
@click.option("-q", "--quiet", count=True, help="Less output.")
@click.pass_context
def cli(ctx: click.Context, state_dir: Path | None, as_json: bool, verbose: int, quiet: int) -> None:
    """Bisect regressions of LLM serving stacks across nightlies, releases and commits."""
    level = verbose - quiet
    logging.basicConfig(
        level=logging.DEBUG if level >= 2 else logging.INFO if level == 1 else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    install_stream_redaction()  # tokens never reach stdout, stderr or log records
    ctx.obj = Ctx(state_dir=state_dir, json=as_json, verbosity=level)


def not_yet(issue: int, what: str) -> None:
    """Placeholder for a command another issue fills in; exits 1 with a clear line."""
    click.echo(f"bisectbot: {what} is not implemented yet (issue {issue})", err=True)
    sys.exit(EXIT_ERROR)
