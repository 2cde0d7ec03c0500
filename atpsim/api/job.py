"""`atpsim.simulate_job`: one training iteration of a DP x PP x TP job, its time and breakdown.

The stages are chained as for one step, one level up:

1. the layout (:class:`~atpsim.parallel.layout.ParallelLayout`) puts every TP mesh, pipeline
   stage and data-parallel replica on GPU ranks of the topology;
2. each stage's forward and backward of one micro-batch is its TP pass program
   (:func:`~atpsim.parallel.atp.build_pass_program`, ``L / (p·v)`` layers) simulated on every
   TP group of the job at once (all stages and replicas busy together, as in the pipeline's
   steady state), so the op times hold the exposed TP communication;
3. sends between stages are flows over the real links, every pair of a stage boundary at once
   (a send is a 2-rank binomial broadcast: one transfer of the stage's activations, ``[T,
   h/d2]`` per rank);
4. the pipeline schedule runs on those times (:mod:`atpsim.engine.step.pipeline`); each stage
   then all-reduces its gradients over its DP groups in buckets (reduce-scatters them, and
   all-gathers the parameters after the optimizer, with ZeRO-1), overlapping the last
   backward if asked (:mod:`atpsim.engine.step.job`).

Not yet modelled (issue 12 continues): the embedding and LM head, traffic of different streams sharing links (each collective is timed with
its own call's groups only), SUMMA grids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from atpsim.api.point import hardware_profile
from atpsim.api.step import DEFAULT_HARDWARE
from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.engine.collective import run_collective
from atpsim.engine.step.job import GradientSync, JobTimeline, simulate_iteration
from atpsim.engine.step.pipeline import TransferTime
from atpsim.engine.step.run import StepResult, simulate_program
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_pass_program, params_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.pipeline import PipelineOp, PipelineShape, stage_orders
from atpsim.program import ComputeOp
from atpsim.topology.graph import Topology

#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``, torch.nn.parallel docs), bytes.
DEFAULT_BUCKET_BYTES = 25 * 2**20
#: Forward compute ops of the attention core, which selective recomputation runs again.
ATTENTION_CORE = ("attn_scores", "attn_softmax", "attn_dropout", "attn_context")


@dataclass(frozen=True)
class JobConfig:
    """What :func:`simulate_job` runs: the model, the layout and how the step is cut."""

    model: ModelConfig
    layout: ParallelLayout
    micro_batch: int
    global_batch: int
    schedule: str = "1f1b"
    virtual_stages: int = 1
    chunks: int = 1
    algorithm: str = "ring"
    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    overlap_grad_reduce: bool = True
    zero: int = 0
    recompute: str = "none"
    sequence_parallel: bool = False

    @property
    def n_microbatches(self) -> int:
        return self.global_batch // (self.micro_batch * self.layout.dp)

    @property
    def shape(self) -> PipelineShape:
        return PipelineShape(self.layout.pp, self.n_microbatches, self.virtual_stages)

    @property
    def chunk_model(self) -> ModelConfig:
        """One model chunk of a stage for one micro-batch."""
        layers = self.model.layers // (self.layout.pp * self.virtual_stages)
        return replace(self.model, layers=layers, batch=self.micro_batch)


@dataclass(frozen=True)
class JobPrediction:
    """One iteration: seconds on the critical stage and what they were spent on (compute +
    exposed TP + pipeline bubble + exposed DP + other = iteration time; other is the optimizer
    step, the ZeRO parameter gather and ranks waiting inside a pass); FLOP/s per GPU
    in 10^12, counted as Megatron-LM counts model FLOPs (no recomputation) and, separately,
    the hardware FLOPs that recomputation adds; MFU against the profile's peak."""

    iteration_time_s: float
    samples_per_s: float
    tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    compute_s: float
    exposed_tp_comm_s: float
    exposed_dp_comm_s: float
    pipeline_bubble_s: float
    other_s: float
    n_microbatches: int
    timeline: JobTimeline


def simulate_job(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig,
    *,
    tp: tuple[int, int] | DeviceMesh = (1, 1),
    pp: int = 1,
    dp: int = 1,
    micro_batch: int = 1,
    global_batch: int | None = None,
    order: tuple[str, str, str] = ("tp", "pp", "dp"),
    hardware: str | None = None,
    **options: Any,
) -> JobPrediction:
    """Simulate one training iteration of *model* with tensor parallelism on the ATP mesh *tp*
    (Megatron-LM's 1D TP is ``(t, 1)``), *pp* pipeline stages and *dp* data-parallel replicas
    on *topology*; *order* names the layout's dimensions innermost first. *options* are the
    fields of :class:`JobConfig` (schedule, virtual_stages, chunks, algorithm, bucket_bytes,
    overlap_grad_reduce, zero, recompute, sequence_parallel). *global_batch* defaults to one micro-batch per
    replica and stage (``micro_batch · dp · pp``)."""
    mesh = tp if isinstance(tp, DeviceMesh) else DeviceMesh(*tp)
    config = JobConfig(model if isinstance(model, ModelConfig) else model_preset(model),
                       ParallelLayout(mesh, pp, dp, order), micro_batch,
                       global_batch or micro_batch * dp * pp, **options)  # fmt: skip
    check_job(config)
    topo, profile = _machine(topology, config.layout.size, hardware)
    return run_job(topo, profile, config)


