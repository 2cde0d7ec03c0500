"""The layouts of a job, one enumerator for every caller, and `plan_job`, which searches them.

:func:`tp_meshes` gives the TP meshes of a device count and :func:`layout_grid` the whole-job
layouts (TP mesh x PP x DP x micro-batch x global batch x the other axes: schedule, chunks,
...): the step planner (:func:`atpsim.api.planner.plan`), the job planner (:func:`plan_job`),
the search (:mod:`atpsim.api.search`) and job scenarios (:mod:`atpsim.scenario.job_sweep`)
all walk them; where they differ on purpose it is a named argument (which meshes split the
hidden size, which data-parallel degrees a TP x PP takes) or a step of their own
(:func:`candidates` prunes for the search and the job planner; a job scenario refuses a
layout that cannot run, naming its key, and prunes nothing).

`plan_job` searches TP mesh x PP x DP x micro-batch x chunks for a model on a machine. Every
layout of *devices* GPUs whose TP mesh fits inside a node-sized group (``max_tp``), whose
pipeline depth divides the layers (any depth up to the layers where ``partition`` splits
them unevenly: :mod:`atpsim.parallel.partition`) and whose data-parallel degree and
micro-batch divide the global batch is a candidate; ``partition: auto`` is resolved on the
machine's profile before a layout is pruned (:func:`~atpsim.training.partition.resolve_partition`). Candidates are pruned before any simulation: by divisibility (the
heads and hidden size over the mesh, the layers over the stages) and by memory (the busiest
rank's :func:`~atpsim.parallel.job_memory.job_memory_per_rank` against the device's capacity).
The rest are simulated (:func:`atpsim.training.job.run_job`) and ranked by iteration time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product
from typing import Any, NamedTuple

import numpy as np

from atpsim.calibrate.uncertainty.apply import ParameterDraw
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.machine import drawn_machine, machine_sources, require_sources
from atpsim.calibrate.uncertainty.summary import Interval, RankingConfidence, ranking_confidence
from atpsim.compute.hardware import HardwareProfile, topology_hardware
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.compute.timing import check_model_dtype
from atpsim.errors import SimulationError
from atpsim.parallel.atp import kv_heads_split
from atpsim.parallel.context import check_context
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.parallel.moe import check_experts
from atpsim.parallel.partition import AUTO, EVEN, Partition, as_partition, check_partition_value
from atpsim.topology.graph import Topology
from atpsim.topology.spec import topology_label
from atpsim.training.bound import iteration_lower_bound_s, simulate_fastest
from atpsim.training.config import JobConfig, check_job, runs_sequence_parallel
from atpsim.training.defaults import SEARCH_SEQUENCE_PARALLEL, model_vocab
from atpsim.training.job import JobPrediction, job_memory, load_machine, run_job
from atpsim.training.partition import resolve_partition


@dataclass(frozen=True)
class JobCandidate:
    """One simulated layout and its prediction."""

    config: JobConfig
    prediction: JobPrediction
    #: Its iteration time (s) in each parameter draw, where it was drawn (:func:`plan_job`).
    draws: tuple[float, ...] | None = None

    @property
    def interval(self) -> Interval | None:
        """The p10/p50/p90 of its iteration time over the draws (None: not drawn)."""
        return None if self.draws is None else Interval.of(self.draws)

    @property
    def label(self) -> str:
        layout = self.config.layout
        tp = f"{layout.tp.d1}x{layout.tp.d2}" if isinstance(layout.tp, DeviceMesh) else str(layout.tp)
        chunks = f", chunks {self.config.chunks}" if self.config.chunks > 1 else ""
        sp = ", SP" if self.config.sequence_parallel else ""
        ep = f", ep {layout.ep}" if layout.ep > 1 else ""
        cp = f", cp {layout.cp}" if layout.cp > 1 else ""
        counts = () if self.config.partition == EVEN else self.config.stage_layers
        split = f" [{'/'.join(map(str, counts))}]" if len(set(counts)) > 1 else ""
        return f"tp {tp}{sp}, pp {layout.pp}{split}, dp {layout.dp}{ep}{cp}, mb {self.config.micro_batch}{chunks}"


@dataclass(frozen=True)
class JobPlan:
    """Candidates fastest first, how many layouts each pruning rule removed, and the
    hardware profile they ran on."""

    candidates: tuple[JobCandidate, ...]
    pruned: Mapping[str, int]
    #: The hardware profile the layouts ran on (the one given, else the topology's).
    hardware: str = ""
    #: The parameter draws of the fastest candidates (None: none asked for), the fits they
    #: perturbed, and how sure the fastest is among the candidates drawn.
    uncertainty: Draws | None = None
    sources: tuple[str, ...] = ()
    confidence: RankingConfidence | None = None

    @property
    def unmade(self) -> dict[str, int]:
        """Layouts pruned before anything ran, by reason (divisibility, memory)."""
        return {why: n for why, n in self.pruned.items() if why != BOUND}

    @property
    def not_simulated(self) -> int:
        """Layouts that fit but were not simulated: their lower bound is above the fastest
        ``top`` (:func:`plan_job`)."""
        return self.pruned.get(BOUND, 0)

    @property
    def drawn(self) -> int:
        """How many of the fastest candidates were simulated under the draws."""
        return sum(c.draws is not None for c in self.candidates)

    @property
    def best(self) -> JobCandidate:
        if not self.candidates:
            raise SimulationError("no layout of these devices divides the model and fits in memory")
        return self.candidates[0]


def plan_job(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig,
    *,
    devices: int,
    global_batch: int,
    max_tp: int = 8,
    pipelines: Sequence[int] | None = None,
    micro_batches: Sequence[int] = (1, 2, 4),
    chunk_counts: Sequence[int] = (1,),
    hardware: str | None = None,
    network: str = "joint",
    sequence_parallel: bool | None = None,
    expert_parallel: Sequence[int] | None = None,
    context_parallel: Sequence[int] = (1,),
    track: Track | None = None,
    uncertainty: int | None = None,
    seed: int = 0,
    top: int = 10,
    exhaustive: bool = False,
    **options: Any,
) -> JobPlan:
    """Simulate every layout of *devices* GPUs that divides the model and fits in memory and
    rank them by iteration time. TP meshes are every DeviceMesh(d1, d2) of at most *max_tp*
    GPUs (Megatron-LM's 1D TP is (t, 1)); *pipelines* are the pipeline depths to try (default:
    every divisor of the layers, :func:`layer_divisors`: every depth with ``partition="auto"``); *chunk_counts* the ATP chunk counts of each TP pass (a count
    that does not divide the micro-batch is pruned by divisibility); *options* are
    :class:`~atpsim.training.config.JobConfig` fields shared by all candidates (schedule, zero,
    recompute, ...); *network* how each candidate's calls share the links
    (:data:`atpsim.training.job.NETWORKS`: ``joint``, one network for every call in flight, or
    ``isolated``, each call alone; much faster where TP groups are smaller than a node);
    *sequence_parallel* Megatron-LM's sequence parallelism for the 1D meshes (t, 1) (default:
    each 1D layout with and without, :data:`~atpsim.training.defaults.SEARCH_SEQUENCE_PARALLEL`;
    a 2D mesh runs without, as in a search or a job scenario); *expert_parallel* the
    expert-parallel degrees of a mixture of experts (default: every divisor of its experts,
    :func:`expert_parallel_degrees`; each layout takes those that divide its dp; refused by
    key ``ep`` on a dense model above 1 or not dividing the experts); *context_parallel* the
    context-parallel degrees (each splits every sequence over that many GPUs of a replica:
    ``tp·cp·pp·dp`` GPUs; one whose ``2·cp`` chunks do not split the sequence is refused by
    key ``cp``, one that does not divide the devices makes no layout); *options* not given take
    :data:`~atpsim.training.defaults.JOB_DEFAULTS` (the vocabulary: a preset's own). All layouts are pruned first; then
    *track*, if given, wraps the list of those to simulate (a progress bar: it yields each
    as it is simulated). ``atpsim search`` searches the same layouts on the sweep's executor
    (:mod:`atpsim.api.search`). *uncertainty* = N simulates the *top* fastest layouts again
    under N draws of the fitted parameters from *seed* (:func:`drawn_ranking`). Only the
    *top* fastest are sure to be among the candidates: a layout whose lower bound is above
    them is not simulated (:func:`_simulated`; counted in ``pruned["bound"]``) unless
    *exhaustive*."""
    draws = None if uncertainty is None else Draws(uncertainty, seed)
    config_model = model if isinstance(model, ModelConfig) else model_preset(model)
    topo, profile = load_machine(topology, devices, hardware)
    check_model_dtype(profile, config_model)
    hardware_name = topology_hardware(topo, hardware)
    sources = _draw_sources(topology, devices, hardware_name, draws)
    axes = _plan_axes(model, config_model, options, chunk_counts, sequence_parallel, expert_parallel,
                      context_parallel)  # fmt: skip
    depths = pipelines or layer_divisors(config_model, as_partition(options.get("partition", EVEN)))
    layouts = job_layouts(config_model, devices, tp_meshes(devices, max_tp), depths, micro_batches,
                          (global_batch,), axes, cps=context_parallel)  # fmt: skip
    kept, pruned = _prune(layouts, profile)
    ran, skipped = _simulated(kept, topo, profile, network, None if exhaustive else top, track)
    pruned = {**pruned, BOUND: skipped}
    results = [JobCandidate(config, prediction) for config, prediction in ran]
    results.sort(key=lambda c: (c.prediction.iteration_time_s, c.label))
    plan = JobPlan(tuple(results), pruned, profile.name)
    if draws is None or not results:
        return plan
    machine = DrawnMachine(topology, devices, profile, hardware_name, network)
    return drawn_ranking(plan, machine, draws, sources, top, track)


def _draw_sources(topology: str | Mapping[str, Any], devices: int, hardware: str, draws: Draws | None
                  ) -> tuple[str, ...]:  # fmt: skip
    """The fitted parameters the *draws* perturb on this machine (none without draws); a
    refusal where the machine has none."""
    if draws is None:
        return ()
    sources = machine_sources(topology, devices, hardware)
    require_sources(sources, f"{topology_label(topology)} with {hardware}")
    return sources


def _simulated(kept: list[JobConfig], topology: Topology, profile: HardwareProfile, network: str,
               top: int | None, track: Track | None) -> tuple[list[tuple[JobConfig, JobPrediction]], int]:
    """The layouts *kept* that could be among the *top* fastest (None: all of them), each
    with its prediction, and how many were not simulated (:func:`plan_job`). They run in the
    order of a lower bound on their iteration (:func:`~atpsim.training.bound.
    iteration_lower_bound_s`: compute and each TP collective's least time on the machine),
    stopping where the next bound is above the *top*-th shortest iteration run; a layout
    whose bound with its gradient buckets and gathers too is above it is skipped."""
    def run(config: JobConfig) -> JobPrediction:
        return run_job(topology, profile, config, network=network)

    def seconds(prediction: JobPrediction) -> float:
        return prediction.iteration_time_s

    if top is None:
        return simulate_fastest(kept, lambda c: 0.0, run, seconds, len(kept), track)
    return simulate_fastest(kept, lambda c: iteration_lower_bound_s(c, profile, topology, gradients=False),
                            run, seconds, top, track, lambda c: iteration_lower_bound_s(c, profile, topology))


def _plan_axes(model: str | ModelConfig, config_model: ModelConfig, options: dict[str, Any],
               chunk_counts: Sequence[int], sequence_parallel: bool | None,
               expert_parallel: Sequence[int] | None, context_parallel: Sequence[int],
               ) -> dict[str, tuple[Any, ...]]:  # fmt: skip
    """The JobConfig axes :func:`plan_job` searches: its *options* (the vocabulary, where not
    given, the model's) one value each, checked first (partition, each context-parallel degree
    against the sequence); sequence parallelism both ways unless asked; the expert-parallel
    degrees and chunk counts."""
    if options.get("vocab") is None:
        options["vocab"] = model_vocab(model)
    check_partition_value(as_partition(options.get("partition", EVEN)), config_model.layers)
    for cp in context_parallel:
        check_context(config_model.seq, cp)
    both = SEARCH_SEQUENCE_PARALLEL if sequence_parallel is None else (sequence_parallel,)
    return {"ep": expert_parallel_degrees(config_model, expert_parallel), "chunks": tuple(chunk_counts),
            "sequence_parallel": both, **{key: (value,) for key, value in options.items()}}  # fmt: skip


#: The pruning reason of the layouts :func:`plan_job` skips by their lower bound.
BOUND = "bound"


def _prune(layouts: Iterable[JobConfig], profile: HardwareProfile) -> tuple[list[JobConfig], dict[str, int]]:
    """The *layouts* (1D meshes with sequence parallelism as asked, 2D without) that divide
    the model and fit in *profile*'s memory per GPU, and how many were pruned for each reason."""
    pruned = {"divisibility": 0, "memory": 0}
    kept = []
    for config in candidates(layouts, profile.memory_capacity_bytes, profile):
        if isinstance(config, str):
            pruned[config] += 1
        else:
            kept.append(config)
    return kept, pruned


@dataclass(frozen=True)
class DrawnMachine:
    """What a job planner's candidates run on, to be drawn: topology *spec* sized to
    *devices*, *profile* (loaded as *hardware*), and the *network* method."""

    spec: str | Mapping[str, Any]
    devices: int
    profile: HardwareProfile
    hardware: str
    network: str

    def run(self, config: JobConfig, draw: ParameterDraw) -> float:
        """*config*'s iteration time (s) on this machine under *draw*."""
        topology, profile = drawn_machine(self.spec, self.devices, self.profile, self.hardware, draw)
        return run_job(topology, profile, config, network=self.network).iteration_time_s


def drawn_ranking(plan: JobPlan, machine: DrawnMachine, draws: Draws, sources: tuple[str, ...],
                  top: int, track: Track | None = None) -> JobPlan:  # fmt: skip
    """*plan* with its *top* fastest candidates simulated under each of *draws* (the same
    draws for every candidate: common random numbers,
    :mod:`atpsim.calibrate.uncertainty.draws`) and how sure the fastest is among them
    (:func:`~atpsim.calibrate.uncertainty.summary.ranking_confidence`). The rest are not
    drawn: a layout past *top* could win a draw, which the confidence does not see."""
    drawn = plan.candidates[:top]
    runs = [(i, k) for i in draws.indices() for k in range(len(drawn))]
    configs = [drawn[k].config for _, k in runs]
    times = np.zeros((draws.n, len(drawn)))
    for (i, k), config in zip(runs, track(configs) if track else configs, strict=True):
        times[i - 1, k] = machine.run(config, ParameterDraw(draws, i))
    candidates = [replace(c, draws=tuple(float(t) for t in times[:, k])) for k, c in enumerate(drawn)]
    return replace(plan, candidates=(*candidates, *plan.candidates[top:]), uncertainty=draws,
                   sources=sources, confidence=ranking_confidence(times, 0))  # fmt: skip


#: Wraps the layouts a job planner simulates, yielding each as it is simulated (a progress bar).
Track = Callable[[Sequence[JobConfig]], Iterable[JobConfig]]


def expert_parallel_degrees(model: ModelConfig, given: Sequence[int] | None = None) -> tuple[int, ...]:
    """The expert-parallel degrees to search for *model*: *given* (checked: above 1 only for a
    mixture of experts, each dividing its experts; key ``ep``), else every divisor of its
    experts (1 for a dense model)."""
    if given is None:
        return tuple(e for e in range(1, model.experts + 1) if model.experts % e == 0) or (1,)
    for ep in given:
        check_experts(model, ep)
    return tuple(given)


def layer_divisors(model: ModelConfig, partition: Partition = EVEN) -> list[int]:
    """Every pipeline depth that splits *model*'s layers evenly; with ``partition: auto``,
    every depth up to the layers (an uneven split needs no divisor); with a list of counts,
    its length."""
    if partition == AUTO:
        return list(range(1, model.layers + 1))
    if not isinstance(partition, str):
        return [len(partition)]
    return [p for p in range(1, model.layers + 1) if model.layers % p == 0]


def tp_meshes(devices: int, max_tp: int | None = None, *, sizes: Sequence[int] | None = None,
              listed: Sequence[DeviceMesh] = (), split_hidden: int | None = None,
              placements: Sequence[str] = ("row-major",)) -> list[DeviceMesh]:  # fmt: skip
    """The TP meshes of *devices* GPUs, the one enumerator of the step and job planners, the
    search and job scenarios: the *listed* meshes as given, then every factorization
    DeviceMesh(d1, d2), (t, 1) down to (1, t), of each group size t of *sizes* that divides the
    devices (None: each t of 1 to *max_tp*, default all, that does); Megatron-LM's 1D TP is
    (t, 1). *split_hidden*, a hidden size, keeps only the meshes whose d1 and d2 both divide it
    (the step planner and a job scenario; the job planner and the search keep the others to
    prune and count them, :func:`prune_reason`). Each (d1, d2) once, first place first, at
    each of *placements* in turn."""
    if sizes is None:
        sizes = range(1, min(devices if max_tp is None else max_tp, devices) + 1)
    meshes = [*listed, *(m for size in sizes if devices % size == 0 for m in factorizations(size))]
    if split_hidden is not None:
        meshes = [m for m in meshes if not (split_hidden % m.d1 or split_hidden % m.d2)]
    unique = dict.fromkeys((m.d1, m.d2) for m in meshes)
    return [DeviceMesh(d1, d2, placement) for d1, d2 in unique for placement in placements]


#: The data-parallel degrees of a TP mesh x a pipeline depth (:func:`layout_grid`).
DpsOf = Callable[[DeviceMesh, int], Sequence[int]]


def auto_dps(devices: int, dps: Sequence[int] | None = None) -> DpsOf:
    """The data-parallel degree that fills *devices* GPUs with a TP mesh x pp stages, if it is
    one of *dps* (None: any); none where the stages do not divide the devices (the search and
    the job planner skip such a mesh x depth, where a job scenario refuses it)."""

    def dps_of(mesh: DeviceMesh, pp: int) -> Sequence[int]:
        stages = mesh.size * pp
        dp = devices // stages
        return [dp] if devices % stages == 0 and (dps is None or dp in dps) else []

    return dps_of


class Layout(NamedTuple):
    """One whole-job layout of :func:`layout_grid`: TP mesh x pp x dp, the micro-batch and
    global batch, and a value of each other axis (axis name -> value)."""

    mesh: DeviceMesh
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    fields: dict[str, Any]


def layout_grid(meshes: Sequence[DeviceMesh], depths: Sequence[int], dps_of: DpsOf,
                micro_batches: Sequence[int], global_batches: Sequence[int],
                axes: Mapping[str, Sequence[Any]]) -> Iterator[Layout]:  # fmt: skip
    """The whole-job layouts, the one walk of the job planner, the search and job scenarios,
    outermost first: each TP mesh of *meshes* x each depth of *depths* x each
    data-parallel degree *dps_of* gives them (:func:`auto_dps`, or a job scenario's listed
    ones, checked) x micro-batch x global batch x the product of *axes*, in their order.
    Virtual stages above 1 go only with the interleaved schedule (others are not layouts)."""
    for mesh, pp in product(meshes, depths):
        for dp in dps_of(mesh, pp):
            for mb, gb, *values in product(micro_batches, global_batches, *axes.values()):
                fields = dict(zip(axes, values, strict=True))
                if fields.get("virtual_stages", 1) > 1 and fields.get("schedule") != INTERLEAVED:
                    continue
                yield Layout(mesh, pp, dp, mb, gb, fields)


def job_layouts(model: ModelConfig, devices: int, meshes: Sequence[DeviceMesh], depths: Sequence[int],
                micro_batches: Sequence[int], global_batches: Sequence[int],
                axes: Mapping[str, Sequence[Any]] | None = None, *,
                dps: Sequence[int] | None = None, cps: Sequence[int] = (1,)) -> Iterator[JobConfig]:  # fmt: skip
    """Every layout of *model* on *devices* GPUs as a JobConfig (:func:`layout_grid`), for
    each context-parallel degree of *cps* in turn (one that does not divide the devices makes
    none): the depths whose TP x CP x PP divides the devices (the rest is DP, one of *dps* if
    given); *axes* are JobConfig fields -> values, ``order`` and ``ep`` the layout's (an
    ``ep`` that does not divide the layout's dp, or above 1 beside a cp above 1, makes no
    layout). Sequence parallelism applies to the 1D meshes only (a 2D mesh runs without), so
    a layout the axes make twice comes once."""
    seen: set[JobConfig] = set()
    grids = ((cp, layout_grid(meshes, depths, auto_dps(devices // cp, dps), micro_batches, global_batches, axes or {}))
             for cp in cps if devices % cp == 0)  # fmt: skip
    for cp, layout in ((cp, layout) for cp, grid in grids for layout in grid):
        fields = dict(layout.fields)
        order = [fields.pop("order")] if "order" in fields else []
        ep = fields.pop("ep", 1)
        if layout.dp % ep or (ep > 1 and cp > 1):
            continue  # expert parallelism is carved out of the replicas, not beside CP: not a layout
        parallel = ParallelLayout(layout.mesh, layout.pp, layout.dp, *order, ep=ep, cp=cp)
        if fields.get("sequence_parallel"):
            fields["sequence_parallel"] = runs_sequence_parallel(layout.mesh, model.seq)
        config = JobConfig(model, parallel, layout.micro_batch, layout.global_batch, **fields)
        if config not in seen:
            seen.add(config)
            yield config


def candidates(configs: Iterable[JobConfig], capacity_bytes: float,
               profile: HardwareProfile | None = None) -> Iterator[JobConfig | str]:
    """Each of *configs* (``partition: auto`` resolved on *profile*), or the reason it is
    pruned (:func:`prune_reason`): what the search and the job planner simulate and count. A
    job scenario prunes nothing: it refuses a layout that cannot run and runs one that
    :func:`prune_reason` would skip (a TP mesh that splits the heads unevenly, a rank past the
    memory)."""
    for config in configs:
        yield prune_reason(config, capacity_bytes, profile) or _resolved(config, profile)


def _resolved(config: JobConfig, profile: HardwareProfile | None) -> JobConfig:
    """*config* with ``partition: auto`` resolved on *profile* (none given: as it is)."""
    return config if profile is None else resolve_partition(config, profile)


#: The one schedule that takes virtual stages above 1.
INTERLEAVED = "interleaved-1f1b"


def prune_reason(config: JobConfig, capacity_bytes: float, profile: HardwareProfile | None = None) -> str | None:
    """Why *config* is not worth simulating, or None: ``divisibility`` (the mesh splits the
    hidden size, the heads or a grouped-query model's KV heads unevenly
    (:func:`~atpsim.parallel.atp.kv_heads_split`), or :func:`check_job`'s sizes, or the chunks split the
    micro-batch unevenly, or the interleaved schedule's micro-batches do not fill its stages)
    or ``memory`` (the busiest rank needs more than *capacity_bytes*; ``partition: auto``
    split as on *profile*: :func:`_resolved`)."""
    mesh, model = config.layout.tp, config.model
    if not isinstance(mesh, DeviceMesh) or model.hidden % mesh.d1 or model.hidden % mesh.d2 or model.heads % mesh.size:
        return "divisibility"
    if not kv_heads_split(model, mesh.size) or model.ffn_size % mesh.d1:
        return "divisibility"
    if config.chunks < 1 or config.micro_batch % config.chunks:
        return "divisibility"
    try:
        check_job(config)
        if config.schedule == INTERLEAVED and config.n_microbatches % config.layout.pp:
            return "divisibility"
        memory = job_memory(_resolved(config, profile)).total_bytes
    except SimulationError:
        return "divisibility"
    return "memory" if memory > capacity_bytes else None
