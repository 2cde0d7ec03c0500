"""`atpsim collective` (not implemented yet: it says so and exits 2)."""

from __future__ import annotations

import sys

import click


@click.command("collective", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Not implemented yet."""
    click.echo("atpsim: error: 'collective' is not implemented yet", err=True)
    sys.exit(2)
