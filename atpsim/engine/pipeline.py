"""Time one cluster of groups: shrink the problem by symmetry where it holds, then ask the
solvers in order until one is exact, and expand the answer.

A solver (:class:`~atpsim.engine.methods.Solver`) is anything with a *name* and
``solve(problem) -> Solution | None`` (None: its answer would not be exact here); which ones
an engine tries, in which order, is the engine's method (:mod:`atpsim.engine.methods`; by
default :data:`~atpsim.engine.methods.SOLVERS`, the ``auto`` engine's).

:func:`solve_reference` is the plain run with no reduction: every flow of every group in one
event-driven simulation. Every shortcut is tested against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from atpsim.collectives.registry import build_schedule
from atpsim.collectives.schedule import Schedule
from atpsim.engine.methods import SOLVERS, Solver
from atpsim.engine.problem import Problem, Solution
from atpsim.engine.reductions.mirror import find_mirror
from atpsim.engine.reductions.symmetry import find_symmetry
from atpsim.engine.result import CollectiveResult
from atpsim.engine.routes import PairRoutes, pair_routes
from atpsim.engine.solvers.event import EventDriven
from atpsim.topology.graph import Topology

#: The path label of the plain run (:func:`solve_reference`).
REFERENCE = "reference"


def solve(problem: Problem, solvers: Sequence[Solver] = SOLVERS) -> Solution | None:
    """The first exact answer of *solvers*, on the symmetry quotient where a rank shift maps
    the run onto itself (else where the ranks' mirror image does, lanes swapped: NCCL's
    double binary tree, :mod:`~atpsim.engine.reductions.mirror`); None when no solver is
    exact."""
    symmetry = find_symmetry(problem) or find_mirror(problem)
    small = symmetry.shrink(problem) if symmetry is not None else problem
    del problem  # the quotient is all the solvers need: the full routes can go
    for solver in solvers:
        solution = solver.solve(small)
        if solution is not None:
            return symmetry.expand(solution) if symmetry is not None else solution
    return None


def solve_cluster(topology: Topology, op: str, algorithm: str, groups: list[tuple[int, ...]],
                  nbytes: float, solvers: Sequence[Solver] = SOLVERS,
                  routed: PairRoutes | None = None) -> CollectiveResult | None:
    """*op* by *algorithm* on *groups* (sizes >= 2, sharing links) through :func:`solve`;
    *routed* holds routes of (at least) their pairs. None when no solver is exact."""
    box = [build_schedule(op, algorithm, groups, nbytes)]
    n_transfers, bytes_total = box[0].n_transfers, box[0].bytes_total
    solution = solve(_problem(box, topology, routed), solvers)
    if solution is None:
        return None
    return CollectiveResult.of(group_times(solution.done_s, groups), n_transfers, bytes_total,
                               solution.delivered_bytes, solution.path, solution.link_bytes)


def _problem(box: list[Schedule], topology: Topology, routed: PairRoutes | None) -> Problem:
    """The problem of the schedule taken out of *box*: the problem is then the only holder of
    its steps and routes, so :func:`solve` lets them go once it has the symmetry quotient
    (the routes of a 65,536-GPU torus all-reduce are 33 M links)."""
    steps = box.pop().steps
    return Problem.of(steps, pair_routes(topology, steps, routed), topology.links)


def solve_reference(topology: Topology, op: str, algorithm: str, groups: list[tuple[int, ...]],
                    nbytes: float) -> CollectiveResult:
    """Every flow of every group in one event-driven run: no reduction, no other solver."""
    schedule = build_schedule(op, algorithm, groups, nbytes)
    routes = pair_routes(topology, schedule.steps)
    solution = EventDriven().solve(Problem.of(schedule.steps, routes, topology.links))
    return CollectiveResult.of(group_times(solution.done_s, groups), schedule.n_transfers,
                               schedule.bytes_total, solution.delivered_bytes, REFERENCE,
                               solution.link_bytes)


def group_times(done_s: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Each group's finish: the last of its ranks' (s)."""
    return np.array([done_s[list(g)].max() for g in groups])
