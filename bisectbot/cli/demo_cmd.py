"""``bisectbot demo``: filled in by issue 8."""

from __future__ import annotations

import click

from .base import cli, not_yet


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def demo(ctx: click.Context) -> None:
    """(not implemented yet: issue 8)"""
    not_yet(8, "demo")
