"""``bisectbot nightlies``: filled in by issue 5."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def nightlies(ctx: click.Context) -> None:
    """(not implemented yet: issue 5)"""
    not_yet(5, "nightlies")
