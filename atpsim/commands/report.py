"""`atpsim report DIR`: rebuild a run's report from its saved results table and scenario;
`atpsim report --index DIR`: write the index page of the reports under DIR."""

from __future__ import annotations

from pathlib import Path

import click

from atpsim.api import build_index, first_screen, rebuild_report
from atpsim.commands._common import clean_errors


@click.command("report")
@click.argument(
    "run_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--index",
    is_flag=True,
    help="DIR holds run folders: write DIR/index.html, one page listing every report under "
    "it (points, the paper's claims that hold, key findings, links), and leave the reports be.",
)
@clean_errors
def command(run_dir: Path, index: bool) -> None:
    """Rebuild report.md, report.html and figures/ in DIR from DIR/results.csv and
    DIR/scenario.yaml (as written by `atpsim run`), and take the page's first screen
    (first-screen.png, 1280 x 800) where Chromium is installed; with --index, write
    DIR/index.html."""
    if index:
        click.echo(str(build_index(run_dir)))
        return
    for path in rebuild_report(run_dir):
        click.echo(str(path))
    screen = first_screen(run_dir)
    click.echo(str(screen) if screen else "# no first-screen.png: no Chromium installed "
               "(apt-get install chromium)")  # fmt: skip
