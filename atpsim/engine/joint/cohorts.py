"""The comm tasks that start at one instant, grouped into cohorts: one per call, each with
the groups its tasks hold (sorted) and where each task's groups sit among them. The joint
engine (:mod:`~atpsim.engine.joint.engine`) times a cohort as one call on those groups."""

from __future__ import annotations

import numpy as np

from atpsim.engine.joint.graph import NotUniform, TaskGraph

#: A task and the positions of its groups in its cohort's groups.
Owned = list[tuple[int, np.ndarray]]
#: A cohort: its call, its groups (sorted) and its tasks' positions.
CohortTasks = tuple[int, tuple[int, ...], Owned]


class Cohorts:
    """Groups *graph*'s ready comm tasks into cohorts (module docstring)."""

    def __init__(self, graph: TaskGraph):
        self.graph = graph
        self._aranges: dict[int, np.ndarray] = {}

    def of(self, tasks: list[int]) -> list[CohortTasks]:
        """*tasks* grouped by call, in the order their calls first appear (a task whose groups
        are already in its call's cohort starts another)."""
        if len(tasks) == 1:  # the common case: its groups are sorted, so they are the cohort's
            return [self._alone(tasks[0])]
        out = []
        for call, lists in self._by_call(tasks).items():
            for members in lists:
                out.append(self._alone(members[0]) if len(members) == 1 else self._together(call, members))
        return out

    def positions(self, n: int) -> np.ndarray:
        """``0 .. n - 1`` (shared: nothing writes to it)."""
        if n not in self._aranges:
            self._aranges[n] = np.arange(n, dtype=np.int64)
            self._aranges[n].flags.writeable = False
        return self._aranges[n]

    def _by_call(self, tasks: list[int]) -> dict[int, list[list[int]]]:
        """Per call, its tasks in cohorts whose groups do not overlap (a folded graph's
        cannot: its copies would part, :class:`~atpsim.engine.joint.graph.NotUniform`)."""
        by_call: dict[int, list[tuple[list[int], set[int]]]] = {}
        for task in tasks:
            lists = by_call.setdefault(int(self.graph.call[task]), [([], set())])
            mine = self.graph.groups[task]
            if not lists[-1][1].isdisjoint(mine):
                if self.graph.uniform is not None:  # the unfolded graph could part them otherwise
                    raise NotUniform(f"task {task}: a second cohort of its call at one instant")
                lists.append(([], set()))
            lists[-1][0].append(task)
            lists[-1][1].update(mine)
        return {call: [members for members, _ in lists] for call, lists in by_call.items()}

    def _alone(self, task: int) -> CohortTasks:
        """A cohort of one task: its groups are sorted, so they are the cohort's, in order."""
        groups = self.graph.groups[task]
        return int(self.graph.call[task]), groups, [(task, self.positions(len(groups)))]

    def _together(self, call: int, members: list[int]) -> CohortTasks:
        """A cohort of several tasks of *call*: their groups together, sorted."""
        groups = tuple(sorted(g for t in members for g in self.graph.groups[t]))
        where = {g: i for i, g in enumerate(groups)}
        owned = [(t, np.array([where[g] for g in self.graph.groups[t]], dtype=np.int64)) for t in members]
        return call, groups, owned
