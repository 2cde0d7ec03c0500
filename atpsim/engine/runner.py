"""Run a collective on a topology: the one entry point the step simulator and the CLI call.

``run_collective`` plans the schedule (atpsim.collectives), splits the groups into clusters
that share links, simulates each distinct cluster once (identical link-disjoint clusters reuse
the result) and memoizes the answer per topology. A cluster runs, in order of preference:

1. one flow per orbit when a shift of its ranks maps the whole run onto itself
   (:mod:`atpsim.engine.symmetry`; a torus row, a ring on a switch): the vectorized sweep on
   those flows where no link is shared, else the event engine on them;
2. otherwise the vectorized sweep on every flow, where no link is shared;
3. otherwise the simpy event engine on every flow.

Event runs of a schedule whose steps are all alike (rings) simulate a prefix and extend it once
the run repeats (:mod:`atpsim.engine.periodic`). Every shortcut is exact (tests hold each to
``engine="event"``, the plain joint simulation with none of them). Groups of one rank cost
nothing.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from atpsim.collectives.closed_form import bus_factor
from atpsim.collectives.registry import build_schedule, check_algorithm, check_groups, pattern
from atpsim.collectives.schedule import Pattern, Schedule
from atpsim.engine.event import run_event
from atpsim.engine.partition import Cluster, clusters, local_pairs
from atpsim.engine.routes import PairRoutes, pair_routes
from atpsim.engine.stepwise import event_run
from atpsim.engine.symmetry import find_symmetry, run_symmetric, sweep_symmetric
from atpsim.engine.vectorized import sweep
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology

log = logging.getLogger(__name__)

ENGINES = ("auto", "event", "vectorized")
#: Results kept per topology (least recently used dropped first); each holds per-link bytes.
MEMO_ENTRIES = 1024
#: Cluster splits (with the routes of every pair) kept per topology.
CLUSTER_MEMO_ENTRIES = 16


@dataclass(frozen=True)
class CollectiveResult:
    """What a collective cost. Times in seconds; all groups start at t = 0.

    *link_bytes[i]* is the bytes that crossed directed link ``i`` of the topology.
    """

    time_s: float
    group_time_s: tuple[float, ...]
    n_flows: int
    bytes_sent: float
    bytes_delivered: float
    engine: str
    link_bytes: np.ndarray = field(compare=False, repr=False)

    def algbw_Bps(self, nbytes: float) -> float:
        """nccl-tests' algorithm bandwidth: buffer bytes / time."""
        return nbytes / self.time_s if self.time_s > 0 else float("inf")

    def busbw_Bps(self, op: str, p: int, nbytes: float) -> float:
        """nccl-tests' bus bandwidth: algbw times the op's factor (2(p-1)/p for all-reduce)."""
        return self.algbw_Bps(nbytes) * bus_factor(op, p)


@dataclass(frozen=True)
class _ClusterRun:
    group_time_s: np.ndarray
    link_bytes: np.ndarray
    n_flows: int
    bytes_sent: float
    bytes_delivered: float
    engine: str


_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CLUSTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_collective(
    topology: Topology,
    op: str,
    algorithm: str,
    groups: Sequence[Sequence[int]],
    nbytes: float,
    *,
    engine: str = "auto",
) -> CollectiveResult:
    """Simulate *op* by *algorithm* on every group of *groups* at once, *nbytes* per rank.

    *engine*: "auto" (split into link-sharing clusters, simulate each distinct cluster once,
    with the shortcuts of the module docstring), "event" (every group in one plain event
    simulation, no shortcut: the reference), "vectorized" (as auto, but a SimulationError
    where the sweep is not exact).
    """
    memo = _MEMO.setdefault(topology, OrderedDict())
    key = (op, algorithm, tuple(map(tuple, groups)), nbytes, engine)
    try:
        memo.move_to_end(key)
        return memo[key]
    except (KeyError, TypeError):
        pass
    if engine not in ENGINES:
        raise SimulationError(f"unknown engine {engine!r}; expected one of {list(ENGINES)}")
    check_algorithm(op, algorithm)
    checked = check_groups(groups, topology.n_gpus)
    if not nbytes >= 0:
        raise SimulationError(f"expected a buffer size >= 0 bytes, got {nbytes!r}")
    result = _run(topology, op, algorithm, checked, float(nbytes), engine)
    memo[(op, algorithm, checked, float(nbytes), engine)] = result
    memo[key] = result
    while len(memo) > MEMO_ENTRIES:
        memo.popitem(last=False)
    return result


