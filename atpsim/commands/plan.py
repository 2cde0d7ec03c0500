"""`atpsim plan`: rank every mesh and chunk count by simulated step time, Eq. 2 beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from atpsim.api import (
    CALIBRATIONS,
    AtpsimError,
    JobConfig,
    JobPlan,
    Plan,
    PlanEntry,
    job_default,
    load_topology,
    machine_provenance,
    plan,
    plan_job,
    preset_vocab,
    trace_job,
    write_job_links,
    write_trace,
)
from atpsim.commands._common import clean_errors, given, refuse_unused, warnings_to_stderr


def _int_list(text: str, key: str = "--chunks") -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise AtpsimError(f"expected counts like '1,2,4', got {text!r}", key=key) from error
    if any(v < 1 for v in values):
        raise AtpsimError(f"counts must be >= 1, got {text!r}", key=key)
    if len(set(values)) < len(values):
        raise AtpsimError(f"expected each count once, got {text!r}", key=key)
    return values


def _partition(text: str) -> str | tuple[int, ...]:
    """``--partition``: ``even``, ``auto`` or layer counts per stage like ``5,6,6,5``."""
    if text in ("even", "auto"):
        return text
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise AtpsimError(f"expected even, auto or layer counts per stage like '5,6,6,5', got {text!r}",
                          key="--partition") from error  # fmt: skip


@click.command("plan")
@click.option("--topology", "-t", required=True, help="Preset, builder spec (torus:8x8) or YAML file.")
@click.option("--model", "-m", "model_name", default="M2", show_default=True, help="M1..M4.")
@click.option("--devices", "-n", type=click.IntRange(min=1), default=None, help="GPUs (default: all of the topology).")
@click.option("--chunks", default="1", show_default=True, help="Chunk counts to try, e.g. 1,2,4.")
@click.option("--algorithm", default="auto", show_default=True,
              help="All-reduce algorithm (auto: what NCCL's tuner picks).")
@click.option("--hardware", default=None, help="Hardware profile (default: the topology's).")
@click.option("--placement", default="row-major", show_default=True)
@click.option("--calibration", type=click.Choice(list(CALIBRATIONS)), default="auto",
              show_default=True, help="Eq. 2 bandwidths: auto = the paper's for ic1, else derived.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the best candidate's timeline as a Chrome trace (JSON); with "
                   "--global-batch, the best layout's stages, micro-batches, collectives and busiest links.")
@click.option("--global-batch", type=click.IntRange(min=1), default=None,
              help="Plan a whole training job of this many samples per iteration: search TP mesh x PP x DP x micro-batch.")
@click.option("--pp", "pipelines", default=None, help="Job: pipeline depths to try, e.g. 1,2,4 (default: divisors of the layers; every depth with --partition auto).")
@click.option("--partition", default="even", show_default=True,
              help="Job: layers per pipeline stage: even, auto (balance the stages' compute, the embedding "
                   "and LM head counted; tries every depth up to the layers) or counts like 5,6,6,5.")
@click.option("--micro-batch", "micro_batches", default="1,2,4", show_default=True, help="Job: micro-batch sizes to try.")
@click.option("--ep", "expert_parallel", default=None,
              help="Job: expert-parallel degrees to try for a mixture of experts, e.g. 1,8 (each "
                   "layout takes those dividing its dp; default: every divisor of the experts).")
@click.option("--cp", "context_parallel", default=None,
              help="Job: context-parallel degrees to try, e.g. 1,2 (each splits every sequence over that "
                   "many GPUs, the attention a ring; 2·cp must divide the sequence; default 1).")
@click.option("--max-tp", type=click.IntRange(min=1), default=8, show_default=True, help="Job: largest TP mesh.")
@click.option("--vocab", type=click.IntRange(min=0), default=None,
              help="Job: vocabulary (embedding and LM head; default: the model preset's, else 0).")
@click.option("--zero", type=click.IntRange(0, 1), default=job_default("zero"), show_default=True,
              help="Job: ZeRO stage (0 or 1; 1 = Megatron-LM's distributed optimizer).")
@click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default=job_default("recompute"),
              show_default=True)
@click.option("--schedule", type=click.Choice(["1f1b", "gpipe"]), default=job_default("schedule"), show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Job: rows to print; a layout whose iteration has a lower bound (its compute and "
                   "its collectives' least times on the machine) above the --top fastest simulated "
                   "is not simulated.")
@click.option("--exhaustive", is_flag=True,
              help="Job: simulate every layout that fits, not only those that could be among the --top.")
@click.option("--network", type=click.Choice(["joint", "isolated"]), default="joint", show_default=True,
              help="Job: joint = every call in flight shares the links; isolated = each call timed "
                   "alone (much faster where TP groups are smaller than a node).")
@click.option("--sequence-parallel/--no-sequence-parallel", default=None,
              help="Job: Megatron-LM's sequence parallelism on the 1D TP meshes (t x 1; a 2D mesh runs "
                   "without); default: each 1D layout with and without, the faster shown.")
@click.option("--offload-activations", is_flag=True,
              help="Job: offload the stored activations to host memory between each micro-batch's forward "
                   "and backward, over the GPU's PCIe link (the SageMaker library's; default off).")
@click.option("--no-progress", is_flag=True, help="Job: no progress bar (none where stderr is not a terminal).")
@click.option("--links", "links_path", type=click.Path(dir_okay=False), default=None,
              help="Job: write the best layout's bytes and busy time per link to this CSV, and "
                   "the topology coloured by link utilization beside it (.png).")
@click.option("--uncertainty", "draws", type=int, default=None, metavar="N",
              help="Also simulate N draws of the fitted parameters: p10/p50/p90 per candidate and "
                   "how sure the best is (about N+1 times the time; with --global-batch, of the "
                   "--top fastest layouts).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the --uncertainty draws.")
@clean_errors
def command(topology, model_name, devices, chunks, algorithm, hardware, placement, calibration, trace_path,
            global_batch, pipelines, micro_batches, max_tp, vocab, zero, recompute, schedule, top, draws, seed,
            links_path, network, sequence_parallel, no_progress, partition, expert_parallel, context_parallel,
            offload_activations, exhaustive):
    """Rank every DeviceMesh(d1, d2) (and chunk count) by simulated step time; with
    --global-batch, rank whole-job layouts (TP mesh x CP x PP x DP x micro-batch) by iteration time."""
    refuse_unused(given("seed") if draws is None else [], "without --uncertainty N")
    if global_batch is None:
        job_options = ("pipelines", "micro_batches", "max_tp", "vocab", "zero", "recompute", "schedule", "top",
                       "links_path", "network", "sequence_parallel", "no_progress", "partition",
                       "expert_parallel", "context_parallel", "offload_activations", "exhaustive")
        refuse_unused(given(*job_options), "without --global-batch (a job option)")
    else:
        refuse_unused(given("placement", "calibration"), "with --global-batch")
    if trace_path and not Path(trace_path).resolve().parent.is_dir():
        raise AtpsimError(f"no folder to write the trace into: {Path(trace_path).parent}",
                          key="--trace")  # fmt: skip
    if global_batch is not None:
        ranked_jobs = plan_job(topology, model_name, devices=devices or _all_gpus(topology),
                               global_batch=global_batch, max_tp=max_tp,
                               pipelines=_int_list(pipelines, "--pp") if pipelines else None,
                               micro_batches=_int_list(micro_batches, "--micro-batch"),
                               chunk_counts=_int_list(chunks), hardware=hardware,
                               algorithm=algorithm, vocab=vocab, zero=zero, recompute=recompute,
                               schedule=schedule, network=network, sequence_parallel=sequence_parallel,
                               expert_parallel=_int_list(expert_parallel, "--ep") if expert_parallel else None,
                               context_parallel=_int_list(context_parallel, "--cp") if context_parallel else (1,),
                               partition=_partition(partition), track=layout_progress(not no_progress), uncertainty=draws, seed=seed,
                               offload_activations=offload_activations,
                               top=top, exhaustive=exhaustive)  # fmt: skip
        both = "--sequence-parallel and --no-sequence-parallel (each 1D layout both ways)"
        click.echo(machine_provenance(topology, ranked_jobs.hardware).line())
        click.echo(_job_defaults(ranked_jobs.hardware, vocab=_default_vocab(model_name),
                                 sequence_parallel=both, recompute=recompute, zero=zero, network=network,
                                 schedule=schedule))  # fmt: skip
        _print_jobs(ranked_jobs, top, network)
        if links_path:
            _print_links(write_job_links(topology, ranked_jobs.best.config, links_path, hardware=hardware),
                         ranked_jobs.best.label, links_path)  # fmt: skip
        if trace_path:
            _print_job_trace(trace_job(topology, ranked_jobs.best.config, trace_path, hardware=hardware),
                             ranked_jobs.best.label, network)  # fmt: skip
        return
    with warnings_to_stderr():
        ranked = plan(topology, model_name, devices=devices, chunks=_int_list(chunks),
                      algorithm=algorithm, hardware=hardware, placement=placement,
                      calibration=calibration, uncertainty=draws, seed=seed)  # fmt: skip
    click.echo(machine_provenance(topology, ranked.hardware).line())
    _print_plan(ranked)
    if trace_path:
        best = ranked.des_choice
        written = write_trace(topology, ranked.model, best.mesh, best.chunks, trace_path,
                              algorithm=algorithm, hardware=ranked.hardware)  # fmt: skip
        click.echo(f"trace of {best.mesh}, chunks={best.chunks}: {written}")


def _print_plan(ranked: Plan) -> None:
    console = Console(width=140 if ranked.confidence is None else 180)
    title = f"{ranked.model.name} on {ranked.topology_label}, {ranked.n_devices} GPUs, {ranked.hardware}"
    table = Table(title=title, caption=f"Eq. 2 bandwidths: {ranked.calibration_note}")
    drawn = ranked.confidence is not None
    for name in ("mesh", "ATP-i", "chunks", "step ms", *(DRAWN_COLUMNS if drawn else ()),
                 "compute ms", "comm ms", "exposed ms", "TFLOP/s/GPU", "Eq.2 T_comm ms", "memory", ""):  # fmt: skip
        table.add_column(name, justify="right")
    analytic_best = ranked.analytic_choice
    for k, entry in enumerate(ranked.entries):
        row = _row(entry, entry is ranked.des_choice, entry is analytic_best)
        table.add_row(*row[:4], *(_drawn_cells(ranked, k) if drawn else ()), *row[4:])
    console.print(table)
    if drawn:
        console.print(_confidence_line(ranked))
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


#: The columns --uncertainty adds after "step ms".
DRAWN_COLUMNS = ("p10-p90 ms", "p50 ms", "P(best)")


def _drawn_cells(ranked: Plan, k: int) -> list[str]:
    """Entry *k*'s step-time interval over the draws and its share of draws won."""
    entry, confidence = ranked.entries[k], ranked.confidence
    if entry.draws is None or confidence is None:
        return ["-"] * len(DRAWN_COLUMNS)
    step = entry.draws.step_interval
    return [f"{_ms(step.p10)}-{_ms(step.p90)}", _ms(step.p50), f"{confidence.p_best_by_candidate[k]:.2f}"]


