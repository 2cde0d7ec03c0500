"""NCCL as it runs a collective: each candidate NCCL's tuner weighs, timed, the fastest kept.

NCCL's planning is data (:mod:`atpsim.collectives.nccl`): the algorithm over channels (channel
rings per NIC rail, hierarchical all-reduce, NVLS, tree) as a schedule, with each protocol.
:func:`run_nccl` times each candidate with :func:`~atpsim.engine.collective.run_collective`:
the protocol's bandwidth efficiency is a topology with scaled links and its latency a fixed term
(:mod:`atpsim.collectives.protocols`). ``auto`` tries every candidate and keeps the fastest,
as NCCL's tuner keeps the fastest by its model.
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from atpsim.collectives.nccl import Candidate, NcclPlanner
from atpsim.collectives.nccl.plan import NcclPlan
from atpsim.collectives.protocols import (
    effective_topology,
    link_row,
    routing_base,
    topology_profile,
)
from atpsim.collectives.registry import build_schedule
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import PLAIN, find
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers.event_loop import PastHorizon, horizon
from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class NcclCall:
    """One collective call as NCCL would run it: *time_s* = *latency_s* (protocol base, steps
    and overhead) + *link_time_s* (the engine on links at the protocol's efficiency), with the
    *algorithm*, *protocol* and *channels* chosen, the engine's *path* and *n_flows*, each
    group's finish (*group_time_s*), the bytes each directed link carried (*link_bytes*,
    the topology's link order) and the *schedule* the engine ran (a registry name or a
    :class:`~atpsim.collectives.planned.PlannedPattern`)."""

    time_s: float
    link_time_s: float
    latency_s: float
    algorithm: str
    protocol: str
    channels: int
    path: str
    n_flows: int
    group_time_s: tuple[float, ...] = ()
    link_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)
    schedule: str = field(default="", compare=False, repr=False)


def run_nccl(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
             nbytes: float, *, protocol: str = "auto", channels: int | None = None,
             engine: str = "auto", prune: bool = True, memory_bytes: int | None = None) -> NcclCall:
    """*op* by *algorithm* (:func:`~atpsim.collectives.nccl.nccl_algorithm_names`) with
    *protocol* (LL, LL128, Simple, ``auto`` or ``none``: bare links) on *channels* channels
    (default: one per NIC rail) on every group of *groups* at once, *nbytes* per rank; the
    fastest candidate (:meth:`~atpsim.collectives.nccl.NcclPlanner.candidates`) where
    *algorithm* or *protocol* is ``auto`` (NCCL's tuner, by this model). With *prune* (the
    default), candidates that a lower bound shows cannot win are not simulated
    (:func:`_fastest`, exact); ``prune=False``, engine ``reference`` (the plain run) or a
    strict engine simulates every one.
    *memory_bytes* caps a ``reference`` run (:func:`~atpsim.engine.collective.run_collective`).
    Groups of one rank move nothing: such a call takes 0 s, the first candidate reported (as
    the collectives' closed forms give 0 s for ``p = 1``); nothing is pruned, as no lower
    bound has a step to count."""
    planner = NcclPlanner(topology, op, groups, channels)
    candidates = planner.candidates(algorithm, protocol)
    method = find("engine", engine)
    # a strict engine, or the plain run (every flow of every candidate): no pruning
    whole = getattr(method, "strict", False) or getattr(method, "kind", None) == PLAIN
    moves = any(len(group) > 1 for group in groups)
    if len(candidates) == 1 or not prune or whole or not moves:
        calls = [_nccl_call(planner, c, float(nbytes), engine, memory_bytes) for c in candidates]
        return min(calls, key=lambda c: c.time_s)
    return _fastest(planner, candidates, float(nbytes), engine, memory_bytes)


def _fastest(planner: NcclPlanner, candidates: list[Candidate], nbytes: float,
             engine: str, memory_bytes: int | None) -> NcclCall:
    """The first fastest of *candidates*, as ``min`` over all of them would pick, simulating
    only those that can win: in ascending order of a lower bound of each one's time
    (:meth:`~atpsim.collectives.nccl.NcclPlanner.lower_bound_s`), stopping at the first bound
    above the fastest time found; each after the first skipped where its tighter bound
    (:func:`link_bound_s`, worked out only then: it routes every pair) lies above the fastest
    time found, else simulated under a
    :func:`~atpsim.engine.solvers.event_loop.horizon` at the fastest time found (less its own
    fixed latency), so that its simulation stops as soon as it surely ends later. Exact: a
    skipped or stopped candidate is slower than the one kept."""
    bounds = [planner.lower_bound_s(c, nbytes) for c in candidates]
    best: tuple[float, int, NcclCall] | None = None
    for index in sorted(range(len(candidates)), key=bounds.__getitem__):
        if best is not None and bounds[index] > best[0]:
            break
        candidate = candidates[index]
        if best is not None and link_bound_s(planner, candidate, nbytes) > best[0]:
            continue
        limit_s = math.inf if best is None else best[0] - planner.fixed_s(candidate)
        try:
            with horizon(limit_s):
                call = _nccl_call(planner, candidate, nbytes, engine, memory_bytes)
        except PastHorizon:
            continue
        if best is None or (call.time_s, index) < best[:2]:
            best = (call.time_s, index, call)
    assert best is not None
    return best[2]


#: The share a link bound is lowered by before it rules a candidate out (:func:`link_bound_s`):
#: the engine sums a link's time in other steps than the bound's one division, so the two may
#: differ in the last bits where a candidate is exactly link-bound; 1e-9 keeps it a bound.
LINK_BOUND_RTOL = 1e-9
#: Link loads kept per routing base (most recent last): the step simulator repeats its calls.
LOADS_KEPT = 16
_LOADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def link_bound_s(planner: NcclPlanner, candidate: Candidate, nbytes: float) -> float:
    """A time *candidate* cannot beat for *nbytes* per rank, at least the planner's
    (:meth:`~atpsim.collectives.nccl.NcclPlanner.lower_bound_s`): its fixed latency plus the
    longest any one link needs to carry the bytes the schedule routes over it at the
    protocol's efficiency (every byte of a transfer crosses every link of its route, and no
    link moves more than its bandwidth), less :data:`LINK_BOUND_RTOL`. All-to-all on
    ``ib-cluster:128x8``: 44 ms where the GPUs' own links give 11 ms, so the protocols
    that cannot win are not simulated. Routing every pair, it is asked only of a candidate
    about to be simulated, whose routes the engine then finds made."""
    loads = _link_loads(planner, candidate.plan, nbytes)
    if not loads.any():
        return 0.0
    protocol = candidate.protocol
    links = planner.topology if protocol == "none" else effective_topology(
        planner.topology, link_row(candidate.algorithm, protocol), topology_profile(planner.topology))
    link_s = float((loads / links.links.bandwidth_Bps).max())
    return planner.fixed_s(candidate) + link_s * (1 - LINK_BOUND_RTOL)


def _link_loads(planner: NcclPlanner, plan: NcclPlan, nbytes: float) -> np.ndarray:
    """Bytes each directed link of the planner's topology carries over the whole schedule of
    *plan* (kept per routing base: protocols scale bandwidths, not routes)."""
    base = routing_base(planner.topology)
    kept = _LOADS.setdefault(base, OrderedDict())
    key = (planner.op, plan.schedule, tuple(map(tuple, planner.groups)), nbytes)
    try:
        kept.move_to_end(key)
        return kept[key]
    except (KeyError, TypeError):
        pass
    steps = build_schedule(planner.op, plan.schedule, planner.groups, nbytes).steps
    routes = pair_routes(planner.topology, steps)
    used = steps.in_use()
    pairs = np.concatenate([routes.index(t.src, t.dst) for t, _ in used])
    moved = np.concatenate([np.where(t.src != t.dst, t.nbytes * count, 0.0) for t, count in used])
    pair_bytes = np.bincount(pairs, weights=moved, minlength=len(routes))
    loads = np.bincount(routes.links, weights=np.repeat(pair_bytes, routes.route_len),
                        minlength=len(base.links))  # fmt: skip
    try:
        kept[key] = loads
    except TypeError:  # a schedule that is not hashable: not kept
        return loads
    while len(kept) > LOADS_KEPT:
        kept.popitem(last=False)
    return loads


def _nccl_call(planner: NcclPlanner, candidate: Candidate, nbytes: float, engine: str,
               memory_bytes: int | None) -> NcclCall:
    """*candidate* timed by the engine on the links at its protocol's efficiency (NVLS with
    Simple: NVLS's, :func:`~atpsim.collectives.protocols.link_row`), plus its fixed latency
    on every group that moves bytes."""
    topology, op, groups = planner.topology, planner.op, planner.groups
    plan, protocol = candidate.plan, candidate.protocol
    profile = topology_profile(topology)
    if protocol == "none":
        result = run_collective(topology, op, plan.schedule, groups, nbytes, engine=engine,
                                memory_bytes=memory_bytes)
        return NcclCall(result.time_s, result.time_s, 0.0, plan.algorithm, "none", plan.channels,
                        result.path, result.n_flows, result.group_time_s, result.link_bytes,
                        plan.schedule)
    links = effective_topology(topology, link_row(plan.algorithm, protocol), profile)
    result = run_collective(links, op, plan.schedule,
                            groups, nbytes, engine=engine, memory_bytes=memory_bytes)
    if result.time_s == 0:
        return NcclCall(0.0, 0.0, 0.0, plan.algorithm, protocol, plan.channels, result.path, 0,
                        result.group_time_s, result.link_bytes, plan.schedule)
    fixed = planner.fixed_s(candidate)
    per_group = tuple(t + fixed if t > 0 else 0.0 for t in result.group_time_s)
    return NcclCall(fixed + result.time_s, result.time_s, fixed, plan.algorithm, protocol,
                    plan.channels, result.path, result.n_flows, per_group, result.link_bytes,
                    plan.schedule)
