"""`atpsim report DIR`: rebuild a run's report from its saved results table and scenario."""

from __future__ import annotations

from pathlib import Path

import click

from atpsim.api import rebuild_report
from atpsim.commands._common import clean_errors


@click.command("report")
@click.argument(
    "run_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@clean_errors
def command(run_dir: Path) -> None:
    """Rebuild report.md, report.html and figures/ in DIR from DIR/results.csv and
    DIR/scenario.yaml (as written by `atpsim run`)."""
    for path in rebuild_report(run_dir):
        click.echo(str(path))
