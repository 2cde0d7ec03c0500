"""Run a collective on a topology: the one entry point of the link-level engine.

``run_collective`` checks the request, memoizes the answer per topology and sends it down the
engine its name picks among the ``engine`` methods (:mod:`atpsim.engine.methods`):

- ``auto``: the replication reduction splits the groups into clusters that share links and
  keeps one of each kind (:mod:`atpsim.engine.reductions.replicate`); each distinct cluster
  goes through :func:`atpsim.engine.pipeline.solve` (symmetry, then the method's solvers in
  order: longest-path, periodic + event-driven); the answers are copied back to the twins.
- ``reference``: every flow of every group in one event-driven run, no reduction
  (:func:`atpsim.engine.pipeline.solve_reference`). The shortcuts are exact; tests hold each
  to this.
- ``longest-path``: as auto with the longest-path solver alone; a SimulationError where it
  would not be exact (flows share links).

The answer's ``path`` says which reductions and which solver ran (``replicated+``,
``symmetry+``, ``periodic+`` in front of ``longest-path`` or ``event``; ``reference``; ``none``
when there is nothing to move). Groups of one rank cost nothing.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from atpsim.collectives.registry import check_algorithm, check_groups, pattern
from atpsim.engine.budget import check_reference_budget
from atpsim.engine.methods import PLAIN, Method, Solver, find, names
from atpsim.engine.pipeline import solve_cluster, solve_reference
from atpsim.engine.reductions.replicate import replicate
from atpsim.engine.result import CollectiveResult
from atpsim.errors import SimulationError, did_you_mean
from atpsim.topology.graph import Topology

#: Results kept per topology (least recently used dropped first); each holds per-link bytes.
MEMO_ENTRIES = 1024

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_collective(
    topology: Topology,
    op: str,
    algorithm: str,
    groups: Sequence[Sequence[int]],
    nbytes: float,
    *,
    engine: str = "auto",
    memory_bytes: int | None = None,
) -> CollectiveResult:
    """Simulate *op* by *algorithm* on every group of *groups* at once, *nbytes* per rank
    (nccl-tests' buffer convention); *engine* names an ``engine`` method (module docstring).
    A ``reference`` run that would need more than *memory_bytes* is refused before it starts
    (:func:`~atpsim.engine.budget.check_reference_budget`; default: the machine's share)."""
    memo = _MEMO.setdefault(topology, OrderedDict())
    key = (op, algorithm, tuple(map(tuple, groups)), nbytes, engine)
    try:
        memo.move_to_end(key)
        return memo[key]
    except (KeyError, TypeError):
        pass
    method = find("engine", engine)
    if method is None:
        raise SimulationError(f"unknown engine {engine!r}{did_you_mean(engine, names('engine'))}")
    check_algorithm(op, algorithm)
    checked = check_groups(groups, topology.n_gpus)
    if not nbytes >= 0:
        raise SimulationError(f"expected a buffer size >= 0 bytes, got {nbytes!r}")
    result = _run(topology, op, algorithm, checked, float(nbytes), method, memory_bytes)
    memo[(op, algorithm, checked, float(nbytes), engine)] = result
    memo[key] = result
    while len(memo) > MEMO_ENTRIES:
        memo.popitem(last=False)
    return result


def _run(topology: Topology, op: str, algorithm: str, groups: tuple[tuple[int, ...], ...],
         nbytes: float, method: Method, memory_bytes: int | None) -> CollectiveResult:
    n_links = len(topology.links)
    busy = [i for i, g in enumerate(groups) if len(g) > 1]
    if nbytes == 0 or not busy:
        return CollectiveResult.nothing(len(groups), n_links)
    members = [groups[i] for i in busy]
    if method.kind == PLAIN:
        check_reference_budget(op, algorithm, members, nbytes, memory_bytes)
        result = solve_reference(topology, op, algorithm, members, nbytes)
    else:
        result = _replicated(topology, op, algorithm, members, nbytes, method.solvers)
    group_time = np.zeros(len(groups))
    group_time[busy] = result.group_time_s
    return CollectiveResult.of(group_time, result.n_flows, result.bytes_sent,
                               result.bytes_delivered, result.path, result.link_bytes)


def _replicated(topology: Topology, op: str, algorithm: str, groups: list[tuple[int, ...]],
                nbytes: float, solvers: tuple[Solver, ...]) -> CollectiveResult:
    """The replication reduction around :func:`solve_cluster`, one call per distinct cluster."""
    patterns = {len(g): pattern(op, algorithm, len(g), nbytes) for g in groups}
    replication = replicate(topology, groups, patterns)
    answers = {}
    for c in replication.distinct():
        members = [groups[i] for i in replication.groups(c)]
        answer = solve_cluster(topology, op, algorithm, members, nbytes, solvers,
                               replication.routes)
        if answer is None:
            names = " or ".join(s.name for s in solvers)
            raise SimulationError(f"the {names} solver is not exact for {op} by {algorithm}"
                                  " here: flows share links (engine 'auto' handles them)")
        answers[c] = answer
    return replication.expand(answers, len(groups), n_links=len(topology.links))
