"""A training step on one network: the list schedule where it is exact, the joint run where
calls of the step meet on a link.

The list schedule (:func:`~atpsim.engine.step.scheduler.simulate_step`) gives each collective
call the time it takes with all its groups starting together and nothing else in flight.
That is the joint network's answer (:mod:`atpsim.engine.joint`) exactly when
(:func:`list_is_exact`):

- every call's groups start at the same instant, or the groups that start apart cross no
  common link, and
- no two calls are in flight at once on a common link (a group of one dimension that
  finishes early and starts the next call while a slower group of the previous call still
  runs, on links both cross).

SPMD steps on symmetric meshes meet both (every group of a call is alike, every rank moves in
step), and their results stay the list schedule's, bit for bit. Where either fails
(:func:`joint_step`), the step runs as a task graph over the ranks (a delay per compute task
and rank, a comm task per collective and group) on the joint engine.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphBuilder, TaskGraph
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.step.scheduler import ComputeTimer, StepTimeline
from atpsim.program import CommOp, StepProgram

#: Start times within this fraction of the step count as one instant (float noise of sums).
SAME_RTOL = 1e-12


#: The call a comm op issues and its groups in the program's rank numbering (None: groups of
#: one rank, nothing on a link).
CallOf = Callable[[CommOp], tuple[CallSpec, list[list[int]]] | None]


def list_is_exact(timeline: StepTimeline, calls: CallOf, network: JointNetwork) -> bool:
    """Whether the list schedule *timeline* is the joint network's answer (module
    docstring); *calls(op)*: the call a comm op issues."""
    tol = SAME_RTOL * max(timeline.step_time_s, 1e-30)
    spans = []
    for task in timeline.program.tasks:
        if not isinstance(task.op, CommOp) or (found := calls(task.op)) is None:
            continue
        plan = network.plan(found[0])
        if not plan.moves_bytes:
            continue
        first = np.array([g[0] for g in found[1]], dtype=np.int64)
        starts = timeline.start_s[task.id, first]
        if starts.max() - starts.min() > tol and not _apart(plan, starts, tol):
            return False
        ends = timeline.finish_s[task.id, first]
        spans.append((float(starts.min()), float(ends.max()), plan))
    spans.sort(key=lambda s: s[0])
    for i, (_, end, plan) in enumerate(spans):
        for later_start, _, other in spans[i + 1:]:
            if later_start >= end - tol:
                break
            if len(np.intersect1d(plan.links_of(range(len(plan.spec.groups))),
                                  other.links_of(range(len(other.spec.groups))))):  # fmt: skip
                return False
    return True


def _apart(plan, starts: np.ndarray, tol: float) -> bool:
    """Whether groups starting at different instants cross no common link."""
    order = np.argsort(starts, kind="stable")
    seen = np.zeros(0, dtype=np.int64)
    previous = None
    for g in order.tolist():
        links = plan.group_links[g]
        if previous is not None and starts[g] - previous > tol and len(np.intersect1d(seen, links)):
            return False
        seen = np.union1d(seen, links)
        previous = float(starts[g])
    return True


def joint_step(program: StepProgram, n_ranks: int, compute_time: ComputeTimer, calls: CallOf,
               network: JointNetwork, rank_scale: np.ndarray | None = None) -> StepTimeline:
    """*program* on *n_ranks* ranks on the joint engine (:func:`step_graph`)."""
    graph, node = step_graph(program, n_ranks, compute_time, calls, rank_scale)
    run = run_graph(graph, network)
    return StepTimeline(program, run.start_s[node], run.finish_s[node])


def step_graph(program: StepProgram, n_ranks: int, compute_time: ComputeTimer, calls: CallOf,
               rank_scale: np.ndarray | None = None) -> tuple[TaskGraph, np.ndarray]:
    """*program* on *n_ranks* ranks as one task graph: each rank's compute and comm streams
    in order, each collective group starting when its last member is ready; *calls(op)*
    gives the call and its groups. Returns the graph and the task of each (program task,
    rank)."""
    b = GraphBuilder()
    node = np.zeros((len(program.tasks), n_ranks), dtype=np.int64)
    last = {"compute": [-1] * n_ranks, "comm": [-1] * n_ranks}
    scale = np.ones(n_ranks) if rank_scale is None else rank_scale
    for task in program.tasks:
        stream = last[task.stream]
        if isinstance(task.op, CommOp):
            found = calls(task.op)
            groups = [[r] for r in range(n_ranks)] if found is None else found[1]
            index = b.call(found[0]) if found is not None else -1
            for g, members in enumerate(groups):
                waits = [int(node[d, r]) for r in members for d in task.deps] + \
                    [stream[r] for r in members if stream[r] >= 0]
                tid = b.comm(index, [g], waits) if index >= 0 else b.delay(0.0, waits)
                node[task.id, members] = tid
        else:
            seconds = compute_time(task.op)
            for r in range(n_ranks):
                waits = [int(node[d, r]) for d in task.deps] + ([stream[r]] if stream[r] >= 0 else [])
                node[task.id, r] = b.delay(seconds * float(scale[r]), waits)
        last[task.stream] = node[task.id].tolist()
    return b.build(), node
