"""Top-level click group, global options and shared helpers of the CLI.

Each command group lives in its own module of this package; this module holds the
top-level group, the global options and the error-to-exit-code translation.

Exit codes: 0 done / culprit found, 1 error (``probe``: garbage found), 2 usage or bad input,
3 inconclusive, 4 server error (``probe``), 70 internal error. See :mod:`bisectbot.errors`.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from .. import __version__, terminal
from ..secrets import install_stream_redaction

EPILOG = """\b
Examples:
  bisectbot demo                                   # the whole job on a built-in engine history
  bisectbot probe --endpoint http://127.0.0.1:8000 --recipe glm51-fp8-sparse-mla-prefill
  bisectbot run glm51-fp8-sparse-mla-prefill --dry-run
  bisectbot <command> --help                       # each command has its own examples

\b
Exit codes:
  0  done / culprit found
  1  error
  2  usage or bad input (recipe, patch, arguments)
  3  inconclusive
  4  server error (probe)
  5  upstream unreachable (registry, package index, GitHub)
  6  run --file-issue: report written, filing on GitHub failed (report file files it later)
  70 internal error (a bug in bisectbot; traceback on stderr) -- never 1
  130 interrupted (run resumes from the ledger)

\b
--json (before or after the command): one JSON document on stdout, also on errors:
  {"error": {"kind": ..., "message": ...}, "exit_code": N}
"""


class JsonOut:
    """Where ``--json`` documents go and whether one went: with ``--json`` a command writes exactly
    one JSON document to stdout (its result, or ``{"error": {"kind", "message"}, "exit_code"}``),
    everything else goes to stderr. :func:`bisectbot.cli.main` points ``stream`` at the real stdout
    after sending file descriptor 1 to stderr; ``None`` means ``sys.stdout`` at the time of writing
    (in-process callers such as click's ``CliRunner``)."""

    stream: Any = None
    emitted: bool = False

    @classmethod
    def reset(cls, stream: Any = None) -> None:
        cls.stream, cls.emitted = stream, False

    @classmethod
    def write(cls, data: Any) -> bool:
        """Write ``data`` as the one JSON document; False (nothing written) when one was written already."""
        if cls.emitted:
            return False
        out = cls.stream if cls.stream is not None else sys.stdout
        out.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        out.flush()
        cls.emitted = True
        return True


def error_document(kind: str, message: str, exit_code: int) -> dict[str, Any]:
    """The ``--json`` document of a failed command (one shape for every command)."""
    return {"error": {"kind": kind, "message": message}, "exit_code": exit_code}


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

    def existing_ledger(self) -> Any:
        """:meth:`ledger` for a command that only reads: raises :class:`bisectbot.errors.BadInput`
        (naming the directory) when ``--state`` holds no ledger yet, instead of creating an empty one."""
        from ..errors import BadInput
        from ..ledger import LEDGER_FILE, default_state_dir

        state = Path(self.state_dir) if self.state_dir else default_state_dir()
        if self._ledger is None and not (state / LEDGER_FILE).is_file():
            raise BadInput(f"no ledger in {state}: nothing has run with this state directory yet "
                           "(--state or BISECTBOT_STATE names the one a run used)")
        return self.ledger()

    def emit(self, data: Any, text: str | None = None) -> None:
        """Print ``data`` as the one JSON document with ``--json`` (a second call only logs a warning:
        one document per command), else ``text`` (or a readable dump)."""
        if self.json:
            if not JsonOut.write(data):
                logging.getLogger(__name__).warning("--json: a second document was dropped (one per command)")
        else:
            terminal.echo(text if text is not None else json.dumps(data, indent=2, default=str))


pass_ctx = click.make_pass_decorator(Ctx)


def json_anywhere(args: list[str]) -> list[str]:
    """Move every ``--json`` before a ``--`` to the front, so the global flag works before or after
    the subcommand (``bisectbot --json run R`` = ``bisectbot run R --json``)."""
    end = args.index("--") if "--" in args else len(args)
    head = [a for a in args[:end] if a != "--json"]
    if len(head) == end:
        return list(args)
    return ["--json", *head, *args[end:]]


def group_examples(group_text: str, path: str) -> list[str]:
    """The example flow of a group's help or epilog up to the last line that runs ``path`` (e.g.
    ``"bisect log"``): example lines start with ``bisectbot`` (a trailing backslash continues one),
    and a line runs ``path`` when it holds it as words. The lines before it stay: they write what it
    reads (``bisect log > session.log`` before ``bisect replay … session.log``). Empty when no
    example runs ``path``."""
    lines = [line.strip() for line in group_text.splitlines()]
    flow: list[str] = []
    last = -1
    i = 0
    while i < len(lines):
        if lines[i].startswith("bisectbot "):
            runs = f" {path} " in f" {lines[i].split('#', 1)[0]} "
            flow.append(lines[i])
            while flow[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                flow.append("    " + lines[i])
            if runs:
                last = len(flow)
        i += 1
    return flow[:last] if last > 0 else []


class ExampleCommand(click.Command):
    """A leaf command whose ``--help`` shows examples: its own (epilog or help text), else its
    group's example flow up to the lines that run it (:func:`group_examples`): the top help says each
    command has them, and a command added without any shows its group's (``tests/installed/test_help.py``
    checks every leaf)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog or ctx.parent is None or "Example" in (self.help or ""):  # its own examples
            super().format_epilog(ctx, formatter)
            return
        group = ctx.parent.command
        lines = group_examples(f"{group.help or ''}\n{group.epilog or ''}", f"{group.name} {self.name}")
        if lines:
            formatter.write_paragraph()
            formatter.write_text("Examples:")
            with formatter.indentation():
                for line in lines:
                    formatter.write(" " * formatter.current_indent + line + "\n")


class SubGroup(click.Group):
    """A command group whose leaf commands show examples (:class:`ExampleCommand`)."""

    command_class = ExampleCommand


class Group(click.Group):
    """The top-level group: ``--json`` is accepted anywhere on the command line; its groups'
    leaf commands show examples (:class:`SubGroup`)."""

    command_class = ExampleCommand
    group_class = SubGroup

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, json_anywhere(args))


def absolute_path(p: Path | None) -> Path | None:
    """``p`` made absolute against the current directory, symlinks kept (the ledger checks its own
    path); ``None`` stays ``None``. Builds and servers run in the state's worktrees with their own
    working directory, where a relative ``--state gpu`` named nothing."""
    return p.absolute() if p is not None else None


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bisectbot")
@click.option("--state", "state_dir", type=click.Path(file_okay=False, path_type=Path), envvar="BISECTBOT_STATE",
              callback=lambda _c, _p, v: absolute_path(v),
              help="Ledger/state directory (default: $XDG_STATE_HOME/bisectbot).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document on stdout (also on errors); progress on stderr. Before or after the command.")
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
    JsonOut.emitted = False  # one document per invocation (in-process callers invoke many times)
    # absolute: runners chdir into worktrees, and the Reproduce command must work from anywhere
    ctx.obj = Ctx(state_dir=state_dir.expanduser().resolve() if state_dir else None, json=as_json, verbosity=level)

