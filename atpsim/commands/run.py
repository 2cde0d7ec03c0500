"""`atpsim run SCENARIO`: run a scenario's sweep, write its results table and report."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.logging import RichHandler

from atpsim.api import AtpsimError, RunSummary, SweepInterrupted, run_scenario, show_params
from atpsim.commands._common import FlagFormatter, clean_errors, flag

EXIT_FAILED_POINTS = 1
EXIT_INTERRUPTED = 130
#: Worker processes of ``--scheduler local`` when -j is not given.
LOCAL_WORKERS = 2


@click.command("run")
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run folder (default: reports/<scenario name>/).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Points simulated in parallel worker processes (default 1; with --scheduler local, "
    f"the cluster's workers, default {LOCAL_WORKERS}).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Simulate the points on a Dask cluster: 'local' starts one of -j worker processes "
    "on this machine; an address tcp://HOST:PORT (such as tcp://host:8786) uses a running "
    "`dask scheduler` and its workers (each with atpsim installed; -j is then ignored). "
    "Nothing else is taken.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Keep the points an interrupted run finished; simulate only the rest.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start over: set an interrupted run's rows aside (results.partial.discarded.csv).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option(
    "--trace",
    "traces",
    multiple=True,
    metavar="SELECTOR",
    help="Write the Chrome/Perfetto timeline of chosen points to OUT/traces/<point_key>.json: "
    "'model=M2,mesh=2x4,chunks=2' or, in a job scenario, 'tp_mesh=4x2,pp=8' (results columns), "
    "'point_index=3', 'best' (fastest step or iteration), or 'topology=ic1,best'. Repeatable.",
)
@click.option(
    "--uncertainty",
    "draws",
    type=int,
    default=None,
    metavar="N",
    help="Simulate every point under N draws of the fitted parameters (the same draws for every "
    "point) and add p10/p50/p90 columns; replaces the scenario's uncertainty key. About N+1 "
    "times the time.",
)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of the draws.")
@clean_errors
def command(
    scenario: Path,
    out_dir: Path | None,
    jobs: int | None,
    scheduler: str | None,
    resume: bool,
    fresh: bool,
    no_progress: bool,
    traces: tuple[str, ...] = (),
    draws: int | None = None,
    seed: int | None = None,
) -> None:
    """Run the sweep of SCENARIO (a YAML file) and write results.csv and the report.

    One run writes a folder at a time (a second is refused, naming the first one's pid). An
    interrupted run's rows are kept: continue with --resume, or start over with --fresh.
    With --scheduler the points run on a Dask cluster, with the same guarantees.
    """
    if resume and fresh:
        raise AtpsimError("give --resume or --fresh, not both", key="--fresh")
    console = Console(stderr=True)
    with logging_to(console):
        try:
            summary = run_scenario(
                scenario,
                out_dir,
                jobs=jobs or (LOCAL_WORKERS if scheduler == "local" else 1),
                scheduler=scheduler,
                resume=resume,
                fresh=fresh,
                progress=not no_progress,
                console=console,
                announce=click.echo,
                trace=traces,
                uncertainty=draws,
                seed=seed,
            )
        except SweepInterrupted as stop:
            click.echo(f"atpsim: {show_params(stop.message(), flag)}", err=True)
            sys.exit(EXIT_INTERRUPTED)
    _finish(summary)


def _finish(summary: RunSummary) -> None:
    click.echo(f"results and report in {summary.out_dir}/:")
    for path in summary.files:
        click.echo(f"  {path}")
    ran = summary.n_points > summary.n_failed
    answer = summary.answer() if ran else []
    if answer:
        click.echo(f"the answer: {answer[0]}")
        for line in answer[1:]:
            click.echo(f"  {line}")
    answers = summary.answers() if ran else []
    if answers:
        click.echo(f"what it found (the top of {summary.out_dir / 'report.md'}):")
        for line in answers:
            click.echo(f"- {line}")
    missing = summary.missing_feature()
    if missing:
        click.echo(
            f"atpsim: error: nothing could be simulated: {missing}; the table and "
            "report list the points it would run",
            err=True,
        )
        sys.exit(EXIT_FAILED_POINTS)
    if summary.n_failed:
        click.echo(
            f"atpsim: {summary.n_failed} of {summary.n_points} points failed; "
            "see 'Failures' in the report",
            err=True,
        )
        sys.exit(EXIT_FAILED_POINTS)


@contextmanager
def logging_to(console: Console) -> Iterator[None]:
    """Send atpsim's log records (INFO and up) to *console* while the command runs, so they
    print above the progress bar; where the console is not a terminal (a log file, a pipe),
    one plain line per record, whatever COLUMNS says (rich would wrap them at its width)."""
    handler: logging.Handler
    if console.is_terminal:
        handler = RichHandler(console=console, show_time=False, show_path=False, markup=False)
        handler.setFormatter(FlagFormatter())
    else:
        handler = logging.StreamHandler(console.file)
        handler.setFormatter(FlagFormatter("%(levelname)-8s %(message)s"))
    logger, level = logging.getLogger("atpsim"), logging.getLogger("atpsim").level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
