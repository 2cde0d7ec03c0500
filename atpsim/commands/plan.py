"""`atpsim plan`: rank every mesh and chunk count by simulated step time, Eq. 2 beside it."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from atpsim.api import CALIBRATIONS, AtpsimError, Plan, PlanEntry, plan, write_trace
from atpsim.commands._common import clean_errors, warnings_to_stderr


def _chunk_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise AtpsimError(f"expected chunk counts like '1,2,4', got {text!r}", key="--chunks") from error
    if any(v < 1 for v in values):
        raise AtpsimError(f"chunk counts must be >= 1, got {text!r}", key="--chunks")
    return values


@click.command("plan")
@click.option("--topology", "-t", required=True, help="Preset, builder spec (torus:8x8) or YAML file.")
@click.option("--model", "-m", "model_name", default="M2", show_default=True, help="M1..M4.")
@click.option("--devices", "-n", type=click.IntRange(min=1), default=None, help="GPUs (default: all of the topology).")
@click.option("--chunks", default="1", show_default=True, help="Chunk counts to try, e.g. 1,2,4.")
@click.option("--algorithm", default="ring", show_default=True, help="All-reduce algorithm.")
@click.option("--hardware", default=None, help="Hardware profile (default: the topology's).")
@click.option("--placement", default="row-major", show_default=True)
@click.option("--calibration", type=click.Choice(list(CALIBRATIONS)), default="auto",
              show_default=True, help="Eq. 2 bandwidths: auto = the paper's for ic1, else derived.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the best candidate's timeline as a Chrome trace (JSON).")
@clean_errors
def command(topology, model_name, devices, chunks, algorithm, hardware, placement, calibration, trace_path):
    """Rank every DeviceMesh(d1, d2) (and chunk count) by simulated step time."""
    if trace_path and not Path(trace_path).resolve().parent.is_dir():
        raise AtpsimError(f"no folder to write the trace into: {Path(trace_path).parent}",
                          key="--trace")  # fmt: skip
    with warnings_to_stderr():
        ranked = plan(topology, model_name, devices=devices, chunks=_chunk_list(chunks),
                      algorithm=algorithm, hardware=hardware, placement=placement,
                      calibration=calibration)  # fmt: skip
    _print_plan(ranked)
    if trace_path:
        best = ranked.des_choice
        written = write_trace(topology, ranked.model, best.mesh, best.chunks, trace_path,
                              algorithm=algorithm, hardware=ranked.hardware)  # fmt: skip
        click.echo(f"trace of {best.mesh}, chunks={best.chunks}: {written}")


def _print_plan(ranked: Plan) -> None:
    console = Console(width=140)
    title = f"{ranked.model.name} on {ranked.topology_label}, {ranked.n_devices} GPUs"
    table = Table(title=title, caption=f"Eq. 2 bandwidths: {ranked.calibration_note}")
    for name in ("mesh", "ATP-i", "chunks", "step ms", "compute ms", "comm ms", "exposed ms",
                 "TFLOP/s/GPU", "Eq.2 T_comm ms", "memory", ""):  # fmt: skip
        table.add_column(name, justify="right")
    analytic_best = ranked.analytic_choice
    for entry in ranked.entries:
        table.add_row(*_row(entry, entry is ranked.des_choice, entry is analytic_best))
    console.print(table)
    des = ranked.des_choice.mesh
    if analytic_best is None:
        console.print(f"DES picks {des}; Eq. 2 has no estimate.")
    elif ranked.agree:
        console.print(f"DES and Eq. 2 agree: {des}.")
    else:
        console.print(f"[bold]Disagree:[/] DES picks {des}, Eq. 2 picks {analytic_best.mesh}.")


def _row(entry: PlanEntry, des_best: bool, analytic_best: bool) -> list[str]:
    des = entry.des
    eq2 = f"{entry.analytic.comm_time_s * 1e3:.2f}" if entry.analytic else "-"
    marks = " ".join(m for m, on in (("<- DES best", des_best), ("<- Eq.2 best", analytic_best)) if on)
    return [
        f"{entry.mesh.d1}x{entry.mesh.d2}", str(entry.mesh.d2), str(entry.chunks),
        _ms(des.step_time_s), _ms(des.compute_time_s), _ms(des.comm_time_s), _ms(des.exposed_comm_s),
        f"{des.tflops_per_gpu:.1f}", eq2, "fits" if des.fits_memory else "OOM", marks,
    ]  # fmt: skip


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"
