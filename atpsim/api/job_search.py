"""`atpsim.plan_job`: search TP mesh x PP x DP x micro-batch x chunks for a model on a machine.

Every layout of *devices* GPUs whose TP mesh fits inside a node-sized group (``max_tp``), whose
pipeline depth divides the layers and whose data-parallel degree and micro-batch divide the
global batch is a candidate. Candidates are pruned before any simulation: by divisibility (the
heads and hidden size over the mesh, the layers over the stages) and by memory (the busiest
rank's :func:`~atpsim.parallel.job_memory.job_memory_per_rank` against the device's capacity).
The rest are simulated (:func:`atpsim.api.job.run_job`) and ranked by iteration time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from atpsim.api.job import JobConfig, JobPrediction, _machine, check_job, job_memory, run_job
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh, factorizations


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
    **options: Any,
) -> JobPlan:
    """Simulate every layout of *devices* GPUs that divides the model and fits in memory and
    rank them by iteration time. TP meshes are every DeviceMesh(d1, d2) of at most *max_tp*
    GPUs (Megatron-LM's 1D TP is (t, 1)); *pipelines* are the pipeline depths to try (default:
    every divisor of the layers); *chunk_counts* the ATP chunk counts of each TP pass (a count
    that does not divide the micro-batch is pruned by divisibility); *options* are
    :class:`~atpsim.api.job.JobConfig` fields shared by all candidates (schedule, zero,
    recompute, ...)."""
    config_model = model if isinstance(model, ModelConfig) else model_preset(model)
    topo, profile = _machine(topology, devices, hardware)
    depths = pipelines or [p for p in range(1, config_model.layers + 1) if config_model.layers % p == 0]
    pruned = {"divisibility": 0, "memory": 0}
    results = []
    for config in _layouts(config_model, devices, global_batch, max_tp, depths, micro_batches,
                           chunk_counts, options):
        reason = _prune(config, profile.memory_capacity_bytes)
        if reason:
            pruned[reason] += 1
            continue
        results.append(JobCandidate(config, run_job(topo, profile, config)))
    results.sort(key=lambda c: (c.prediction.iteration_time_s, c.label))
    return JobPlan(tuple(results), pruned)


def _layouts(model: ModelConfig, devices: int, global_batch: int, max_tp: int,
             depths: Sequence[int], micro_batches: Sequence[int], chunk_counts: Sequence[int],
             options: Mapping[str, Any]) -> Iterator[JobConfig]:
    for tp_size in [t for t in range(1, min(max_tp, devices) + 1) if devices % t == 0]:
        for mesh in factorizations(tp_size):
            for pp in [p for p in depths if devices % (tp_size * p) == 0]:
                dp = devices // (tp_size * pp)
                for mb in micro_batches:
                    for chunks in chunk_counts:
                        yield JobConfig(model, ParallelLayout(mesh, pp, dp), mb, global_batch,
                                        chunks=chunks, **options)


def _prune(config: JobConfig, capacity_bytes: float) -> str | None:
    """Why *config* is not worth simulating ('divisibility', 'memory'), or None."""
    mesh, model = config.layout.tp, config.model
    if not isinstance(mesh, DeviceMesh) or model.hidden % mesh.d1 or model.hidden % mesh.d2 or model.heads % mesh.size:
        return "divisibility"
    if config.chunks < 1 or config.micro_batch % config.chunks:
        return "divisibility"
    try:
        check_job(config)
        memory = job_memory(config).total_bytes
    except SimulationError:
        return "divisibility"
    return "memory" if memory > capacity_bytes else None
