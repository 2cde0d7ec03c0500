"""`atpsim collective`: an nccl-tests-like table of one collective over buffer sizes."""

from __future__ import annotations

import csv
import sys

import click

from atpsim.commands._common import clean_errors

OPS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"]


@click.command("collective")
@click.option("--topology", "-t", required=True, help="Preset, builder spec (torus:32x32) or YAML file.")
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True)
@click.option("--algorithm", "-a", default=None, help="ring, bidirectional-ring, rabenseifner, ... (default: ring; pairwise for all_to_all).")
@click.option("--bytes", "sizes", default="8:1G", show_default=True, help="A size or MIN:MAX doubling (nccl-tests units: 1G = 2^30).")
@click.option("--gpus", "-g", type=int, default=None, help="Use the first N GPUs (sizes a scalable topology).")
@click.option("--groups", default="all", show_default=True, help="all | dim1:D1xD2 | dim2:D1xD2")
@click.option("--dtype", "-d", default="float", show_default=True, help="Element type for the count column.")
@click.option("--engine", type=click.Choice(["auto", "event", "vectorized"]), default="auto", show_default=True)
@click.option("--csv", "as_csv", is_flag=True, help="Print a CSV table instead.")
@clean_errors
def command(topology: str, op: str, algorithm: str | None, sizes: str, gpus: int | None,
            groups: str, dtype: str, engine: str, as_csv: bool) -> None:
    """Simulate a collective over buffer sizes and print time, algbw and busbw per size."""
    from atpsim.engine.table import collective_table
    from atpsim.units import parse_size_range

    table = collective_table(topology, op, parse_size_range(sizes), algorithm=algorithm,
                             gpus=gpus, groups=groups, dtype=dtype, engine=engine)
    if as_csv:
        _print_csv(table)
    else:
        _print_text(table)


def _print_csv(table) -> None:
    keys = ["topology", "op", "algorithm", "p", "dtype"]
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow([*keys, *table.rows[0].keys()] if table.rows else keys)
    for row in table.rows:
        writer.writerow([table.header[k] for k in keys] + [
            f"{v:.6g}" if isinstance(v, float) else v for v in row.values()])


def _print_text(table) -> None:
    h = table.header
    click.echo(f"# atpsim collective: {h['op']} by {h['algorithm']} on {h['topology']} ({h['n_gpus']} GPUs)")
    click.echo(f"# groups: {h['groups']}, p = {h['p']}, engine: {h['engine']}")
    click.echo("#")
    click.echo(f"# {'size':>12} {'count':>12} {'type':>8} {'time':>12} {'algbw':>9} {'busbw':>9}  engine")
    click.echo(f"# {'(B)':>12} {'(elements)':>12} {'':>8} {'(us)':>12} {'(GB/s)':>9} {'(GB/s)':>9}")
    for row in table.rows:
        click.echo(
            f"  {row['size_bytes']:>12} {row['count']:>12} {h['dtype']:>8} {row['time_us']:>12.2f}"
            f" {row['algbw_GBps']:>9.2f} {row['busbw_GBps']:>9.2f}  {row['engine']}"
        )
