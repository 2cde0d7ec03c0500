"""Run a :class:`StepProgram` on every rank's compute and communication streams.

Each rank has two in-order streams, like CUDA streams (the paper sets
``CUDA_DEVICE_MAX_CONNECTIONS=1`` so kernels run in issue order, Section 4.2). A task starts
when its dependencies have finished and every earlier task of its stream has finished:

    start[t, r] = max(max_{d in deps(t)} finish[d, r], stream_free[stream(t), r])

A compute task lasts the same on every rank (SPMD, evenly sharded). A communication task is a
collective on every group of one mesh dimension: a group starts when its last member arrives
and each group lasts what the network engine says for that group with all groups of the
dimension running at once. Ranks are handled as numpy vectors, so a step of thousands of
ranks is one vector update per task. Overlap is not assumed: it is whatever the streams allow.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from atpsim.program import CommOp, ComputeOp, StepProgram


@dataclass(frozen=True)
class CommTiming:
    """How one collective call plays out: *groups* is an int array [n_groups, group_size] of
    rank indices (mesh groups are all the same size) and *group_time_s* each group's duration."""

    groups: np.ndarray
    group_time_s: np.ndarray

    @classmethod
    def of(cls, groups: list[list[int]], group_time_s: list[float] | np.ndarray) -> CommTiming:
        return cls(np.asarray(groups, dtype=np.int64), np.asarray(group_time_s, dtype=float))


ComputeTimer = Callable[[ComputeOp], float]
CommTimer = Callable[[CommOp], CommTiming]


@dataclass(frozen=True)
class StepTimeline:
    """Start and finish of every task on every rank (seconds from the step's start)."""

    program: StepProgram
    start_s: np.ndarray  # [n_tasks, n_ranks]
    finish_s: np.ndarray  # [n_tasks, n_ranks]

    @property
    def n_ranks(self) -> int:
        return int(self.start_s.shape[1])

    @property
    def step_time_s(self) -> float:
        """When the last task on the last rank finishes."""
        return float(self.finish_s.max()) if self.finish_s.size else 0.0

    def critical_rank(self) -> int:
        """The rank that finishes last (the lowest such rank, for determinism)."""
        return int(np.argmax(self.finish_s.max(axis=0))) if self.finish_s.size else 0

    def intervals(self, rank: int, stream: str) -> list[tuple[float, float]]:
        """Busy intervals of *stream* ('compute' or 'comm') on *rank*, in issue order."""
        return [
            (float(self.start_s[t.id, rank]), float(self.finish_s[t.id, rank]))
            for t in self.program.tasks
            if t.stream == stream
        ]

    def busy_s(self, rank: int, stream: str) -> float:
        return sum(end - start for start, end in self.intervals(rank, stream))

    def exposed_comm_s(self, rank: int) -> float:
        """Communication time on *rank* not hidden under its compute: the measure of the comm
        stream's busy intervals minus their intersection with the compute stream's."""
        compute = self.intervals(rank, "compute")
        starts, ends = [c0 for c0, _ in compute], [c1 for _, c1 in compute]
        # a stream's intervals come in time order, one after another: then only those from
        # the first ending after a comm interval's start to the last starting before its end
        # overlap it (the rest add exactly 0.0), found by bisection instead of a full scan
        ordered = all(e <= s for e, s in zip(ends, starts[1:], strict=False))
        exposed = 0.0
        for start, end in self.intervals(rank, "comm"):
            near = compute[bisect_right(ends, start):bisect_left(starts, end)] if ordered else compute
            covered = sum(max(0.0, min(end, c1) - max(start, c0)) for c0, c1 in near)
            exposed += (end - start) - covered
        return exposed


def simulate_step(
    program: StepProgram, n_ranks: int, compute_time: ComputeTimer, comm_timing: CommTimer,
    rank_scale: np.ndarray | None = None,
) -> StepTimeline:
    """List-schedule *program* on *n_ranks* ranks; *compute_time* and *comm_timing* give the
    durations (memoize them: the same op recurs for every chunk and layer); *rank_scale*
    (optional) multiplies each rank's compute times (a straggler's > 1)."""
    n_tasks = len(program.tasks)
    start = np.zeros((n_tasks, n_ranks))
    finish = np.zeros((n_tasks, n_ranks))
    stream_free = {"compute": np.zeros(n_ranks), "comm": np.zeros(n_ranks)}
    for task in program.tasks:
        ready = stream_free[task.stream].copy()
        for dep in task.deps:
            np.maximum(ready, finish[dep], out=ready)
        if isinstance(task.op, CommOp):
            task_start, task_finish = _collective_times(ready, comm_timing(task.op))
        else:
            duration = compute_time(task.op)
            task_start = ready
            task_finish = ready + (duration if rank_scale is None else duration * rank_scale)
        start[task.id], finish[task.id] = task_start, task_finish
        stream_free[task.stream] = task_finish
    return StepTimeline(program, start, finish)


def _collective_times(ready: np.ndarray, timing: CommTiming) -> tuple[np.ndarray, np.ndarray]:
    """Each group starts when its last member is ready; members finish together."""
    start = ready.copy()
    finish = ready.copy()
    group_start = ready[timing.groups].max(axis=1)
    start[timing.groups] = group_start[:, None]
    finish[timing.groups] = (group_start + timing.group_time_s)[:, None]
    return start, finish