def _confidence_line(ranked: Plan) -> str:
    """What the draws say about the DES choice (one paragraph)."""
    c, draws, best = ranked.confidence, ranked.uncertainty, ranked.des_choice
    if c is None or draws is None or best.draws is None:
        return ""
    return (f"Under {c.draws} draws of the fitted parameters ({' + '.join(best.draws.sources)}; "
            f"seed {draws.seed}), {best.mesh} with chunks={best.chunks} is the fastest in "
            f"{round(c.p_best * c.draws)} of {c.draws} (P = {c.p_best:.2f}); choosing it costs "
            f"{c.expected_loss_pct:.2f}% of step time on average against each draw's fastest "
            f"(at most {c.worst_loss_pct:.2f}%).")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def _all_gpus(topology: str) -> int:
    return load_topology(topology).n_gpus


def _default_vocab(model_name: str) -> str:
    """The vocabulary a job takes when --vocab is not given, and why."""
    vocab = preset_vocab(model_name)
    return f"{vocab} (the preset's)" if vocab else "0 (the model has no preset vocabulary)"


def _job_defaults(hardware: str, **settings: Any) -> str:
    """``# defaults: ...``: the job settings left to their defaults, as the flags that set
    them (the hardware: the profile that ran, the topology's), so the table can be read
    against them."""
    shown = [] if given("hardware") else [f"--hardware {hardware} (the topology's)"]
    for name, value in settings.items():
        if given(name):
            continue
        shown.append(value if str(value).startswith("--") else f"--{name.replace('_', '-')} {value}")
    return f"# defaults: {', '.join(shown) or 'none (every setting given)'}"