def _run(topology: Topology, op: str, algorithm: str, groups: tuple[tuple[int, ...], ...],
         nbytes: float, engine: str) -> CollectiveResult:
    n_links = len(topology.links)
    group_time = np.zeros(len(groups))
    link_bytes = np.zeros(n_links)
    busy = [i for i, g in enumerate(groups) if len(g) > 1]
    if nbytes == 0 or not busy:
        return CollectiveResult(0.0, tuple(group_time.tolist()), 0, 0.0, 0.0, "none", link_bytes)
    if engine == "event":
        run = _simulate(topology, op, algorithm, [groups[i] for i in busy], nbytes, engine)
        group_time[busy] = run.group_time_s
        return CollectiveResult(float(group_time.max()), tuple(group_time.tolist()), run.n_flows,
                                run.bytes_sent, run.bytes_delivered, run.engine, run.link_bytes)
    patterns = {len(groups[i]): pattern(op, algorithm, len(groups[i]), nbytes) for i in busy}
    done: dict[tuple, tuple[Cluster, _ClusterRun]] = {}
    totals = [0, 0.0, 0.0]
    engines: set[str] = set()
    found, table = _clusters(topology, [groups[i] for i in busy], patterns)
    for cluster in found:
        members = [busy[i] for i in cluster.groups]
        if cluster.key in done:
            first, run = done[cluster.key]
            link_bytes[cluster.links] += run.link_bytes[first.links]
            engines.add("replicated")
        else:
            run = _simulate(topology, op, algorithm, [groups[i] for i in members], nbytes, engine, table)
            done[cluster.key] = (cluster, run)
            link_bytes += run.link_bytes
            engines.add(run.engine)
        group_time[members] = run.group_time_s
        totals[0] += run.n_flows
        totals[1] += run.bytes_sent
        totals[2] += run.bytes_delivered
    label = "+".join(sorted(engines - {"replicated"})) + ("+replicated" if "replicated" in engines else "")
    return CollectiveResult(
        float(group_time.max()), tuple(group_time.tolist()), int(totals[0]), totals[1],
        totals[2], label, link_bytes,
    )


def _clusters(topology: Topology, groups: list[tuple[int, ...]],
              patterns: dict[int, Pattern]) -> tuple[list[Cluster], PairRoutes]:
    """:func:`clusters`, memoized per topology by the groups and the patterns' pairs: a step
    calls the same groups with several buffer sizes, and routing every pair is the cost."""
    memo = _CLUSTERS.setdefault(topology, OrderedDict())
    pairs = tuple((p, *(a.tobytes() for a in local_pairs(pat))) for p, pat in sorted(patterns.items()))
    key = (tuple(groups), pairs)
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    memo[key] = found = clusters(topology, groups, patterns)
    while len(memo) > CLUSTER_MEMO_ENTRIES:
        memo.popitem(last=False)
    return found


def _simulate(topology: Topology, op: str, algorithm: str, groups: list[tuple[int, ...]],
              nbytes: float, engine: str, routed: PairRoutes | None = None) -> _ClusterRun:
    schedule = build_schedule(op, algorithm, groups, nbytes)
    routes = pair_routes(topology, schedule.steps, routed)
    if engine == "event":
        return _plain_event(schedule, routes, topology, groups)
    table = topology.links
    sent, n_flows = schedule.bytes_total, schedule.n_transfers
    symmetry = find_symmetry(schedule.steps, routes, table.bandwidth_Bps, table.latency_s)
    if symmetry is not None:
        quotient = sweep_symmetric(symmetry, schedule.steps, routes, len(table))
        if quotient is not None:
            return _ClusterRun(_group_times(quotient.done_s, groups), quotient.link_bytes, n_flows,
                               sent, quotient.delivered, "vectorized")
    else:
        result = sweep(schedule.steps, routes, topology.n_gpus, len(table))
        if result is not None:
            return _ClusterRun(_group_times(result.done_s, groups), result.link_bytes, n_flows,
                               sent, float(result.pair_bytes.sum()), "vectorized")
    if engine == "vectorized":
        raise SimulationError(
            f"the vectorized engine is not exact for {op} by {algorithm} here: flows share links"
        )
    if symmetry is not None:
        quotient = run_symmetric(symmetry, schedule.steps, routes, table.bandwidth_Bps)
        return _ClusterRun(_group_times(quotient.done_s, groups), quotient.link_bytes, n_flows,
                           sent, quotient.delivered, "symmetric")
    log.debug("flows share links; running the event engine for %d transfers", n_flows)
    run = event_run(schedule.steps, routes, table.bandwidth_Bps)
    return _ClusterRun(_group_times(run.done_s, groups), run.link_bytes, n_flows, sent,
                       run.delivered, "event")


def _group_times(done_s: np.ndarray, groups: list[tuple[int, ...]]) -> np.ndarray:
    return np.array([done_s[list(g)].max() for g in groups])


def _plain_event(schedule: Schedule, routes: PairRoutes, topology: Topology,
                 groups: list[tuple[int, ...]]) -> _ClusterRun:
    """engine="event": every flow of every group in one simpy run, no shortcut."""
    flow_pair = routes.index(schedule.src, schedule.dst)
    timeline = run_event(routes, topology.links.bandwidth_Bps, flow_pair, schedule.transfer_bytes,
                         schedule.dependencies())
    times = np.zeros(len(groups))
    np.maximum.at(times, schedule.group, timeline.finish_s)
    return _ClusterRun(times, timeline.link_bytes, schedule.n_transfers, schedule.bytes_total,
                       float(timeline.delivered.sum()), "event")
