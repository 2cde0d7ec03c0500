"""What a scenario run does for each workload (:mod:`atpsim.scenario.workload`), one entry
each in :data:`WORKLOADS`: how a point is simulated, what its timeline is (trace selectors,
:mod:`atpsim.api.point_trace`, checked against the sweep's points) and what is said of the
points before they run (parameter draws apply to both: :mod:`atpsim.api.uncertainty`). :func:`atpsim.run_scenario` looks the entry up by the scenario's workload
rather than asking which one it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from atpsim.api.job_point import simulate_job_point
from atpsim.api.job_trace import JOB_TIMELINE
from atpsim.api.point import simulate_point
from atpsim.api.point_trace import STEP_TIMELINE, Timeline, TraceSelection, select_trace_points
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.workload import JOB, STEP, Workload
from atpsim.sweep.runner import Simulate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkloadRun:
    """One workload's part in a run: *simulate* one point to its result columns, its
    *timeline* (what a trace selector picks and writes), *warn* about the expanded points
    before they run."""

    simulate: Simulate
    timeline: Timeline
    warn: Callable[[Collection[Any]], None]

    def select_traces(self, points: Sequence[Any], selectors: Sequence[str]) -> list[TraceSelection]:
        """The *selectors* checked against the sweep's *points* before anything is simulated
        (:func:`atpsim.api.point_trace.select_trace_points`)."""
        return select_trace_points(points, selectors, self.timeline)


def warn_uneven_heads(points: Collection[Any]) -> None:
    """Flag the step points whose attention heads do not divide over the mesh: the simulator
    splits the attention core's work evenly anyway, which no real run can do."""
    count, first = 0, None
    for p in points:
        if isinstance(p.shape, DeviceMesh) and p.model.heads % p.shape.size:
            count, first = count + 1, first or p
    if first is not None:
        log.warning(
            "%d points put heads that do not divide over the mesh (e.g. %d heads on %s): the "
            "attention core is split evenly anyway, an approximation; the report says which",
            count, first.model.heads, first.shape,
        )  # fmt: skip


def _say_nothing(points: Collection[Any]) -> None:
    """A job scenario's points need no word before they run (its sizes were checked)."""


#: Each workload's part in a run.
WORKLOADS: dict[Workload, WorkloadRun] = {
    STEP: WorkloadRun(simulate_point, STEP_TIMELINE, warn=warn_uneven_heads),
    JOB: WorkloadRun(simulate_job_point, JOB_TIMELINE, warn=_say_nothing),
}
