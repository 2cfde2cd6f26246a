"""``bisectbot patches``: filled in by issue 4."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def patches(ctx: click.Context) -> None:
    """(not implemented yet: issue 4)"""
    not_yet(4, "patches")