def check_job(config: JobConfig) -> None:
    """Divisibility of the batch and the layers; one line naming the key, else."""
    per_step = config.micro_batch * config.layout.dp
    if config.micro_batch < 1 or config.global_batch % per_step:
        raise SimulationError(f"global_batch {config.global_batch} is not a multiple of micro_batch "
                              f"x dp = {per_step}", key="global_batch")  # fmt: skip
    stages = config.layout.pp * config.virtual_stages
    if config.model.layers % stages:
        raise SimulationError(f"{config.model.layers} layers do not split over {stages} (virtual) "
                              "pipeline stages", key="pp")  # fmt: skip
    if config.zero not in (0, 1):
        raise SimulationError(f"expected zero 0 or 1, got {config.zero}", key="zero")
    if config.recompute not in ("none", "selective", "full"):
        raise SimulationError(f"expected recompute none, selective or full, got {config.recompute!r}",
                              key="recompute")  # fmt: skip


def _machine(topology: str | Mapping[str, Any], n: int, hardware: str | None
             ) -> tuple[Topology, HardwareProfile]:
    from atpsim.topology.spec import load_topology

    topo = load_topology(topology if isinstance(topology, str) else dict(topology), n_gpus=n)
    if topo.n_gpus < n:
        raise SimulationError(f"the layout needs {n} GPUs; {topo.name} has {topo.n_gpus}", key="dp")
    return topo, hardware_profile(hardware or topo.meta.get("hardware", DEFAULT_HARDWARE))


def run_job(topology: Topology, profile: HardwareProfile, config: JobConfig) -> JobPrediction:
    """:func:`simulate_job` on a built topology and profile."""
    forward, backward = _passes(topology, profile, config)
    extra_s = _recompute_s(profile, config, forward)
    orders = stage_orders(config.schedule, config.shape)

    def op_time(stage: int, op: PipelineOp) -> float:
        return forward.step_time_s if op.kind == "F" else backward.step_time_s + extra_s

    transfer = _transfer_timer(topology, profile, config)
    syncs = [_gradient_sync(topology, profile, config, s) for s in range(config.layout.pp)]
    timeline = simulate_iteration(orders, config.shape, op_time, transfer, syncs)
    return _prediction(config, profile, timeline, forward, backward, extra_s)


class _AllTensorGroups:
    """Every TP group of the job as one mesh-like source of groups (all stages and replicas)."""

    def __init__(self, layout: ParallelLayout):
        self.layout = layout

    @property
    def size(self) -> int:
        return self.layout.size

    def groups(self, dim: int) -> list[list[int]]:
        return self.layout.tp_groups(dim)


def _passes(topology: Topology, profile: HardwareProfile, config: JobConfig
            ) -> tuple[StepResult, StepResult]:
    mesh, model = config.layout.tp, config.chunk_model
    if not isinstance(mesh, DeviceMesh):
        raise SimulationError("jobs run on ATP meshes (SUMMA grids: not yet)", key="tp")
    source = _AllTensorGroups(config.layout)
    forward, backward = (build_pass_program(model, mesh, config.chunks, phase,
                                            sequence_parallel=config.sequence_parallel)
                         for phase in ("fwd", "bwd"))  # fmt: skip
    return (simulate_program(topology, profile, model, forward, source, config.algorithm),
            simulate_program(topology, profile, model, backward, source, config.algorithm))  # fmt: skip


def _recompute_s(profile: HardwareProfile, config: JobConfig, forward: StepResult) -> float:
    """Seconds recomputation adds to each backward: the whole forward (full) or the attention
    core's forward compute (selective)."""
    if config.recompute == "full":
        return forward.step_time_s
    if config.recompute == "none":
        return 0.0
    from atpsim.compute.timing import compute_time_s

    ops = forward.timeline.program.compute_ops()
    core = [op for op in ops if op.name.split(".")[-1] in ATTENTION_CORE]
    return sum(compute_time_s(op, profile, config.model.dtype) for op in core)


