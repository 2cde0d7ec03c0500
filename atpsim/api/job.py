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

With a *vocab*, the embedding runs on the first virtual stage and the LM head with the loss on
the last (:mod:`atpsim.parallel.head`), and their tied gradients are all-reduced between those
stages. Not yet modelled: traffic of different streams sharing links (each collective is
timed with its own call's groups only; issue 13), SUMMA grids.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
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
from atpsim.parallel.job_memory import JobMemory
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
    algorithm: str = "auto"
    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    overlap_grad_reduce: bool = True
    zero: int = 0
    recompute: str = "none"
    sequence_parallel: bool = False
    vocab: int = 0

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
    memory_per_rank_bytes: float
    fits_memory: bool
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
    overlap_grad_reduce, zero, recompute, sequence_parallel, vocab). *global_batch* defaults to one micro-batch per
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
    if config.vocab < 0 or config.vocab % config.layout.tp.size:
        raise SimulationError(f"vocab {config.vocab} does not split over the {config.layout.tp.size} "
                              "TP ranks (pad it, as Megatron-LM does)", key="vocab")  # fmt: skip
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


@dataclass(frozen=True)
class PassCost:
    """One op of a stage: its *time_s*, of which *compute_s* computing on the critical rank and
    *exposed_s* TP communication not hidden under compute (the rest: waiting for peers)."""

    time_s: float
    compute_s: float
    exposed_s: float

    @classmethod
    def of(cls, result: StepResult, with_overhead: bool = True) -> PassCost:
        time_s = result.step_time_s if with_overhead else result.timeline.step_time_s
        extra = result.step_time_s - result.timeline.step_time_s
        compute_s = result.compute_time_s - (0.0 if with_overhead else extra)
        return cls(time_s, compute_s, result.exposed_comm_s)

    def __add__(self, other: PassCost) -> PassCost:
        return PassCost(self.time_s + other.time_s, self.compute_s + other.compute_s,
                        self.exposed_s + other.exposed_s)  # fmt: skip


NO_COST = PassCost(0.0, 0.0, 0.0)


def run_job(topology: Topology, profile: HardwareProfile, config: JobConfig) -> JobPrediction:
    """:func:`simulate_job` on a built topology and profile."""
    cost = _op_costs(topology, profile, config)
    orders = stage_orders(config.schedule, config.shape)
    transfer = _transfer_timer(topology, profile, config)
    syncs = [_gradient_sync(topology, profile, config, s) for s in range(config.layout.pp)]
    timeline = simulate_iteration(orders, config.shape, lambda s, op: cost(s, op).time_s, transfer, syncs)
    return _prediction(config, profile, timeline, cost)


def _op_costs(topology: Topology, profile: HardwareProfile, config: JobConfig
              ) -> Callable[[int, PipelineOp], PassCost]:
    """``cost(stage, op)``: the layers' pass, recomputation in backward, the embedding on the
    first virtual stage and the LM head on the last."""
    forward, backward = _passes(topology, profile, config)
    layers = {"F": PassCost.of(forward), "B": PassCost.of(backward) + _recompute(profile, config, forward)}
    ends = _model_ends(topology, profile, config)
    last = config.shape.n_virtual_stages - 1

    def cost(stage: int, op: PipelineOp) -> PassCost:
        k = op.virtual_stage(stage, config.layout.pp)
        total = layers[op.kind]
        total = total + ends[("embedding", op.kind)] if k == 0 else total
        return total + ends[("head", op.kind)] if k == last else total

    return cost


def _model_ends(topology: Topology, profile: HardwareProfile, config: JobConfig
                ) -> dict[tuple[str, str], PassCost]:
    """What the embedding and the LM head add to the first and last virtual stage's passes
    (:mod:`atpsim.parallel.head`; nothing without a vocabulary)."""
    from atpsim.parallel.head import build_head_program

    costs = {(part, kind): NO_COST for part in ("embedding", "head") for kind in ("F", "B")}
    mesh = config.layout.tp
    if config.vocab == 0 or not isinstance(mesh, DeviceMesh):
        return costs
    model, source = config.chunk_model, _AllTensorGroups(config.layout)
    for part, kind in costs:
        program = build_head_program(config.vocab, model, mesh, part,  # type: ignore[arg-type]
                                     "fwd" if kind == "F" else "bwd")  # fmt: skip
        result = simulate_program(topology, profile, model, program, source, config.algorithm)
        costs[(part, kind)] = PassCost.of(result, with_overhead=False)  # not a layer
    return costs


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


def _recompute(profile: HardwareProfile, config: JobConfig, forward: StepResult) -> PassCost:
    """What recomputation adds to each backward: the whole forward (full) or the attention
    core's forward compute (selective)."""
    if config.recompute == "full":
        return PassCost.of(forward)
    if config.recompute == "none":
        return NO_COST
    from atpsim.compute.timing import compute_time_s

    ops = forward.timeline.program.compute_ops()
    core = [op for op in ops if op.name.split(".")[-1] in ATTENTION_CORE]
    seconds = sum(compute_time_s(op, profile, config.model.dtype) for op in core)
    return PassCost(seconds, seconds, 0.0)


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
    params = stage_params_per_rank(config, stage)
    optimizer_s = _optimizer_s(profile, config, params / (layout.dp if config.zero else 1))
    tied_s = _tied_embedding_s(topology, profile, config, stage)
    if layout.dp == 1:
        return GradientSync((tied_s,), (1.0,), False, optimizer_s) if tied_s else GradientSync(optimizer_s=optimizer_s)
    groups = [g for g in layout.dp_groups() if layout.stage_of(g[0]) == stage]
    grad_bytes = params * model.dtype_bytes
    sizes = _buckets(grad_bytes, config.bucket_bytes)
    op = "reduce_scatter" if config.zero else "all_reduce"
    bucket_s = tuple(_collective_s(topology, profile, op, config.algorithm, groups, n) for n in sizes)
    ready = tuple(min(1.0, sum(sizes[: k + 1]) / grad_bytes) for k in range(len(sizes)))
    gather_s = _collective_s(topology, profile, "all_gather", "auto", groups, grad_bytes) if config.zero else 0.0
    if tied_s:
        bucket_s, ready = bucket_s + (tied_s,), ready + (1.0,)
    return GradientSync(bucket_s, ready, config.overlap_grad_reduce, optimizer_s, gather_s)


