"""The task graph's clock for the joint run (:mod:`~atpsim.engine.joint.engine`): a task
starts when its last dependency ends, a delay or compute task ends its seconds later, a comm
task waits for the engine to start it with its cohort and is told its end (which may move
while others join its episode)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.joint.clock_kernel import ENDED, GROW, HEAP_N, N_EP, PEND_N, empty_heap
from atpsim.engine.joint.graph import COMM, DELAY, TaskGraph
from atpsim.engine.joint.live import Ends
from atpsim.engine.joint.lone_kinds import LoneKinds
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


class CompiledClock:
    """:class:`TaskClock` as arrays stepped by compiled functions
    (:mod:`~atpsim.engine.joint.clock_kernel`), with the engine's lone calls of known kinds
    (:class:`~atpsim.engine.joint.lone_kinds.LoneKinds`) run there too: the same interface where
    the engine's loop uses it, the same numbers."""

    def __init__(self, graph: TaskGraph, functions: dict[str, Callable[..., Any]]):
        n = len(graph)
        self.fn = functions
        self.kind, self.seconds, self.fraction = graph.kind.astype(np.int64), graph.seconds, graph.fraction
        self.waiting = np.diff(graph.dep_ptr).astype(np.int64)
        self.rptr, self.ridx = reverse_csr(graph.dep_ptr, graph.dep_idx, n)
        self.max_out = int(np.diff(self.rptr).max(initial=0))
        self.start, self.finish = np.full(n, np.nan), np.full(n, np.nan)
        self.version = np.zeros(n, dtype=np.int64)
        self.pending_ids = np.empty(n, dtype=np.int64)
        self.heap = empty_heap(max(1024, n // 4 + self.max_out + 1))
        self.iv, self.fv = np.zeros(6, dtype=np.int64), np.zeros(1)
        self.fn["start_roots"](self.waiting, self.kind, self.seconds, self.fraction, self.start, self.version,
                               self.pending_ids, *self.heap, self.iv)  # fmt: skip

    @property
    def now(self) -> float:
        return float(self.fv[0])

    @now.setter
    def now(self, t: float) -> None:
        self.fv[0] = t

    @property
    def pending(self) -> bool:
        return bool(self.iv[PEND_N])

    @property
    def next_end(self) -> float:
        """The first end queued (inf: none)."""
        return float(self.heap[0][0]) if self.iv[HEAP_N] else math.inf

    def progress(self) -> tuple[int, int]:
        """(tasks ended, tasks in all)."""
        return int(self.iv[ENDED]), len(self.finish)

    def take_pending(self) -> list[int]:
        pending = self.pending_ids[:int(self.iv[PEND_N])].tolist()
        self.iv[PEND_N] = 0
        return pending

    def handle(self, ends: Ends) -> None:
        """New or moved ends of comm tasks not finished yet (None: the end is not known)."""
        if not ends:
            return
        self._room(len(ends))
        tasks = np.array([task for task, _ in ends], dtype=np.int64)
        times = np.array([math.nan if t is None else t for _, t in ends])
        self.fn["handle"](tasks, times, ~np.isnan(times), self.finish, self.version, *self.heap, self.iv, self.fv)

    def run(self, t_live: float, table: LoneKinds) -> int:
        """Run until the engine is needed (:func:`~atpsim.engine.joint.clock_kernel.run`):
        DONE, SUBMIT or ADVANCE; lone calls of *table*'s known kinds run here."""
        while True:
            status = self.fn["run"](t_live, self.kind, self.seconds, self.fraction, self.rptr, self.ridx, self.waiting,
                                    self.start, self.finish, self.version, self.pending_ids, *self.heap, self.iv,
                                    self.fv, *table.arrays(), self.max_out)  # fmt: skip
            if status != GROW:
                return int(status)
            self._room(max(self.max_out, int(self.iv[PEND_N])))
            table.room(int(self.iv[N_EP]) + int(self.iv[PEND_N]) + 1)

    def _room(self, more: int) -> None:
        """Room on the heap for *more* entries."""
        need = int(self.iv[HEAP_N]) + more + 1
        if need > len(self.heap[0]):
            size = max(need, 2 * len(self.heap[0]))
            t, seq, task, version = (np.concatenate([a, np.empty(size - len(a), dtype=a.dtype)]) for a in self.heap)
            self.heap = t, seq, task, version
