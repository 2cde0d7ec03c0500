"""The task graph's clock for the joint run (:mod:`~atpsim.engine.joint.engine`): a task
starts when its last dependency ends, a delay or compute task ends its seconds later, a comm
task waits for the engine to start it with its cohort and is told its end (which may move
while others join its episode)."""

from __future__ import annotations

import heapq
import math

import numpy as np

from atpsim.engine.joint.graph import COMM, DELAY, TaskGraph
from atpsim.engine.joint.live import Ends
from atpsim.engine.solvers.flow_loop import reverse_csr


class TaskClock:
    """The graph's tasks as timed events: the heap of ends to come (each
    with the version of its task's end it was pushed for: a moved end pushes again), the comm
    tasks waiting to start at the clock *now* (s), and each task's start and finish (s)."""

    def __init__(self, graph: TaskGraph):
        n = len(graph)
        self.waiting = np.diff(graph.dep_ptr).tolist()
        self.dep_ptr, self.dep_idx = (a.tolist() for a in reverse_csr(graph.dep_ptr, graph.dep_idx, n))
        self.kind, self.seconds = graph.kind.tolist(), graph.seconds.tolist()
        self.fraction = graph.fraction.tolist()
        self.start, self.finish = [math.nan] * n, [math.nan] * n
        self.version = [0] * n
        self.heap: list[tuple[float, int, int, int]] = []
        self.pending: list[int] = []
        self.seq, self.now = 0, 0.0
        self.ended = 0
        for task in range(n):
            if self.waiting[task] == 0:
                self.ready(task, 0.0)

    def progress(self) -> tuple[int, int]:
        """(tasks ended, tasks in all)."""
        return self.ended, len(self.finish)

    def push(self, t: float, task: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, task, self.version[task]))

    def ready(self, task: int, t: float) -> None:
        """*task*'s dependencies all ended at *t*: it starts (a comm task waits for its cohort)."""
        self.start[task] = t
        kind = self.kind[task]
        if kind == DELAY:
            self.push(t + self.seconds[task], task)
        elif kind == COMM:
            self.pending.append(task)
        else:
            self.push(t + self.fraction[task] * ((t + self.seconds[task]) - t), task)

    def take_pending(self) -> list[int]:
        pending, self.pending = self.pending, []
        return pending

    def handle(self, ends: Ends) -> None:
        """New or moved ends of comm tasks not finished yet (None: the end is not known)."""
        for task, t in ends:
            if math.isnan(self.finish[task]):
                self.version[task] += 1
                if t is not None:
                    self.push(max(t, self.now), task)

    def end_next(self) -> None:
        """The next end on the heap (a stale one skipped): the clock moves there and the
        dependents that wait for nothing more start."""
        t, _, task, v = heapq.heappop(self.heap)
        if v != self.version[task] or not math.isnan(self.finish[task]):
            return
        self.now = self.finish[task] = t
        self.ended += 1
        waiting = self.waiting
        for child in self.dep_idx[self.dep_ptr[task]:self.dep_ptr[task + 1]]:
            waiting[child] -= 1
            if waiting[child] == 0:
                self.ready(child, t)
