"""`simulate_job`: one training iteration of a DP x PP x CP x TP job, its time and breakdown.

The stages are chained as for one step, one level up:

1. the layout (:class:`~atpsim.parallel.layout.ParallelLayout`) puts every TP mesh, pipeline
   stage and data-parallel replica on GPU ranks of the topology;
2. each stage's forward and backward of one micro-batch is its TP pass program
   (:mod:`atpsim.training.passes`), timed on every TP group of the job at once;
3. the communication between them is collective calls (:mod:`atpsim.training.calls`): sends
   between stages (a 2-rank binomial broadcast of the stage's activations, ``[T, h/d2]``
   per rank), each stage's gradient buckets over its DP groups (all-reduce, or reduce-scatter
   and a parameter all-gather after the optimizer with ZeRO-1), the tied embedding's
   all-reduce between the first and last stage;
4. ``network="joint"`` (the default): every replica's pipeline, sends, buckets and optimizer
   run as one task graph on one network (:mod:`atpsim.engine.step.job_graph`,
   :mod:`atpsim.engine.joint`), so calls in flight together share links (the last sends of
   the cooldown under the first gradient buckets, on the same NICs); a pass is one delay of
   its time alone where its TP traffic is proven to meet nothing else, and its own tasks
   otherwise (an ATP mesh whose dimension 2 crosses the NICs). ``network="isolated"``: the
   composition before issue 13, every call alone (:func:`atpsim.engine.step.job.
   simulate_iteration`). Where no two calls meet, both give the same numbers, bit for bit.
   Both are ``network`` methods, and a pass's *granularity* a ``granularity`` method, of
   :mod:`atpsim.engine.methods`.

*perturb* (:class:`~atpsim.engine.joint.perturb.Perturbation`) slows chosen GPUs' compute and
links' bandwidth (joint network only). *trace* is handed the iteration's run to write
(:mod:`atpsim.api.job_trace` writes it as a Chrome trace). Not modelled: SUMMA grids.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from atpsim.compute.hardware import HardwareProfile, hardware_profile, topology_hardware
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import compute_time_s
from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.collector import paused_collector
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphTimeline, NotUniform, TaskGraph
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.perturb import Perturbation
from atpsim.engine.methods import ALONE, PLAIN, Method, find, names
from atpsim.engine.step.job import JobTimeline, simulate_iteration
from atpsim.engine.step.job_graph import (
    JobTasks,
    OpBuilder,
    StageCalls,
    build_job_graph,
    job_timeline,
)
from atpsim.engine.step.job_ops import ProgramOps, pass_delays
from atpsim.engine.step.run import compute_timer
from atpsim.errors import SimulationError, param
from atpsim.parallel.atp import adam_bytes_per_param, params_per_rank
from atpsim.parallel.context import CP_DIM
from atpsim.parallel.head import head_flops, head_params_per_rank
from atpsim.parallel.job_memory import JobMemory, job_memory_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import EP_DIM
from atpsim.parallel.partition import EVEN
from atpsim.parallel.pipeline import PipelineOp, stage_orders
from atpsim.program import ComputeOp
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology
from atpsim.training.calls import (
    JobComm,
    cp_groups_of,
    ep_groups_of,
    gradient_syncs,
    job_calls,
    stage_calls,
    tied_call,
    tp_isolated,
    transfer_timer,
)
from atpsim.training.config import DEFAULT_BUCKET_BYTES, JobConfig, check_job, job_config
from atpsim.training.experts import check_unperturbed, optimizer_shard, stage_expert_params_per_rank
from atpsim.training.partition import resolve_partition
from atpsim.training.passes import NO_COST, JobPrograms, OpCosts, PassCost, op_parts
from atpsim.training.perturb import job_perturbation, replica_costs

log = logging.getLogger(__name__)

#: An iteration's graph of this many tasks or more is announced with its cost: where the
#: passes' TP traffic meets other traffic, every pass of every replica is its own tasks. Measured
#: on the 2-core development machine, megatron-1.7b on 1024 GPUs of 8-GPU nodes (the passes
#: share NVLink with the pipeline sends or the DP ring's in-node hop): TP 4x1, PP 2, 3.4 million
#: tasks in 21 s; TP 4x1, PP 1, 3.4 million tasks in 55 s and 3.96 GB peak (more calls meet).
LARGE_GRAPH_TASKS = 2_000_000
SECONDS_PER_TASK = 16e-6
BYTES_PER_TASK = 1.2e3

__all__ = ["DEFAULT_BUCKET_BYTES", "JobConfig", "JobPrediction", "PassCost", "Perturbation",
           "TraceWriter", "check_job", "job_memory", "load_machine", "run_job", "simulate_job",
           "stage_params_per_rank"]  # fmt: skip

#: What a joint iteration's graph folds, tried in turn (:func:`joint_job`): replicas (and TP
#: ranks), TP ranks, nothing.
REPLICAS, RANKS, UNFOLDED = "replicas", "ranks", "none"
FOLDS = (REPLICAS, RANKS, UNFOLDED)

#: How the iteration's calls share the network: together (issue 13) or each alone (the
#: ``network`` methods of :mod:`atpsim.engine.methods`).
NETWORKS = tuple(names("network"))

#: ``write(topology, run)``: what is done with a traced iteration's run (its labelled tasks'
#: times and link counts) on the *topology* as it ran, e.g. written as a Chrome trace.
TraceWriter = Callable[[Topology, GraphTimeline], object]


@dataclass(frozen=True)
class JobPrediction:
    """One iteration: seconds on the critical stage and what they were spent on (compute +
    exposed TP + pipeline bubble + exposed DP + exposed host copies + other = iteration time; other is the optimizer
    step, the ZeRO parameter gather and ranks waiting inside a pass); FLOP/s per GPU
    in 10^12, counted as Megatron-LM counts model FLOPs (no recomputation) and, separately,
    the hardware FLOPs that recomputation adds; MFU against the profile's peak. *network*:
    how the calls shared it; *stats*: what the joint run did (:mod:`atpsim.engine.joint`);
    *link_bytes* / *link_busy_s*: per directed link of the topology, when asked for;
    *stage_layers*: the layers each pipeline stage held (``partition: auto`` as resolved)."""

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
    network: str = "joint"
    stats: dict[str, Any] = field(default_factory=dict, compare=False)
    link_bytes: np.ndarray | None = field(default=None, compare=False, repr=False)
    link_busy_s: np.ndarray | None = field(default=None, compare=False, repr=False)
    stage_layers: tuple[int, ...] = ()
    #: Of the iteration, activation copies to and from the host the critical stage's compute
    #: did not hide (``offload_activations``: :mod:`atpsim.training.offload`); 0 without.
    exposed_offload_s: float = 0.0


def simulate_job(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig,
    *,
    tp: tuple[int, int] | DeviceMesh = (1, 1),
    pp: int = 1,
    dp: int = 1,
    micro_batch: int = 1,
    global_batch: int | None = None,
    order: tuple[str, ...] = ("tp", "pp", "dp"),
    ep: int = 1,
    cp: int = 1,
    hardware: str | None = None,
    network: str = "joint",
    perturb: Perturbation | Mapping[str, Any] | None = None,
    links: bool = False,
    trace: TraceWriter | None = None,
    fold: bool = True,
    **options: Any,
) -> JobPrediction:
    """Simulate one training iteration of *model* with tensor parallelism on the ATP mesh *tp*
    (Megatron-LM's 1D TP is ``(t, 1)``), *pp* pipeline stages and *dp* data-parallel replicas
    on *topology*; *order* names the layout's dimensions innermost first; *ep* splits a
    mixture of experts' experts over that many of the replicas (expert parallelism,
    :mod:`atpsim.parallel.moe`; it divides *dp* and the experts); *cp* splits every sequence
    over that many context-parallel ranks of each replica (ring attention,
    :mod:`atpsim.parallel.context`; ``2·cp`` divides the sequence), the job then
    ``tp·cp·pp·dp`` GPUs (cp placed after tp where *order* does not name it). *options* are the
    fields of :class:`JobConfig` (schedule, virtual_stages, chunks, algorithm, bucket_bytes,
    overlap_grad_reduce, zero, recompute, sequence_parallel, vocab; their defaults are
    :data:`atpsim.training.defaults.JOB_DEFAULTS`, the vocabulary a preset's own). *global_batch* defaults
    to one micro-batch per replica and stage (``micro_batch · dp · pp``). *network*: ``joint``
    or ``isolated`` (module docstring); *perturb*: a Perturbation or its keys (``seed``,
    ``stragglers``, ``straggler_factor``, ``slow_nics``, ``nic_factor``, ``gpus``, ``links``:
    :func:`~atpsim.training.perturb.draw_perturbation`); *links*: also count bytes and
    busy time per link; *trace*: handed the iteration's labelled run to write
    (:data:`TraceWriter`; :func:`atpsim.api.simulate_job` takes a path and writes a
    Chrome/Perfetto trace there); *fold*: False builds every replica and TP rank's tasks (the
    reference the folded graph is held to, :func:`run_job`)."""
    mesh = tp if isinstance(tp, DeviceMesh) else DeviceMesh(*tp)
    config = job_config(model, ParallelLayout(mesh, pp, dp, order, ep=ep, cp=cp), micro_batch,
                        global_batch or micro_batch * dp * pp, **options)
    check_job(config)
    topo, profile = load_machine(topology, config.layout.size, hardware)
    drawn = job_perturbation(topo, config, perturb)
    return run_job(topo, profile, config, network=network, perturb=drawn, links=links, trace=trace, fold=fold)


def load_machine(topology: str | Mapping[str, Any], n: int, hardware: str | None
                 ) -> tuple[Topology, HardwareProfile]:
    """The machine a job of *n* GPUs runs on: *topology* (a spec, sized to *n* GPUs where it
    leaves its size open) and the profile *hardware* names, else the topology's, else
    :data:`~atpsim.compute.hardware.DEFAULT_HARDWARE`."""
    topo = load_topology(topology if isinstance(topology, str) else dict(topology), n_gpus=n)
    if topo.n_gpus < n:
        raise SimulationError(f"the layout needs {n} GPUs; {topo.name} has {topo.n_gpus}", key="dp")
    return topo, hardware_profile(topology_hardware(topo, hardware))


def run_job(topology: Topology, profile: HardwareProfile, config: JobConfig, *,
            network: str = "joint", perturb: Perturbation | None = None,
            links: bool = False, trace: TraceWriter | None = None, fold: bool = True) -> JobPrediction:
    """:func:`simulate_job` on a built topology and profile (``partition: auto`` resolved on
    *profile* first: :func:`~atpsim.training.partition.resolve_partition`). On the joint
    network the graph is folded as far as it is exact (:data:`FOLDS`, tried in turn; never
    with *fold* False, nor for a traced iteration: every rank's tasks are written)."""
    config = resolve_partition(config, profile)
    method = _method("network", network)
    orders = stage_orders(config.schedule, config.shape)
    if method.kind == ALONE:
        if trace is not None:
            raise SimulationError("a trace of the iteration needs the joint network", key="trace")
        return _isolated(topology, profile, config, perturb, orders)
    return _joint_run(topology, profile, config, perturb, links, trace, fold)


@paused_collector()  # millions of objects, almost no cycles; its frame is gone before it resumes
def _joint_run(topology: Topology, profile: HardwareProfile, config: JobConfig, perturb: Perturbation | None,
               links: bool, trace: TraceWriter | None, fold: bool) -> JobPrediction:
    """:func:`run_job` on the joint network: the graph folded as far as it is exact."""
    parts = job_parts(topology, profile, config, perturb=perturb)
    for folded in FOLDS if fold and trace is None else (UNFOLDED,):
        job = joint_job(topology, profile, config, perturb=perturb, labelled=trace is not None, fold=folded, parts=parts)
        try:
            run = run_graph(job.graph, job.machine, links=links or trace is not None)
            break
        except NotUniform as broken:  # the copies are not in step: fold less
            log.debug("the iteration folded over its %s is not exact (%s)", folded, broken)
    if trace is not None:
        trace(job.machine.topology, run)
    return joint_prediction(profile, config, job, run)


def _method(choice: str, name: str) -> Method:
    """The *choice* method called *name* (:mod:`atpsim.engine.methods`); a SimulationError
    keyed by *choice* naming the valid ones otherwise."""
    method = find(choice, name)
    if method is None:
        raise SimulationError(f"unknown {choice} {name!r}; expected one of {', '.join(names(choice))}",
                              key=choice)  # fmt: skip
    return method


def joint_prediction(profile: HardwareProfile, config: JobConfig, job: JointJob,
                     run: GraphTimeline) -> JobPrediction:
    """The prediction of *job*'s graph run *run* (its tasks' times)."""
    config = resolve_partition(config, profile)
    timeline, replica = job_timeline(run, job.tasks, stage_orders(config.schedule, config.shape))
    prediction = _prediction(config, profile, timeline, lambda s, o: job.costs(replica, s)(s, o),
                             actual=not job.passes_as_delays)  # fmt: skip
    stats = {**run.stats, "tasks": len(job.graph), "passes_as_delays": int(job.passes_as_delays)}
    return replace(prediction, network="joint", stats=stats, link_bytes=run.link_bytes,
                   link_busy_s=run.link_busy_s)  # fmt: skip


def _isolated(topology: Topology, profile: HardwareProfile, config: JobConfig,
              perturb: Perturbation | None, orders: tuple) -> JobPrediction:
    """The composition before issue 13: every call alone, one pipeline for all replicas."""
    if perturb is not None and not perturb.empty:
        raise SimulationError("a perturbation needs the joint network", key="perturb")
    programs = JobPrograms(config)
    cost = OpCosts(topology, profile, programs)
    comm = JobComm(topology, profile, config)
    machine = JointNetwork(topology)
    stages = job_stage_calls(comm, profile, config)
    syncs = gradient_syncs(machine, stages, tied_call(comm, _head_bytes(config)))
    timeline = simulate_iteration(orders, config.shape, lambda s, op: cost(s, op).time_s,
                                  transfer_timer(machine, comm), syncs)  # fmt: skip
    return replace(_prediction(config, profile, timeline, cost), network="isolated")


@dataclass(frozen=True)
class JointJob:
    """An iteration as one task graph on one network: *graph* and its *tasks*, the *machine*
    (links as they run), ``costs(replica, stage)`` (each op's cost alone) and whether the
    passes are single delays (*passes_as_delays*: their TP traffic meets nothing else)."""

    graph: TaskGraph
    tasks: JobTasks
    machine: JointNetwork
    costs: Callable[[int, int], OpCosts]
    passes_as_delays: bool


@dataclass(frozen=True)
class JobParts:
    """What every graph of one job is built from, whatever it folds: the job's *config*
    (its partition resolved), *programs*, *comm*, the *machine*, each stage's gradient calls
    (*stages*), the *tied* embedding's sync, each op's *costs* and whether the passes are
    single delays (*isolated*)."""

    config: JobConfig
    programs: JobPrograms
    comm: JobComm
    machine: JointNetwork
    stages: tuple[StageCalls, ...]
    tied: CallSpec | None
    costs: Callable[[int, int], OpCosts]
    isolated: bool


def job_parts(topology: Topology, profile: HardwareProfile, config: JobConfig, *,
              perturb: Perturbation | None = None, granularity: str = "auto") -> JobParts:
    """:class:`JobParts` of *config* (:func:`joint_job`'s *granularity* and *perturb*); built
    once for every fold :func:`run_job` tries."""
    grain = _method("granularity", granularity)
    config = resolve_partition(config, profile)
    programs = JobPrograms(config)
    comm = JobComm(topology, profile, config)
    machine = JointNetwork(perturb.apply(topology) if perturb else topology, topology)
    stages = job_stage_calls(comm, profile, config)
    tied = tied_call(comm, _head_bytes(config))
    check_unperturbed(config, perturb is not None and not perturb.empty)
    if config.layout.cp > 1 and perturb is not None and not perturb.empty:
        raise SimulationError("a perturbation of a context-parallel job (cp > 1) is not modelled: its "
                              "ring attention sends span pipelines", key="perturb")  # fmt: skip
    costs = replica_costs(topology, machine, profile, programs, OpCosts(topology, profile, programs), perturb)
    isolated = grain.kind != PLAIN and tp_isolated(machine, comm, programs.all(),
                                                      _other_calls(comm, stages, tied))  # fmt: skip
    if grain.strict and not isolated:
        raise SimulationError("the passes' TP traffic meets other traffic; they cannot be single delays",
                              key="granularity")  # fmt: skip
    return JobParts(config, programs, comm, machine, stages, tied, costs, isolated)


def joint_job(topology: Topology, profile: HardwareProfile, config: JobConfig, *,
              perturb: Perturbation | None = None, granularity: str = "auto",
              labelled: bool = False, fold: str = UNFOLDED, parts: JobParts | None = None) -> JointJob:
    """The iteration of *config* as one task graph (:mod:`atpsim.engine.step.job_graph`).
    *granularity*: ``auto`` (a pass is one delay where its TP traffic is proven to meet
    nothing else, its own tasks otherwise), ``passes`` or ``tasks`` (forced; a forced
    ``passes`` where the traffic meets is a SimulationError). *fold* (:data:`FOLDS`): build
    one replica and one TP rank for all (``replicas``) or one TP rank of each stage for all
    (``ranks``) where the job is unperturbed and its passes' collectives stay inside a
    replica (the folded graph: its run raises :class:`~atpsim.engine.joint.graph.NotUniform`
    where the copies turn out not to be in step, and the caller folds less). *parts*: the
    job's :func:`job_parts` (built here where not given)."""
    parts = parts or job_parts(topology, profile, config, perturb=perturb, granularity=granularity)
    config, programs, comm, machine = parts.config, parts.programs, parts.comm, parts.machine
    stages, tied, costs, isolated = parts.stages, parts.tied, parts.costs, parts.isolated
    spans = config.layout.ep > 1 or config.layout.cp > 1
    if fold not in FOLDS:
        raise SimulationError(f"fold {fold!r}: expected one of {', '.join(FOLDS)}")
    if spans or (perturb is not None and not perturb.empty):
        fold = UNFOLDED
    op = pass_delays(lambda r, s, o: costs(r, s)(s, o).time_s) if isolated \
        else _program_ops(machine, profile, comm, programs, costs, perturb, fold)
    together = op.together if isinstance(op, ProgramOps) and spans else None
    graph, tasks = build_job_graph(job_calls(comm, stages, tied, op, together, fold == REPLICAS), labelled)
    if len(graph) >= LARGE_GRAPH_TASKS:
        layout = config.layout
        log.warning("TP %s, PP %d, DP %d: the passes' TP traffic meets other traffic, so the "
                    "iteration is %s tasks on the joint network (up to about %.0f s and %.1f GB); "
                    "network: isolated (%s) times each call alone", layout.tp,
                    layout.pp, layout.dp, f"{len(graph):,}", len(graph) * SECONDS_PER_TASK,
                    len(graph) * BYTES_PER_TASK / 1e9, param("network", "isolated"))  # fmt: skip
    return JointJob(graph, tasks, machine, costs, isolated)


def _other_calls(comm: JobComm, stages: tuple, tied: CallSpec | None) -> list[CallSpec]:
    """Every call of the iteration other than the passes' TP collectives."""
    layout, v = comm.config.layout, comm.config.virtual_stages
    p = layout.pp
    hops = {((k - 1) % p, k % p) for k in range(1, p * v)} | {((k + 1) % p, k % p) for k in range(p * v - 1)}
    sends = [comm.send(a, b) for a, b in sorted(hops)]
    calls = [c for c in sends if c is not None] + [tied] * (tied is not None)
    for s in stages:
        calls += list(s.buckets) + [c for c in (s.gather, s.expert_gather) if c is not None]
    return [c for c in calls if c is not None]


def _program_ops(machine: JointNetwork, profile: HardwareProfile, comm: JobComm,
                 programs: JobPrograms, costs: Callable[[int, int], OpCosts],
                 perturb: Perturbation | None, fold: str = UNFOLDED) -> OpBuilder:
    """Passes as their programs' tasks (their TP traffic meets other traffic); *fold*: what
    the graph folds (:data:`FOLDS`)."""
    config = programs.config
    layout, mesh = config.layout, config.layout.tp
    if not isinstance(mesh, DeviceMesh):
        raise SimulationError("jobs run on ATP meshes (SUMMA grids: not yet)", key="tp")
    n_gpus = machine.topology.n_gpus
    scale = perturb.compute_scale(n_gpus) if perturb else np.ones(n_gpus)
    return ProgramOps(op_parts(profile, programs, lambda s, k: costs(0, s).offload_s(s, k)), layout.stage_ranks, mesh,
                      compute_timer(profile, config.model.dtype), scale, comm.tp_call,
                      lambda r, s: r * layout.pp + s,
                      lambda r, s, o: costs(r, s)(s, o).time_s,
                      spans=lambda op: op.dim in (EP_DIM, CP_DIM), across=comm.tp_call,
                      replicas=layout.replicas,
                      across_groups=lambda s: cp_groups_of(layout, s) if layout.cp > 1 else ep_groups_of(layout, s),
                      fold=layout.replicas if fold == REPLICAS else 0, fold_ranks=fold != UNFOLDED)  # fmt: skip


def job_stage_calls(comm: JobComm, profile: HardwareProfile, config: JobConfig) -> tuple[StageCalls, ...]:
    """Every stage's gradient buckets, optimizer step and ZeRO-1 gathers (:func:`stage_calls`),
    the experts' apart where they are expert-parallel."""
    return tuple(stage_calls(comm, s, stage_params_per_rank(config, s), optimizer_s(profile, config, s),
                             stage_expert_params_per_rank(config, s))
                 for s in range(config.layout.pp))  # fmt: skip


def stage_params_per_rank(config: JobConfig, stage: int) -> float:
    """Parameters one TP rank of *stage* holds: its layers' shard (``L/p``, or the
    partition's count: :attr:`JobConfig.stage_layers`), and the vocabulary shard of the
    embedding (first stage) and of the tied LM head (last stage)."""
    layout, model = config.layout, config.model
    mesh = layout.tp if isinstance(layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    layers = config.stage_layers[stage]
    params = params_per_rank(replace(model, layers=layers), mesh, layout.ep) if layers else 0.0
    ends = (stage == 0) + (stage == layout.pp - 1)
    return params + ends * head_params_per_rank(config.vocab, model, mesh)


def _head_bytes(config: JobConfig) -> float:
    """Bytes of the tied embedding's gradient on one TP rank (0 without a vocabulary)."""
    if config.vocab == 0:
        return 0.0
    mesh = config.layout.tp if isinstance(config.layout.tp, DeviceMesh) else DeviceMesh(1, 1)
    return head_params_per_rank(config.vocab, config.model, mesh) * config.model.dtype_bytes


def optimizer_s(profile: HardwareProfile, config: JobConfig, stage: int) -> float:
    """The Adam update of one rank's parameters of *stage* (its ZeRO-1 shard: the experts' over
    their own ``dp/ep`` replicas, :func:`~atpsim.training.experts.optimizer_shard`),
    memory-bound (:func:`adam_bytes_per_param`)."""
    params = optimizer_shard(config, stage_params_per_rank(config, stage),
                             stage_expert_params_per_rank(config, stage))

    op = ComputeOp("adam", "memory", bytes_moved=params * adam_bytes_per_param(config.model.dtype_bytes))
    return compute_time_s(op, profile, config.model.dtype)


def job_memory(config: JobConfig) -> JobMemory:
    """The busiest rank's memory for *config* (weights, gradients, optimizer state with ZeRO,
    activations of the micro-batches in flight with recomputation and sequence parallelism),
    over the stages as the partition splits the layers (``auto`` resolved first:
    :func:`~atpsim.training.partition.resolve_partition`)."""
    return job_memory_per_rank(
        config.model, config.layout, micro_batch=config.micro_batch,
        n_microbatches=config.n_microbatches, schedule=config.schedule,
        virtual_stages=config.virtual_stages, zero=config.zero,
        recompute=config.recompute,  # type: ignore[arg-type]
        sequence_parallel=config.sequence_parallel, vocab=config.vocab,
        stage_layers=None if config.partition == EVEN else config.stage_layers,
        offload=config.offload_activations,
    )  # fmt: skip


def _prediction(config: JobConfig, profile: HardwareProfile, timeline: JobTimeline,
                cost: Callable[[int, PipelineOp], PassCost], actual: bool = False) -> JobPrediction:
    """The prediction from the critical stage's *timeline*; with *actual*, the ops' own
    durations in the timeline beyond their costs alone count as exposed TP communication
    (their TP traffic met other traffic)."""
    stage = timeline.critical_stage()
    end, t = timeline.stages[stage], timeline.step_time_s
    spent = sum((cost(stage, op) for op in timeline.pipeline.orders[stage]), NO_COST)
    compute, exposed_tp = spent.compute_s, spent.exposed_s
    busy = timeline.pipeline.busy_s(stage)
    if actual:
        exposed_tp += busy - spent.time_s
    bubble = end.backward_end_s - busy

    whole = replace(config.model, batch=config.global_batch)
    model_flops = whole.step_flops() + (head_flops(config.vocab, whole) if config.vocab else 0.0)
    hardware_flops = model_flops * (4 / 3 if config.recompute == "full" else 1.0)
    per_gpu = t * config.layout.size
    peak = profile.peak_flops_for(config.model.dtype)
    offload = spent.offload_s
    other = t - compute - exposed_tp - bubble - end.exposed_sync_s - offload
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
        stage_layers=config.stage_layers,
        exposed_offload_s=offload,
    )
