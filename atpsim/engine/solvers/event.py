"""The event-driven solver: every transfer a flow at its max-min fair rate, always exact.

The steps are flattened into flows (step-major), the rendezvous rule gives each flow the flows
it waits for (:func:`atpsim.collectives.schedule.rendezvous_dependencies`, over the problem's
rank ids), and the event loop (:mod:`atpsim.engine.solvers.event_loop`) runs them. A rank id's
finish time is that of the last flow it takes part in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Steps, rendezvous_dependencies
from atpsim.engine.problem import Problem, Solution
from atpsim.engine.solvers.event_loop import FlowTimeline, run_flows

NAME = "event"


@dataclass(frozen=True)
class FlatFlows:
    """Flows in step-major order: ends (GPU ranks), bytes, lane and step of each."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    lane: np.ndarray
    step: np.ndarray


def flatten(steps: Steps) -> FlatFlows:
    """The flows of *steps*, step by step."""
    parts = []
    for k, s in enumerate(steps):
        parts.append((s.src, s.dst, s.nbytes, s.lanes, np.full(len(s.src), k, dtype=np.int64)))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return FlatFlows(empty, empty, np.zeros(0), empty, empty)
    return FlatFlows(*(np.concatenate([p[i] for p in parts]) for i in range(5)))


def prefix_of(flows: FlatFlows, deps: tuple[np.ndarray, np.ndarray],
              n_flows: int) -> tuple[FlatFlows, tuple[np.ndarray, np.ndarray]]:
    """The first *n_flows* flows (whole steps) and their dependencies, cut from a longer run's:
    the rendezvous rule looks only at earlier steps, so a prefix's rows are the run's rows."""
    cut = FlatFlows(*(a[:n_flows] for a in (flows.src, flows.dst, flows.nbytes, flows.lane,
                                             flows.step)))
    indptr = deps[0][:n_flows + 1]
    return cut, (indptr, deps[1][:indptr[-1]])


def dependencies(problem: Problem, flows: FlatFlows) -> tuple[np.ndarray, np.ndarray]:
    """The rendezvous rule's CSR over *flows* (the problem's, flattened), over its rank ids."""
    ids = problem.rank_of
    return rendezvous_dependencies(ids(flows.src), ids(flows.dst), flows.step, flows.lane)


def done_by_id(src: np.ndarray, dst: np.ndarray, finish_s: np.ndarray, n_ids: int) -> np.ndarray:
    """The finish of the last flow each id (``0 .. n_ids - 1``) takes part in, 0 for none."""
    done = np.zeros(n_ids)
    np.maximum.at(done, src, finish_s)
    np.maximum.at(done, dst, finish_s)
    return done


class EventDriven:
    """The event-driven max-min solver (module docstring); it always answers."""

    name = NAME

    def timeline(self, problem: Problem,
                 flat: tuple[FlatFlows, tuple[np.ndarray, np.ndarray]] | None = None, *,
                 loop_flows: int | None = None, guard: int | None = None) -> FlowTimeline:
        """Every flow's start and finish (step-major order), and the bytes per link; *flat*:
        the problem's flows and dependencies, when already at hand; *loop_flows* and
        *guard*: as :func:`~atpsim.engine.solvers.event_loop.run_flows` takes them."""
        return self._run(problem, flat, loop_flows, guard)[1]

    def solve(self, problem: Problem) -> Solution:
        flows, run = self._run(problem)
        ids = problem.rank_of
        done = done_by_id(ids(flows.src), ids(flows.dst), run.finish_s, problem.n_ids)
        return Solution(done, run.link_bytes, float(run.delivered.sum()), NAME)

    @staticmethod
    def _run(problem: Problem, flat: tuple[FlatFlows, tuple[np.ndarray, np.ndarray]] | None = None,
             loop_flows: int | None = None, guard: int | None = None
             ) -> tuple[FlatFlows, FlowTimeline]:
        flows, deps = flat if flat is not None else (flatten(problem.steps), None)
        if deps is None:
            deps = dependencies(problem, flows)
        routes = problem.routes
        run = run_flows(routes, problem.links.bandwidth_Bps, routes.index(flows.src, flows.dst),
                        flows.nbytes, deps, loop_flows=loop_flows, guard=guard)
        return flows, run
