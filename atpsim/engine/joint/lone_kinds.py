"""The kinds of call the compiled task clock runs alone itself, and the episodes it numbers.

A comm task's kind is its (call, groups, uniform block), the groups compared by value. Once
the engine has timed a task of a kind alone (:meth:`~atpsim.engine.joint.engine._Comm.
_alone_fast`: the cohort met nothing), every later task of that kind that starts where
nothing runs on its links ends the same time after its start, and the compiled clock
(:func:`~atpsim.engine.joint.clock_kernel.lone_calls`) runs it from this table: its shape's
links (CSR), its time alone, its task's end after its start. The episodes it runs are numbered in the engine's sequence and kept as their task and
start, from which the engine makes the episode if another call meets it.
"""

from __future__ import annotations

import numpy as np

from atpsim.engine.joint.graph import COMM, TaskGraph
from atpsim.engine.joint.records import CallShape


class LoneKinds:
    """The kinds of lone call the compiled clock runs itself and the episodes it numbered so
    (module docstring): per kind its shape's number and its task's end after its start, per
    shape its links, time alone and the shape itself; per episode the clock ran, its task
    and start; *holder* and *busy_until* are the engine's claims on the links."""

    def __init__(self, graph: TaskGraph, holder: np.ndarray, busy_until: np.ndarray):
        calls, groups = graph.call.tolist(), graph.groups
        blocks = graph.uniform.tolist() if graph.uniform is not None else [0] * len(graph)
        kinds: dict[tuple[int, tuple[int, ...], int], int] = {}
        seen: dict[tuple[int, int, int], int] = {}  # groups by identity -> their kind
        self.key_of = np.full(len(graph), -1, dtype=np.int64)
        # the groups compared by value, each tuple hashed once: by identity alone (a tuple per
        # template) the 512-H100 job's 77,145 comm tasks made 15,596 kinds, not 60, and
        # 13,531 lone calls went to the engine to be learned one by one
        for task in np.flatnonzero(graph.kind == COMM).tolist():
            by_id = (calls[task], id(groups[task]), blocks[task])
            if by_id not in seen:
                seen[by_id] = kinds.setdefault((calls[task], groups[task], blocks[task]), len(kinds))
            self.key_of[task] = seen[by_id]
        self.call_of = np.maximum(graph.call, 0).astype(np.int64)
        self.key_shape, self.key_rel = np.full(len(kinds), -1, dtype=np.int64), np.zeros(len(kinds))
        self.shapes: list[CallShape] = []
        self.sh_ptr, self.sh_links, self.sh_max = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        self.holder, self.busy_until = holder, busy_until
        self.ep_task, self.ep_start = np.full(1024, -1, dtype=np.int64), np.zeros(1024)
        self.mark = np.zeros(max(len(graph.calls), 1), dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays :func:`~atpsim.engine.joint.clock_kernel.run` takes, in its order."""
        return (self.key_of, self.call_of, self.key_shape, self.key_rel, self.sh_ptr, self.sh_links, self.sh_max,
                self.holder, self.busy_until, self.ep_task, self.ep_start, self.mark)  # fmt: skip

    def learn(self, task: int, shape: CallShape, rel: float) -> None:
        """Task *task*'s kind, timed alone: *shape*, ending *rel* s after its start."""
        key = int(self.key_of[task])
        if self.key_shape[key] >= 0:
            return
        if shape.index is None:
            shape.index = len(self.shapes)
            self.shapes.append(shape)
            self.sh_links = np.concatenate([self.sh_links, shape.links])
            self.sh_ptr = np.append(self.sh_ptr, len(self.sh_links))
            self.sh_max = np.append(self.sh_max, shape.alone_max if len(shape.alone) else 0.0)
        self.key_shape[key], self.key_rel[key] = shape.index, rel

    def lone_kinds(self, n: int) -> list[int]:
        """Per episode of the first *n*, its shape's number where the clock numbered it."""
        return self.key_shape[self.key_of[np.maximum(self.ep_task[:n], 0)]].tolist()

    def shape_of(self, index: int) -> tuple[CallShape, int, float]:
        """Episode *index*'s shape, task and start (one the clock numbered)."""
        task = int(self.ep_task[index])
        return self.shapes[int(self.key_shape[self.key_of[task]])], task, float(self.ep_start[index])

    def room(self, episodes: int) -> None:
        """Room for *episodes* episodes."""
        if episodes > len(self.ep_task):
            size = max(episodes, 2 * len(self.ep_task))
            self.ep_task = np.concatenate([self.ep_task, np.full(size - len(self.ep_task), -1, dtype=np.int64)])
            self.ep_start = np.concatenate([self.ep_start, np.zeros(size - len(self.ep_start))])
