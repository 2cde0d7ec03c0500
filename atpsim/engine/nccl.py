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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from atpsim.collectives.nccl import Candidate, NcclPlanner
from atpsim.collectives.protocols import effective_topology, link_row, topology_profile
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import find
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
    (:func:`_fastest`, exact); ``prune=False`` simulates every one (the plain path).
    *memory_bytes* caps a ``reference`` run (:func:`~atpsim.engine.collective.run_collective`).
    Groups of one rank move nothing: such a call takes 0 s, the first candidate reported (as
    the collectives' closed forms give 0 s for ``p = 1``); nothing is pruned, as no lower
    bound has a step to count."""
    planner = NcclPlanner(topology, op, groups, channels)
    candidates = planner.candidates(algorithm, protocol)
    strict = getattr(find("engine", engine), "strict", False)  # a strict engine: no pruning
    moves = any(len(group) > 1 for group in groups)
    if len(candidates) == 1 or not prune or strict or not moves:
        calls = [_nccl_call(planner, c, float(nbytes), engine, memory_bytes) for c in candidates]
        return min(calls, key=lambda c: c.time_s)
    return _fastest(planner, candidates, float(nbytes), engine, memory_bytes)


def _fastest(planner: NcclPlanner, candidates: list[Candidate], nbytes: float,
             engine: str, memory_bytes: int | None) -> NcclCall:
    """The first fastest of *candidates*, as ``min`` over all of them would pick, simulating
    only those that can win: in ascending order of a lower bound of each one's time
    (:meth:`~atpsim.collectives.nccl.NcclPlanner.lower_bound_s`), stopping at the first bound
    above the fastest time found; each after the first under a
    :func:`~atpsim.engine.solvers.event_loop.horizon` at the fastest time found (less its own
    fixed latency), so that its simulation stops as soon as it surely ends later. Exact: a
    skipped or stopped candidate is slower than the one kept."""
    bounds = [planner.lower_bound_s(c, nbytes) for c in candidates]
    best: tuple[float, int, NcclCall] | None = None
    for index in sorted(range(len(candidates)), key=bounds.__getitem__):
        if best is not None and bounds[index] > best[0]:
            break
        candidate = candidates[index]
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
