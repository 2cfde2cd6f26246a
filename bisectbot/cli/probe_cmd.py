"""``bisectbot probe``: filled in by issue 3."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def probe(ctx: click.Context) -> None:
    """(not implemented yet: issue 3)"""
    not_yet(3, "probe")