def layout_progress(enabled: bool, console: Console | None = None
                    ) -> Callable[[Sequence[JobConfig]], Iterator[JobConfig]] | None:  # fmt: skip
    """A progress bar over the layouts plan_job simulates (done, elapsed, time left), on
    stderr; None (no bar) where *enabled* is false or *console* is not a terminal."""
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        return None

    def track(configs: Sequence[JobConfig]) -> Iterator[JobConfig]:
        columns = (TextColumn("[bold]layouts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("left"), TimeRemainingColumn())  # fmt: skip
        with Progress(*columns, console=console) as bar:
            yield from bar.track(configs, total=len(configs))

    return track


def _print_job_trace(path: Path, label: str, network: str) -> None:
    """Which layout the trace shows, and where it went (always on the joint network: the
    isolated one has no timeline)."""
    how = "" if network == "joint" else " (on the joint network: the isolated one has no timeline)"
    click.echo(f"trace of the best layout, {label}{how}: {path}")


def _print_links(uses: list, label: str, path: str) -> None:
    """The ten busiest links of the best layout, and where the side table went."""
    console = Console(width=140)
    table = Table(title=f"busiest links of {label}", caption=f"all {len(uses)} links: {path} (figure: .png)")
    for name in ("link", "kind", "GB/s", "GB moved", "busy ms", "busy share", "load"):
        table.add_column(name, justify="right")
    for use in uses[:10]:
        table.add_row(f"{use.src}->{use.dst}", use.kind, f"{use.bandwidth_Bps / 1e9:.1f}",
                      f"{use.bytes / 1e9:.3f}", _ms(use.busy_s), f"{use.utilization:.1%}",
                      f"{use.load:.1%}")  # fmt: skip
    console.print(table)


def _print_jobs(ranked: JobPlan, top: int, network: str) -> None:
    console = Console(width=160 if ranked.confidence is None else 200)
    bounded = ranked.not_simulated
    pruned = ", ".join(f"{n} by {why}" for why, n in ranked.unmade.items() if n)
    how = "every call in flight on one network" if network == "joint" else "each call timed alone"
    skipped = (f"; {bounded} not simulated (a lower bound above the {top} fastest; "
               "--exhaustive runs them)") if bounded else ""  # fmt: skip
    table = Table(title=f"layouts by iteration time ({how})",
                  caption=f"pruned before simulation: {pruned or 'none'}{skipped}")
    offload = any(c.config.offload_activations for c in ranked.candidates)  # the copies' column
    for name in ("layout", "iteration s", "TFLOP/s/GPU", "MFU", "compute s", "exposed TP s", "bubble s",
                 "exposed DP s", *(("host copies s",) if offload else ()), "other s", "memory GB"):  # fmt: skip
        table.add_column(name, justify="right")
    drawn = ranked.confidence is not None
    if drawn:
        for name in JOB_DRAWN_COLUMNS:
            table.add_column(name, justify="right")
    for k, c in enumerate(ranked.candidates[:top]):
        p = c.prediction
        table.add_row(c.label, f"{p.iteration_time_s:.3f}", f"{p.tflops_per_gpu:.1f}", f"{p.mfu:.1%}",
                      f"{p.compute_s:.3f}", f"{p.exposed_tp_comm_s:.3f}", f"{p.pipeline_bubble_s:.3f}",
                      f"{p.exposed_dp_comm_s:.3f}", *((f"{p.exposed_offload_s:.3f}",) if offload else ()),
                      f"{p.other_s:.3f}", f"{p.memory_per_rank_bytes / 1e9:.1f}",
                      *(_job_drawn_cells(ranked, k) if drawn else ()))  # fmt: skip
    console.print(table)
    if drawn:
        console.print(_job_confidence_line(ranked))
    console.print(f"best: {ranked.best.label}")


#: The columns --uncertainty adds to the job table.
JOB_DRAWN_COLUMNS = ("p10-p90 s", "p50 s", "P(best)")


def _job_drawn_cells(ranked: JobPlan, k: int) -> list[str]:
    """Candidate *k*'s iteration-time interval over the draws and its share of draws won."""
    interval, confidence = ranked.candidates[k].interval, ranked.confidence
    if interval is None or confidence is None:
        return ["-"] * len(JOB_DRAWN_COLUMNS)
    return [f"{interval.p10:.3f}-{interval.p90:.3f}", f"{interval.p50:.3f}",
            f"{confidence.p_best_by_candidate[k]:.2f}"]  # fmt: skip


def _job_confidence_line(ranked: JobPlan) -> str:
    """What the draws say about the best layout, and which layouts were drawn."""
    c, draws = ranked.confidence, ranked.uncertainty
    if c is None or draws is None:
        return ""
    return (f"Under {c.draws} draws of the fitted parameters ({' + '.join(ranked.sources)}; seed "
            f"{draws.seed}), drawn for the {ranked.drawn} fastest layouts (--top), "
            f"{ranked.best.label} is the fastest in {round(c.p_best * c.draws)} of {c.draws} "
            f"(P = {c.p_best:.2f}); choosing it costs {c.expected_loss_pct:.2f}% of iteration "
            f"time on average against each draw's fastest (at most {c.worst_loss_pct:.2f}%).")
