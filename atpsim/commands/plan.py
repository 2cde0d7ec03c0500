"""`atpsim plan`: rank every mesh and chunk count by simulated step time, Eq. 2 beside it."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from atpsim.commands._common import clean_errors
from atpsim.errors import AtpsimError
from atpsim.step.plan import Plan, PlanEntry, plan_meshes


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
@click.option("--devices", "-n", type=int, default=None, help="GPUs (default: all of the topology).")
@click.option("--chunks", default="1", show_default=True, help="Chunk counts to try, e.g. 1,2,4.")
@click.option("--algorithm", default="ring", show_default=True, help="All-reduce algorithm.")
@click.option("--hardware", default=None, help="Hardware profile (default: the topology's).")
@click.option("--placement", default="row-major", show_default=True)
@click.option("--calibration", type=click.Choice(["auto", "none", "paper-ic1"]), default="auto",
              show_default=True, help="Eq. 2 bandwidths: auto = the paper's for ic1, else derived.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the best candidate's timeline as a Chrome trace (JSON).")
@clean_errors
def command(topology, model_name, devices, chunks, algorithm, hardware, placement, calibration, trace_path):
    """Rank every DeviceMesh(d1, d2) (and chunk count) by simulated step time."""
    from atpsim.analytic.model import PAPER_IC1_CALIBRATION
    from atpsim.compute.models import model_preset

    use_paper = calibration == "paper-ic1" or (calibration == "auto" and topology == "ic1")
    plan = plan_meshes(
        topology, model_preset(model_name), n_devices=devices, chunks=_chunk_list(chunks),
        algorithm=algorithm, hardware=hardware, placement=placement,
        calibration=PAPER_IC1_CALIBRATION if use_paper else None,
    )  # fmt: skip
    _print_plan(plan)
    if trace_path:
        _write_trace(plan, topology, hardware, algorithm, trace_path)


def _print_plan(plan: Plan) -> None:
    console = Console(width=140)
    title = f"{plan.model.name} on {plan.topology_label}, {plan.n_devices} GPUs"
    table = Table(title=title, caption=f"Eq. 2 bandwidths: {plan.calibration_note}")
    for name in ("mesh", "ATP-i", "chunks", "step ms", "compute ms", "comm ms", "exposed ms",
                 "TFLOP/s/GPU", "Eq.2 T_comm ms", "memory", ""):  # fmt: skip
        table.add_column(name, justify="right")
    analytic_best = plan.analytic_choice
    for entry in plan.entries:
        table.add_row(*_row(entry, entry is plan.des_choice, entry is analytic_best))
    console.print(table)
    des = plan.des_choice.mesh
    if analytic_best is None:
        console.print(f"DES picks {des}; Eq. 2 has no estimate.")
    elif plan.agree:
        console.print(f"DES and Eq. 2 agree: {des}.")
    else:
        console.print(f"[bold]Disagree:[/] DES picks {des}, Eq. 2 picks {analytic_best.mesh}.")


def _row(entry: PlanEntry, des_best: bool, analytic_best: bool) -> list[str]:
    des = entry.des
    ms = lambda key: f"{des[key] * 1e3:.2f}"  # noqa: E731
    eq2 = f"{entry.analytic['comm_time_s'] * 1e3:.2f}" if entry.analytic else "-"
    marks = " ".join(m for m, on in (("<- DES best", des_best), ("<- Eq.2 best", analytic_best)) if on)
    return [
        f"{entry.mesh.d1}x{entry.mesh.d2}", str(entry.mesh.d2), str(entry.chunks),
        ms("step_time_s"), ms("compute_time_s"), ms("comm_time_s"), ms("exposed_comm_s"),
        f"{des['tflops_per_gpu']:.1f}", eq2, "fits" if des["fits_memory"] else "OOM", marks,
    ]  # fmt: skip


def _write_trace(plan: Plan, topology, hardware, algorithm, path) -> None:
    from atpsim.api import _profile, topology_for
    from atpsim.report.trace import write_chrome_trace
    from atpsim.scenario.point import SweepPoint
    from atpsim.step.point import simulate_des_step

    best = plan.des_choice
    point = SweepPoint("plan", topology, plan.topology_label, plan.n_devices, "", plan.model, best.mesh)
    topo = topology_for(point)
    profile = _profile(hardware or topo.meta.get("hardware", "a100-sxm4-80gb"))
    result = simulate_des_step(topo, profile, plan.model, best.mesh, best.chunks, algorithm)
    click.echo(f"trace of {best.mesh}, chunks={best.chunks}: {write_chrome_trace(result.timeline, path)}")
