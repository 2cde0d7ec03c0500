"""`atpsim.simulate_job`: one training iteration of a DP x PP x TP job
(:func:`atpsim.training.job.simulate_job`), and, asked for, its Chrome/Perfetto trace: each
stage of each replica, the sends, the gradient streams, and the busiest links' calls in
flight as counter tracks (:func:`atpsim.report.trace.write_graph_trace`)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.graph import GraphTimeline
from atpsim.errors import SimulationError
from atpsim.report.trace import write_graph_trace
from atpsim.topology.graph import Topology
from atpsim.training import job
from atpsim.training.links import link_counters


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
