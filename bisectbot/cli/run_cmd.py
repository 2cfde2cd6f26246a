"""``bisectbot run``: filled in by issue 6."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def run(ctx: click.Context) -> None:
    """(not implemented yet: issue 6)"""
    not_yet(6, "run")
