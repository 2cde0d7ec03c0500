"""`plan_job`: search TP mesh x PP x DP x micro-batch x chunks for a model on a machine.

Every layout of *devices* GPUs whose TP mesh fits inside a node-sized group (``max_tp``), whose
pipeline depth divides the layers and whose data-parallel degree and micro-batch divide the
global batch is a candidate. Candidates are pruned before any simulation: by divisibility (the
heads and hidden size over the mesh, the layers over the stages) and by memory (the busiest
rank's :func:`~atpsim.parallel.job_memory.job_memory_per_rank` against the device's capacity).
The rest are simulated (:func:`atpsim.training.job.run_job`) and ranked by iteration time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.training.config import JobConfig, check_job
from atpsim.training.job import JobPrediction, job_memory, load_machine, run_job


@dataclass(frozen=True)
class JobCandidate:
    """One simulated layout and its prediction."""

    config: JobConfig
    prediction: JobPrediction

    @property
    def label(self) -> str:
        layout = self.config.layout
        tp = f"{layout.tp.d1}x{layout.tp.d2}" if isinstance(layout.tp, DeviceMesh) else str(layout.tp)
        chunks = f", chunks {self.config.chunks}" if self.config.chunks > 1 else ""
        return f"tp {tp}, pp {layout.pp}, dp {layout.dp}, mb {self.config.micro_batch}{chunks}"


@dataclass(frozen=True)
class JobPlan:
    """Candidates fastest first, and how many layouts each pruning rule removed."""

    candidates: tuple[JobCandidate, ...]
    pruned: Mapping[str, int]

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
    **options: Any,
) -> JobPlan:
    """Simulate every layout of *devices* GPUs that divides the model and fits in memory and
    rank them by iteration time. TP meshes are every DeviceMesh(d1, d2) of at most *max_tp*
    GPUs (Megatron-LM's 1D TP is (t, 1)); *pipelines* are the pipeline depths to try (default:
    every divisor of the layers); *chunk_counts* the ATP chunk counts of each TP pass (a count
    that does not divide the micro-batch is pruned by divisibility); *options* are
    :class:`~atpsim.training.config.JobConfig` fields shared by all candidates (schedule, zero,
    recompute, ...); *network* how each candidate's calls share the links
    (:data:`atpsim.training.job.NETWORKS`: ``joint``, one network for every call in flight, or
    ``isolated``, each call alone; much faster where TP groups are smaller than a node).
    ``atpsim search`` searches the same layouts on the sweep's executor
    (:mod:`atpsim.api.search`)."""
    config_model = model if isinstance(model, ModelConfig) else model_preset(model)
    topo, profile = load_machine(topology, devices, hardware)
    depths = pipelines or layer_divisors(config_model)
    pruned = {"divisibility": 0, "memory": 0}
    results = []
    axes = {"chunks": tuple(chunk_counts), **{name: (value,) for name, value in options.items()}}
    meshes = tp_meshes(devices, max_tp)
    for config in job_layouts(config_model, devices, meshes, depths, micro_batches, (global_batch,), axes):
        reason = prune_reason(config, profile.memory_capacity_bytes)
        if reason:
            pruned[reason] += 1
            continue
        results.append(JobCandidate(config, run_job(topo, profile, config, network=network)))
    results.sort(key=lambda c: (c.prediction.iteration_time_s, c.label))
    return JobPlan(tuple(results), pruned)


def layer_divisors(model: ModelConfig) -> list[int]:
    """Every pipeline depth that splits *model*'s layers evenly."""
    return [p for p in range(1, model.layers + 1) if model.layers % p == 0]


def tp_meshes(devices: int, max_tp: int) -> list[DeviceMesh]:
    """Every DeviceMesh(d1, d2) of at most *max_tp* GPUs whose size divides *devices*."""
    sizes = [t for t in range(1, min(max_tp, devices) + 1) if devices % t == 0]
    return [mesh for size in sizes for mesh in factorizations(size)]


def job_layouts(model: ModelConfig, devices: int, meshes: Sequence[DeviceMesh], depths: Sequence[int],
                micro_batches: Sequence[int], global_batches: Sequence[int],
                axes: Mapping[str, Sequence[Any]] | None = None) -> Iterator[JobConfig]:
    """Every layout of *model* on *devices* GPUs: each TP mesh of *meshes* x each depth of
    *depths* whose TP x PP divides the devices (the rest is DP) x micro-batch x global batch x
    the product of *axes* (JobConfig fields -> values). Virtual stages above 1 go only with
    the interleaved schedule (others are not layouts)."""
    axes = axes or {}
    for mesh in meshes:
        for pp in [p for p in depths if devices % (mesh.size * p) == 0]:
            dp = devices // (mesh.size * pp)
            for mb, gb, *values in product(micro_batches, global_batches, *axes.values()):
                fields = dict(zip(axes, values, strict=True))
                order = [fields.pop("order")] if "order" in fields else []
                if fields.get("virtual_stages", 1) > 1 and fields.get("schedule") != INTERLEAVED:
                    continue
                yield JobConfig(model, ParallelLayout(mesh, pp, dp, *order), mb, gb, **fields)


#: The one schedule that takes virtual stages above 1.
INTERLEAVED = "interleaved-1f1b"


def prune_reason(config: JobConfig, capacity_bytes: float) -> str | None:
    """Why *config* is not worth simulating, or None: ``divisibility`` (the mesh splits the
    hidden size or the heads unevenly, or :func:`check_job`'s sizes, or the chunks split the
    micro-batch unevenly, or the interleaved schedule's micro-batches do not fill its stages)
    or ``memory`` (the busiest rank needs more than *capacity_bytes*)."""
    mesh, model = config.layout.tp, config.model
    if not isinstance(mesh, DeviceMesh) or model.hidden % mesh.d1 or model.hidden % mesh.d2 or model.heads % mesh.size:
        return "divisibility"
    if config.chunks < 1 or config.micro_batch % config.chunks:
        return "divisibility"
    try:
        check_job(config)
        if config.schedule == INTERLEAVED and config.n_microbatches % config.layout.pp:
            return "divisibility"
        memory = job_memory(config).total_bytes
    except SimulationError:
        return "divisibility"
    return "memory" if memory > capacity_bytes else None