def _transfer_timer(topology: Topology, profile: HardwareProfile, config: JobConfig
                    ) -> TransferTime:
    layout, dims_bytes = config.layout, _activation_bytes(config)

    @cache
    def between(src: int, dst: int) -> float:
        if src == dst or layout.pp == 1:
            return 0.0
        pairs = layout.send_pairs(src, dst)
        result = run_collective(topology, "broadcast", "binomial", pairs, dims_bytes)
        return result.time_s + _overhead_s(profile)

    return lambda src, dst, op: between(src, dst)


def _activation_bytes(config: JobConfig) -> float:
    """Bytes each rank sends at a stage boundary: its ``[T, h/d2]`` share of the activations."""
    model, mesh = config.chunk_model, config.layout.tp
    d2 = mesh.d2 if isinstance(mesh, DeviceMesh) else 1
    return model.batch * model.seq * model.hidden / d2 * model.dtype_bytes


def _gradient_sync(topology: Topology, profile: HardwareProfile, config: JobConfig,
                   stage: int) -> GradientSync:
    layout, model = config.layout, config.model
    mesh = layout.tp if isinstance(layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    params = params_per_rank(replace(model, layers=model.layers // layout.pp), mesh)
    optimizer_s = _optimizer_s(profile, config, params / (layout.dp if config.zero else 1))
    if layout.dp == 1:
        return GradientSync(optimizer_s=optimizer_s)
    groups = [g for g in layout.dp_groups() if layout.stage_of(g[0]) == stage]
    grad_bytes = params * model.dtype_bytes
    sizes = _buckets(grad_bytes, config.bucket_bytes)
    op = "reduce_scatter" if config.zero else "all_reduce"
    bucket_s = tuple(_collective_s(topology, profile, op, config.algorithm, groups, n) for n in sizes)
    ready = tuple(min(1.0, sum(sizes[: k + 1]) / grad_bytes) for k in range(len(sizes)))
    gather_s = _collective_s(topology, profile, "all_gather", "ring", groups, grad_bytes) if config.zero else 0.0
    return GradientSync(bucket_s, ready, config.overlap_grad_reduce, optimizer_s, gather_s)


def _buckets(total_bytes: float, bucket_bytes: float) -> list[float]:
    full = int(total_bytes // bucket_bytes)
    rest = total_bytes - full * bucket_bytes
    return [bucket_bytes] * full + ([rest] if rest > 0 else [])


def _collective_s(topology: Topology, profile: HardwareProfile, op: str, algorithm: str,
                  groups: list[list[int]], nbytes: float) -> float:
    from atpsim.collectives.registry import algorithm_names

    chosen = algorithm if algorithm in algorithm_names(op) else "ring"
    return run_collective(topology, op, chosen, groups, nbytes).time_s + _overhead_s(profile)


def _overhead_s(profile: HardwareProfile) -> float:
    """The profile's fixed cost per collective call, as the step simulator charges it."""
    return float(getattr(profile, "collective_overhead_s", 0.0) or 0.0)


def _optimizer_s(profile: HardwareProfile, config: JobConfig, params: float) -> float:
    """The Adam update of *params* parameters, memory-bound (:func:`adam_bytes_per_param`)."""
    from atpsim.compute.timing import compute_time_s
    from atpsim.parallel.atp import adam_bytes_per_param

    op = ComputeOp("adam", "memory", bytes_moved=params * adam_bytes_per_param(config.model.dtype_bytes))
    return compute_time_s(op, profile, config.model.dtype)


def _prediction(config: JobConfig, profile: HardwareProfile, timeline: JobTimeline,
                forward: StepResult, backward: StepResult, extra_s: float) -> JobPrediction:
    stage = timeline.critical_stage()
    end, t = timeline.stages[stage], timeline.step_time_s
    passes = config.n_microbatches * config.virtual_stages
    compute = passes * (forward.compute_time_s + backward.compute_time_s + extra_s)
    exposed_tp = passes * (forward.exposed_comm_s + backward.exposed_comm_s)
    bubble = end.backward_end_s - timeline.pipeline.busy_s(stage)
    model_flops = replace(config.model, batch=config.global_batch).step_flops()
    hardware_flops = model_flops * (4 / 3 if config.recompute == "full" else 1.0)
    per_gpu = t * config.layout.size
    peak = profile.peak_flops_for(config.model.dtype)
    other = t - compute - exposed_tp - bubble - end.exposed_sync_s
    return JobPrediction(
        iteration_time_s=t,
        samples_per_s=config.global_batch / t,
        tflops_per_gpu=model_flops / per_gpu / 1e12,
        hardware_tflops_per_gpu=hardware_flops / per_gpu / 1e12,
        mfu=model_flops / per_gpu / peak if peak > 0 else math.nan,
        compute_s=compute,
        exposed_tp_comm_s=exposed_tp,
        exposed_dp_comm_s=end.exposed_sync_s,
        pipeline_bubble_s=bubble,
        other_s=other,
        n_microbatches=config.n_microbatches,
        timeline=timeline,
    )
