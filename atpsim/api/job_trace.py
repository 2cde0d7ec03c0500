"""`atpsim.simulate_job`: one training iteration of a DP x PP x TP job
(:func:`atpsim.training.job.simulate_job`), and, asked for, its Chrome/Perfetto trace: each
stage of each replica with its micro-batches' passes, the TP collectives, the sends, the
gradient streams, and the busiest links' calls in flight as counter tracks
(:func:`atpsim.report.trace.write_graph_trace`).

The same trace of a job scenario's point (a run's trace selectors, :data:`JOB_TIMELINE`) and
of a planned layout (:func:`trace_job`, the best of ``atpsim plan`` for a global batch).
Only the joint network has a timeline: it runs every call of the iteration as tasks of one
graph; the isolated one times each call alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from atpsim.api.job_point import job_config
from atpsim.api.point_trace import Timeline
from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.graph import GraphTimeline
from atpsim.engine.methods import ALONE, find
from atpsim.errors import SimulationError
from atpsim.report.trace import write_graph_trace
from atpsim.results.schema import JOB_POINT_COLUMNS
from atpsim.scenario.job_point import JobPoint
from atpsim.topology.graph import Topology
from atpsim.training import job
from atpsim.training.config import JobConfig
from atpsim.training.job import load_machine, run_job
from atpsim.training.links import link_counters
from atpsim.training.perturb import job_perturbation

#: The network whose iteration has a timeline (every call a task of one graph).
TRACED_NETWORK = "joint"


def simulate_job(topology: str | Mapping[str, Any], model: str | ModelConfig, *,
                 trace: str | None = None, **options: Any) -> job.JobPrediction:
    """Simulate one training iteration of *model* on *topology*: the layout, the network and
    the perturbation are :func:`atpsim.training.job.simulate_job`'s *options*; *trace*: also
    write the iteration as a Chrome/Perfetto trace to this path."""
    writer = None if trace is None else partial(write_job_trace, path=trace)
    return job.simulate_job(topology, model, trace=writer, **options)


def write_job_trace(topology: Topology, run: GraphTimeline, path: str | Path) -> Path:
    """The iteration's tasks and its busiest links' counters as a Chrome/Perfetto trace."""
    if run.graph.labels is None:
        raise SimulationError("the iteration's graph has no labels to trace", key="trace")
    return write_graph_trace(path, run.graph.labels, run.start_s, run.finish_s, link_counters(topology, run))


def trace_job(topology: str | Mapping[str, Any], config: JobConfig, path: str | Path, *,
              hardware: str | None = None) -> Path:
    """Simulate *config* on *topology* (the profile *hardware* names, else the topology's) on
    the joint network and write its timeline to *path*; the folder must exist."""
    target = Path(path)
    check_trace_folder(target)
    topo, profile = load_machine(topology, config.layout.size, hardware)
    run_job(topo, profile, config, network=TRACED_NETWORK, trace=partial(write_job_trace, path=target))
    return target


def check_trace_folder(path: str | Path) -> None:
    """Refuse a trace *path* whose folder does not exist (before anything is simulated)."""
    if not Path(path).resolve().parent.is_dir():
        raise SimulationError(f"no folder to write the trace into: {Path(path).parent}", param="trace")


def write_job_point_trace(point: JobPoint, folder: Path) -> Path:
    """Simulate the job *point* once more (the run of its row, on the joint network) and
    write its timeline to ``folder/<point_key>.json``."""
    config = job_config(point)
    spec = point.topology if isinstance(point.topology, str) else dict(point.topology)
    topology, profile = load_machine(spec, point.n_devices, point.hardware)
    perturb = job_perturbation(topology, config, dict(point.perturb)) if point.perturb else None
    path = folder / f"{point.key()}.json"
    run_job(topology, profile, config, network=point.network, perturb=perturb,
            trace=partial(write_job_trace, path=path))  # fmt: skip
    return path


def _has_timeline(columns: Mapping[str, Any]) -> bool:
    """A job point runs as one graph: a network that is not each call alone, no neighbour."""
    method = find("network", columns["network"])
    return method is not None and method.kind != ALONE and columns["neighbour"] == "none"


#: A job point's timeline: its iteration's graph on the joint network.
JOB_TIMELINE = Timeline(JOB_POINT_COLUMNS, "iteration_time_s", _has_timeline,
                        "points without a timeline (one needs network joint and no neighbour)",
                        write_job_point_trace)  # fmt: skip