def stage_params_per_rank(config: JobConfig, stage: int) -> float:
    """Parameters one TP rank of *stage* holds: its ``L/p`` layers' shard, and the vocabulary
    shard of the embedding (first stage) and of the tied LM head (last stage)."""
    from atpsim.parallel.head import head_params_per_rank

    layout, model = config.layout, config.model
    mesh = layout.tp if isinstance(layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    params = params_per_rank(replace(model, layers=model.layers // layout.pp), mesh)
    ends = (stage == 0) + (stage == layout.pp - 1)
    return params + ends * head_params_per_rank(config.vocab, model, mesh)


def _tied_embedding_s(topology: Topology, profile: HardwareProfile, config: JobConfig,
                      stage: int) -> float:
    """The all-reduce of the tied embedding's gradient between the first and last stage
    (Megatron-LM's embedding group), on those two stages; 0 elsewhere or with one stage."""
    from atpsim.parallel.head import head_params_per_rank

    layout = config.layout
    if config.vocab == 0 or layout.pp == 1 or stage not in (0, layout.pp - 1):
        return 0.0
    mesh = layout.tp if isinstance(layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    nbytes = head_params_per_rank(config.vocab, config.model, mesh) * config.model.dtype_bytes
    pairs = [list(pair) for pair in layout.send_pairs(0, layout.pp - 1)]
    return _collective_s(topology, profile, "all_reduce", "auto", pairs, nbytes)


def _buckets(total_bytes: float, bucket_bytes: float) -> list[float]:
    full = int(total_bytes // bucket_bytes)
    rest = total_bytes - full * bucket_bytes
    return [bucket_bytes] * full + ([rest] if rest > 0 else [])


def _collective_s(topology: Topology, profile: HardwareProfile, op: str, algorithm: str,
                  groups: list[list[int]], nbytes: float) -> float:
    """One call of *op* on every group at once, as the step simulator times it (the default
    collective backend: as NCCL runs it, with its per-call cost), s."""
    from atpsim.engine.backends import charges_call_cost, get_backend
    from atpsim.engine.step.run import DEFAULT_BACKEND

    times = get_backend(DEFAULT_BACKEND)(topology, op, algorithm, groups, nbytes)
    charged = charges_call_cost(DEFAULT_BACKEND, topology)
    return max(times, default=0.0) + (0.0 if charged else _overhead_s(profile))


def _overhead_s(profile: HardwareProfile) -> float:
    """The profile's fixed cost per collective call (charged where the backend has none)."""
    return float(getattr(profile, "collective_overhead_s", 0.0) or 0.0)


def _optimizer_s(profile: HardwareProfile, config: JobConfig, params: float) -> float:
    """The Adam update of *params* parameters, memory-bound (:func:`adam_bytes_per_param`)."""
    from atpsim.compute.timing import compute_time_s
    from atpsim.parallel.atp import adam_bytes_per_param

    op = ComputeOp("adam", "memory", bytes_moved=params * adam_bytes_per_param(config.model.dtype_bytes))
    return compute_time_s(op, profile, config.model.dtype)


def job_memory(config: JobConfig) -> JobMemory:
    """The busiest rank's memory for *config* (weights, gradients, optimizer state with ZeRO,
    activations of the micro-batches in flight with recomputation and sequence parallelism)."""
    from atpsim.parallel.job_memory import job_memory_per_rank

    return job_memory_per_rank(
        config.model, config.layout, micro_batch=config.micro_batch,
        n_microbatches=config.n_microbatches, schedule=config.schedule,
        virtual_stages=config.virtual_stages, zero=config.zero,
        recompute=config.recompute,  # type: ignore[arg-type]
        sequence_parallel=config.sequence_parallel, vocab=config.vocab,
    )  # fmt: skip


def _prediction(config: JobConfig, profile: HardwareProfile, timeline: JobTimeline,
                cost: Callable[[int, PipelineOp], PassCost]) -> JobPrediction:
    from atpsim.parallel.head import head_flops

    stage = timeline.critical_stage()
    end, t = timeline.stages[stage], timeline.step_time_s
    spent = sum((cost(stage, op) for op in timeline.pipeline.orders[stage]), NO_COST)
    compute, exposed_tp = spent.compute_s, spent.exposed_s
    bubble = end.backward_end_s - timeline.pipeline.busy_s(stage)

    whole = replace(config.model, batch=config.global_batch)
    model_flops = whole.step_flops() + (head_flops(config.vocab, whole) if config.vocab else 0.0)
    hardware_flops = model_flops * (4 / 3 if config.recompute == "full" else 1.0)
    per_gpu = t * config.layout.size
    peak = profile.peak_flops_for(config.model.dtype)
    other = t - compute - exposed_tp - bubble - end.exposed_sync_s
    memory = job_memory(config).total_bytes
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
        memory_per_rank_bytes=memory,
        fits_memory=memory <= profile.memory_capacity_bytes,
        timeline=timeline,
    )
