"""``bisectbot report``: filled in by issue 7."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def report(ctx: click.Context) -> None:
    """(not implemented yet: issue 7)"""
    not_yet(7, "report")
