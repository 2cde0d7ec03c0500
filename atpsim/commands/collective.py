"""`atpsim collective`: an nccl-tests-like table of one collective over buffer sizes."""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import asdict

import click

from atpsim.api import CollectiveSweep, MachineProvenance, collective, machine_provenance
from atpsim.commands._common import clean_errors, given, memory_cap, refuse_unused

OPS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "sendrecv"]
HEADER = ["topology", "hardware", "op", "algorithm", "protocol", "channels", "p", "dtype", "size_bytes",
          "count", "time_us", "algbw_GBps", "busbw_GBps", "overhead_us", "engine", "n_flows"]


@click.command("collective")
@click.option("--topology", "-t", required=True, help="Preset, builder spec (torus:32x32) or YAML file.")
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True)
@click.option("--algorithm", "-a", default=None,
              help="auto (NCCL's choice; default), ring (NCCL's channel rings, one per NIC), "
                   "ring-rank-order, bidirectional-ring, rabenseifner, ...")
@click.option("--protocol", "-p", default="auto", show_default=True,
              help="LL, LL128, Simple, auto (NCCL's tuner) or none (bare links, no protocol cost).")
@click.option("--channels", "-c", type=int, default=None, help="Channels (rings); default one per NIC rail.")
@click.option("--bytes", "sizes", default="8:1G", show_default=True, help="A size or MIN:MAX doubling (nccl-tests units: 1G = 2^30).")
@click.option("--devices", "-n", type=int, default=None, help="Use the first N GPUs (sizes a scalable topology).")
@click.option("--groups", default="all", show_default=True, help="all | dim1:D1xD2 | dim2:D1xD2")
@click.option("--dtype", "-d", default="float", show_default=True, help="Element type for the count column.")
@click.option("--engine", type=click.Choice(["auto", "reference", "longest-path"]), default="auto", show_default=True,
              help="auto: exact shortcuts where they apply; reference: the plain event run; longest-path: fail where it is not exact.")
@click.option("--csv", "as_csv", is_flag=True, help="Print a CSV table instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON instead.")
@click.option("--uncertainty", "draws", type=int, default=None, metavar="N",
              help="Also simulate N draws of the fitted parameters: p10/p50/p90 of time and busbw "
                   "per size (about N+1 times the time).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the --uncertainty draws.")
@clean_errors
def command(topology: str, op: str, algorithm: str | None, protocol: str, channels: int | None,
            sizes: str, devices: int | None, groups: str, dtype: str, engine: str, as_csv: bool,
            as_json: bool, draws: int | None, seed: int) -> None:
    """Simulate a collective over buffer sizes and print, per size, time, algbw and busbw, the
    algorithm, protocol and channels NCCL would use, and the per-call cost the step simulator
    charges (included in the time). Groups of one GPU (--devices 1, --groups dim1:1x8) move
    nothing: every row is 0 s, as the step simulator charges a one-rank group."""
    refuse_unused(given("seed") if draws is None else [], "without --uncertainty N")
    refuse_unused(given("as_csv") if as_json else [], "with --json (give one of them)")
    sweep = collective(topology, op, sizes, algorithm=algorithm, devices=devices, groups=groups,
                       dtype=dtype, engine=engine, protocol=protocol, channels=channels,
                       uncertainty=draws, seed=seed, memory_bytes=memory_cap())  # fmt: skip
    machine = machine_provenance(topology, sweep.hardware)
    if as_json:
        data = asdict(sweep)
        if sweep.uncertainty is None:
            data.pop("uncertainty")
        click.echo(json.dumps({**data, "machine": asdict(machine)}, indent=1))
    elif as_csv:
        _print_csv(sweep)
    else:
        _print_text(sweep, machine)


#: The CSV columns --uncertainty adds (percentiles over the draws).
DRAWN_HEADER = ["time_us_p10", "time_us_p50", "time_us_p90", "busbw_GBps_p10", "busbw_GBps_p50",
                "busbw_GBps_p90"]


def _print_csv(sweep: CollectiveSweep) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    drawn = sweep.uncertainty
    writer.writerow(HEADER + (DRAWN_HEADER if drawn else []))
    for k, row in enumerate(sweep.rows):
        values = [sweep.topology, sweep.hardware, sweep.op, row.algorithm, row.protocol, row.channels, sweep.p,
                  sweep.dtype, row.size_bytes, row.count, row.time_s * 1e6, row.algbw_Bps / 1e9,
                  row.busbw_Bps / 1e9, row.overhead_s * 1e6, row.path, row.n_flows]
        if drawn:
            t, b = drawn.intervals[k].time_s, drawn.intervals[k].busbw_Bps
            values += [t.p10 * 1e6, t.p50 * 1e6, t.p90 * 1e6, b.p10 / 1e9, b.p50 / 1e9, b.p90 / 1e9]
        writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in values])


def _print_text(sweep: CollectiveSweep, machine: MachineProvenance) -> None:
    click.echo(f"# atpsim collective: {sweep.op} by {sweep.algorithm} on {sweep.topology} ({sweep.n_gpus} GPUs)")
    click.echo(machine.line())
    click.echo(f"# groups: {sweep.groups}, p = {sweep.p}, protocol: {sweep.protocol}, engine: {sweep.engine}")
    if sweep.p < 2:
        click.echo("# p = 1: a group of one GPU moves nothing, so every time, algbw and busbw is 0")
    overhead = sweep.rows[0].overhead_s * 1e6 if sweep.rows else 0.0
    click.echo(f"# per-call cost in time: NCCL's latency model; plus hardware {sweep.hardware}'s "
               f"collective_overhead_s on bare links (--protocol none): {overhead:.2f} us")
    click.echo("#")
    click.echo(f"# {'size':>12} {'count':>12} {'type':>8} {'time':>12} {'algbw':>9} {'busbw':>9}"
               f" {'algorithm':>16} {'proto':>6} {'ch':>3}  engine")
    click.echo(f"# {'(B)':>12} {'(elements)':>12} {'':>8} {'(us)':>12} {'(GB/s)':>9} {'(GB/s)':>9}")
    for row in sweep.rows:
        click.echo(
            f"  {row.size_bytes:>12} {row.count:>12} {sweep.dtype:>8} {row.time_s * 1e6:>12.2f}"
            f" {row.algbw_Bps / 1e9:>9.2f} {row.busbw_Bps / 1e9:>9.2f} {row.algorithm:>16}"
            f" {row.protocol:>6} {row.channels:>3}  {row.path}"
        )
    if sweep.uncertainty is not None:
        _print_intervals(sweep)


def _print_intervals(sweep: CollectiveSweep) -> None:
    """The percentiles of each size over the draws, below the point estimates."""
    drawn = sweep.uncertainty
    if drawn is None:
        return
    click.echo("#")
    click.echo(f"# under {drawn.draws} draws of the fitted parameters "
               f"({' + '.join(drawn.sources)}; seed {drawn.seed}): p10 / p50 / p90")
    click.echo(f"# {'size (B)':>12} {'time (us)':>32} {'busbw (GB/s)':>26}")
    for i in drawn.intervals:
        t, b = i.time_s, i.busbw_Bps
        click.echo(f"  {i.size_bytes:>12} {t.p10 * 1e6:>10.2f} {t.p50 * 1e6:>10.2f} {t.p90 * 1e6:>10.2f}"
                   f" {b.p10 / 1e9:>8.2f} {b.p50 / 1e9:>8.2f} {b.p90 / 1e9:>8.2f}")
