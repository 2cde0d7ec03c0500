"""Two (or more) training jobs on one fabric: each on its own GPUs of one topology, their
iterations simulated together on one network, each job's slowdown against running alone.

Jobs are placed one after another on the topology's GPU ranks (the first on ranks ``0 ..
n1 - 1``, the next from ``n1``; a job's layout is its own, shifted: :class:`OffsetLayout`).
Each job's iteration is its task graph (:func:`atpsim.training.job.joint_job`); the graphs run as
one (:func:`~atpsim.engine.joint.graph.merge_graphs`) on the joint engine, so a job's calls
share the links the other's cross at the same time (spine uplinks of a fat tree, NICs where
the jobs share nodes). Each job is also run alone on the same machine and GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from atpsim.compute.hardware import HardwareProfile
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphTimeline, merge_graphs
from atpsim.engine.joint.network import JointNetwork
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.graph import Topology
from atpsim.training.config import JobConfig, check_job, job_config
from atpsim.training.job import JobPrediction, joint_job, joint_prediction, load_machine

#: The keys of one job in :func:`simulate_jobs` besides the :class:`JobConfig` options.
LAYOUT_KEYS = ("model", "tp", "pp", "dp", "micro_batch", "global_batch", "order")


@dataclass(frozen=True)
class OffsetLayout(ParallelLayout):
    """A layout whose GPUs start at rank *offset* of the topology."""

    offset: int = 0

    @property
    def first_rank(self) -> int:
        return self.offset

    def stage_of(self, rank: int) -> int:
        return super().stage_of(rank - self.offset)


@dataclass(frozen=True)
class SharedFabric:
    """Each job's iteration run together (*together*) and alone (*alone*), in placement
    order, and each one's *slowdown* (together / alone iteration time)."""

    together: tuple[JobPrediction, ...]
    alone: tuple[JobPrediction, ...]

    @property
    def slowdown(self) -> tuple[float, ...]:
        return tuple(t.iteration_time_s / a.iteration_time_s
                     for t, a in zip(self.together, self.alone, strict=True))  # fmt: skip


def simulate_jobs(topology: str | Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *,
                  hardware: str | None = None) -> SharedFabric:
    """Place *jobs* (each a mapping of :data:`LAYOUT_KEYS` and :class:`JobConfig` options:
    ``{"model": "gpt3-1.3b", "tp": (8, 1), "pp": 2, "dp": 4, "global_batch": 64}``) one after
    another on *topology* and simulate them together and alone (module docstring)."""
    configs, offset = [], 0
    for index, job in enumerate(jobs):
        configs.append(job_config_at(job, offset, f"jobs[{index}]"))
        offset += configs[-1].layout.size
    topo, profile = load_machine(topology, offset, hardware)
    return run_jobs(topo, profile, configs)


def job_config_at(job: Mapping[str, Any], offset: int, key: str) -> JobConfig:
    """The job *job* (a mapping, as :func:`simulate_jobs` takes) on the GPUs from *offset*;
    errors name *key*."""
    options = {k: v for k, v in job.items() if k not in LAYOUT_KEYS}
    if "model" not in job:
        raise SimulationError("a job needs its model", key=f"{key}.model")
    model = job["model"]
    tp = job.get("tp", (1, 1))
    mesh = tp if isinstance(tp, DeviceMesh) else DeviceMesh(*tp)
    pp, dp, micro = int(job.get("pp", 1)), int(job.get("dp", 1)), int(job.get("micro_batch", 1))
    layout = OffsetLayout(mesh, pp, dp, tuple(job.get("order", ("tp", "pp", "dp"))), offset)  # type: ignore[arg-type]
    config = job_config(model, layout, micro, int(job.get("global_batch") or micro * dp * pp), **options)
    check_job(config)
    return config


def run_jobs(topology: Topology, profile: HardwareProfile, configs: Sequence[JobConfig]) -> SharedFabric:
    """:func:`simulate_jobs` on a built topology."""
    built = [joint_job(topology, profile, c) for c in configs]
    graph, firsts = merge_graphs([j.graph for j in built])
    run = run_graph(graph, JointNetwork(topology))
    together = []
    for job, config, first in zip(built, configs, firsts, strict=True):
        part = GraphTimeline(job.graph, run.start_s[first:first + len(job.graph)],
                             run.finish_s[first:first + len(job.graph)], None, None, run.stats)  # fmt: skip
        together.append(replace(joint_prediction(profile, config, job, part), stats=run.stats))
    alone = [joint_prediction(profile, c, j, run_graph(j.graph, j.machine))
             for c, j in zip(configs, built, strict=True)]  # fmt: skip
    return SharedFabric(tuple(together), tuple(alone))
