"""`atpsim search`: simulate the whole-job layouts of a design space that divide the model and fit
in memory, on this machine or a Dask cluster, and print the best (atpsim/api/search.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

from atpsim.api import (
    AtpsimError,
    SearchResult,
    SweepInterrupted,
    run_search,
    search_space,
    show_params,
)
from atpsim.commands._common import LAYOUTS_ENV, clean_errors, flag, size_limit
from atpsim.commands.run import EXIT_FAILED_POINTS, EXIT_INTERRUPTED, LOCAL_WORKERS, logging_to

#: Columns of the printed table: (results column, header).
SHOWN = (("topology", "topology"), ("n_devices", "GPUs"), ("model", "model"),
         ("tp_mesh", "TP"), ("pp", "pp"), ("dp", "dp"), ("micro_batch", "mb"),
         ("schedule", "schedule"), ("recompute", "recompute"), ("zero", "zero"),
         ("chunks", "chunks"), ("iteration_time_s", "iteration s"),
         ("iteration_time_s_p10", "p10 s"), ("iteration_time_s_p50", "p50 s"),
         ("iteration_time_s_p90", "p90 s"),
         ("tflops_per_gpu", "TFLOP/s/GPU"), ("mfu", "MFU"), ("memory_per_rank_bytes", "memory GB"))  # fmt: skip
#: The columns of :data:`SHOWN` that only a search with --uncertainty writes.
DRAWN = ("iteration_time_s_p10", "iteration_time_s_p50", "iteration_time_s_p90")


def _values(text: str | None, key: str, kind: type = int) -> list[Any] | None:
    """'1,2,4' -> [1, 2, 4] (or strings); None when the option is not given."""
    if text is None:
        return None
    try:
        values = [kind(part.strip()) for part in text.split(",")]
    except ValueError:
        raise AtpsimError(f"expected a comma-separated list like '1,2,4', got {text!r}", key=key) from None
    if kind is int and any(v < 0 for v in values):
        raise AtpsimError(f"expected counts >= 0, got {text!r}", key=key)
    return values


def _overrides(options: dict[str, Any]) -> dict[str, Any]:
    """The space keys the options set (a file's keys stay where an option is not given)."""
    top = {"topology": list(options["topology"]) or None, "model": list(options["model"]) or None,
           "hardware": options["hardware"], "chunks": _values(options["chunks"], "--chunks"),
           "algorithm": _values(options["algorithm"], "--algorithm", str)}  # fmt: skip
    parallelism = {
        "devices": _values(options["devices"], "--devices"),
        "global_batch": _values(options["global_batch"], "--global-batch"),
        "pp": _values(options["pp"], "--pp"),
        "micro_batch": _values(options["micro_batch"], "--micro-batch"),
        "schedule": _values(options["schedule"], "--schedule", str),
        "recompute": _values(options["recompute"], "--recompute", str),
        "zero": _values(options["zero"], "--zero"),
        "network": _values(options["network"], "--network", str),
        "vocab": options["vocab"],
    }
    given = {k: v for k, v in parallelism.items() if v is not None}
    return {**{k: v for k, v in top.items() if v is not None}, **({"parallelism": given} if given else {})}


@click.command("search")
@click.option("--space", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A job scenario whose lists are the space (options below override its keys).")
@click.option("--topology", "-t", multiple=True, help="Preset, builder spec or YAML file (repeat for several).")
@click.option("--model", "-m", multiple=True, help="Model preset, e.g. gpt3-13b (repeat for several).")
@click.option("--devices", "-n", default=None, help="GPU counts, e.g. 256,512 (default: all of the topology).")
@click.option("--global-batch", default=None, help="Samples per iteration, e.g. 1024 (or a list).")
@click.option("--max-tp", type=click.IntRange(min=1), default=8, show_default=True,
              help="Largest TP mesh searched when the space lists none.")
@click.option("--pp", default=None, help="Pipeline depths (default: every divisor of the layers).")
@click.option("--micro-batch", default=None, help="Micro-batch sizes (default: 1,2,4).")
@click.option("--schedule", default=None, help="Pipeline schedules, e.g. 1f1b,interleaved.")
@click.option("--recompute", default=None, help="none, selective, full (a list).")
@click.option("--zero", default=None, help="ZeRO stages, e.g. 0,1.")
@click.option("--chunks", default=None, help="ATP chunk counts, e.g. 1,2.")
@click.option("--algorithm", default=None, help="Collective algorithms (default: auto).")
@click.option("--hardware", default=None, help="Hardware profile (default: the topology's).")
@click.option("--vocab", type=click.IntRange(min=0), default=None, help="Vocabulary (default: the preset's).")
@click.option("--network", default=None,
              help="joint (every call in flight shares the links; default) or isolated (each call "
                   "timed alone), or both: joint,isolated.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (default: reports/<space name>/; a search made by options is "
                   "named search-<hash of the options>).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help=f"Worker processes (default 1; with --scheduler local, {LOCAL_WORKERS}).")
@click.option("--scheduler", metavar="ADDRESS",
              help="A Dask cluster: 'local', or a running `dask scheduler`'s address "
                   "tcp://HOST:PORT (such as tcp://host:8786); nothing else is taken.")
@click.option("--resume", is_flag=True, help="Keep what an interrupted search finished.")
@click.option("--fresh", is_flag=True, help="Set an interrupted search's rows aside and start over.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows to print.")
@click.option("--uncertainty", type=int, default=None, metavar="N",
              help="Simulate every layout under the same N draws of the fitted parameters (GEMM, "
                   "NCCL, links) and add p10/p50/p90 of the iteration time; replaces the space's "
                   "uncertainty key. About N+1 times the time.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of the --uncertainty draws.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@clean_errors
def command(space: Path | None, out_dir: Path | None, jobs: int | None, scheduler: str | None,
            resume: bool, fresh: bool, max_tp: int, top: int, no_progress: bool, uncertainty: int | None,
            seed: int | None, **options: Any) -> None:
    """Search the whole-job layouts (TP mesh x PP x DP x micro-batch x ...) of a design space:
    prune those that do not divide the model or fit in memory, simulate the rest (as `atpsim
    run` does: -j, --scheduler, --resume), print the best by model FLOP/s per GPU (for one
    model, batch and GPU count: the shortest iterations) and write every row to results.csv.

    A search is named by its space: the --space file's name, or 'search' without one, followed
    where options set the space by '-' and a hash of the options (search-1a2b3c4d). The name
    owns the output folder (default reports/<name>/): the same search again regenerates it
    (with --resume, continues it); another search there is refused unless given another -o or
    --fresh.

    \b
    atpsim search -t ib-cluster:8x8 -m gpt3-1.3b --global-batch 512 -o out/ -j 2
    atpsim search --space space.yaml -o out/ --scheduler tcp://host:8786
    atpsim search -t ib-cluster:8x8 -m gpt3-1.3b --global-batch 512 --uncertainty 8
    """
    if resume and fresh:
        raise AtpsimError("give --resume or --fresh, not both", key="--fresh")
    max_layouts = size_limit(LAYOUTS_ENV)
    searched = search_space(space, **_overrides(options))
    console = Console(stderr=True)
    with logging_to(console):
        try:
            result = run_search(searched, out_dir, max_tp=max_tp, max_layouts=max_layouts, top=top,
                            jobs=jobs or (LOCAL_WORKERS if scheduler == "local" else 1),
                            scheduler=scheduler, resume=resume, fresh=fresh,
                            progress=not no_progress, console=console, announce=click.echo,
                            uncertainty=uncertainty, seed=seed)  # fmt: skip
        except SweepInterrupted as stop:
            click.echo(f"atpsim: {show_params(stop.message(), flag)}", err=True)
            sys.exit(EXIT_INTERRUPTED)
    _print(result, top)


def _print(result: SearchResult, top: int) -> None:
    table = Table(title=f"the {min(top, len(result.best))} best layouts (most model FLOP/s per GPU)")
    shown = [(name, header) for name, header in SHOWN if name not in DRAWN or name in result.best]
    for _, header in shown:
        table.add_column(header, justify="right")
    for _, row in result.best.iterrows():
        table.add_row(*(_cell(name, row[name]) for name, _ in shown))
    Console(width=180).print(table)
    written = result.table
    pruned = sum(result.pruned.values())
    click.echo(f"{written.n_points:,} layouts simulated ({written.n_failed} failed), {pruned:,} "
               "pruned before simulation (they do not divide the model or fit in memory)")  # fmt: skip
    answer = result.answer()
    if answer:
        click.echo(f"the answer: {answer[0]}")
        for line in answer[1:]:
            click.echo(f"  {line}")
    click.echo(f"every row ({written.n_points:,} layouts) in {written.path}; search.yaml beside it")
    if written.n_failed:
        click.echo(f"atpsim: {written.n_failed} of {written.n_points} layouts failed; see the "
                   "error column of results.csv", err=True)  # fmt: skip
        sys.exit(EXIT_FAILED_POINTS)


def _cell(name: str, value: Any) -> str:
    if value is None or pd.isna(value):
        return ""
    if name == "memory_per_rank_bytes":
        return f"{float(value) / 1e9:.1f}"
    if name == "mfu":
        return f"{float(value):.1%}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
