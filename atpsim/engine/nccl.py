"""NCCL as it runs a collective: the algorithm over channels, the protocol, and the tuner.

:func:`run_nccl` plans what NCCL would run and times it with :func:`~atpsim.engine.collective.
run_collective`: NCCL's channel rings (one per NIC rail, :mod:`atpsim.collectives.channels`),
hierarchical all-reduce and NVLS are planned over the topology's layout and registered as
patterns (:func:`~atpsim.collectives.registry.register_planned`); the protocol's bandwidth
efficiency is a topology with scaled links and its latency a fixed term
(:mod:`atpsim.collectives.protocols`). ``auto`` tries every candidate and keeps the fastest,
as NCCL's tuner keeps the fastest by its model.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from atpsim.collectives.channels import (
    RING_STEPS,
    GroupLayout,
    channel_ring_pattern,
    check_channels,
    group_layout,
    hop_classes,
    pair_classes,
    ring_orders,
)
from atpsim.collectives.hierarchical import check_nodes, hierarchical_all_reduce
from atpsim.collectives.nvls import has_nvls
from atpsim.collectives.protocols import (
    PROTOCOLS,
    check_protocol,
    effective_topology,
    latency_s,
    topology_profile,
)
from atpsim.collectives.registry import (
    PatternFn,
    algorithm_names,
    build_schedule,
    default_algorithm,
    pattern,
    register_planned,
)
from atpsim.collectives.schedule import Pattern, Steps
from atpsim.collectives.tree import tree_all_reduce
from atpsim.engine.collective import run_collective
from atpsim.engine.solvers.event_loop import PastHorizon, horizon
from atpsim.errors import SimulationError, did_you_mean
from atpsim.topology.graph import Topology

#: Algorithms :func:`run_nccl` plans itself (everything else is a registry name run as is):
#: ``ring`` = NCCL's channel rings (one per NIC, :mod:`atpsim.collectives.channels`);
#: ``ring-rank-order`` = one ring in the group's order (the registry's plain ``ring``);
#: ``hierarchical`` = intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather
#: (:mod:`atpsim.collectives.hierarchical`); ``tree`` = NCCL's double binary tree across nodes,
#: chains inside (:mod:`atpsim.collectives.tree`); ``nvls`` = NVLink SHARP on NVSwitch machines
#: that have it (:mod:`atpsim.collectives.nvls`) -- these three all-reduce only; ``auto`` = what
#: NCCL's tuner picks (:func:`_candidates`, the fastest by this model).
NCCL_ALGORITHMS = ("ring", "ring-rank-order", "hierarchical", "tree", "nvls", "auto")
#: What ``auto`` chooses among, per op.
AUTO_CANDIDATES = {"all_reduce": ("ring",), "reduce_scatter": ("ring",), "all_gather": ("ring",)}


@dataclass(frozen=True)
class NcclCall:
    """One collective call as NCCL would run it: *time_s* = *latency_s* (protocol base, steps
    and overhead) + *link_time_s* (the engine on links at the protocol's efficiency), with the
    *algorithm*, *protocol* and *channels* chosen, the engine's *path* and *n_flows*, each
    group's finish (*group_time_s*) and the bytes each directed link carried (*link_bytes*,
    the topology's link order)."""

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


def nccl_algorithm_names(op: str) -> list[str]:
    """Algorithm names :func:`run_nccl` takes for *op*: its own and the registry's."""
    own = [a for a in NCCL_ALGORITHMS
           if (a != "ring" or op in RING_STEPS) and (a not in ("hierarchical", "tree", "nvls") or op == "all_reduce")]
    return sorted(set(own) | set(algorithm_names(op)))


def check_nccl_algorithm(op: str, algorithm: str, key: str = "--algorithm") -> None:
    """A SimulationError (at *key*) naming the nearest valid name when :func:`run_nccl` does
    not take *algorithm* for *op*."""
    if algorithm not in nccl_algorithm_names(op):
        valid = nccl_algorithm_names(op)
        raise SimulationError(f"unknown algorithm {algorithm!r} for {op}"
                              f"{did_you_mean(algorithm, valid)}", key=key)


def run_nccl(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
             nbytes: float, *, protocol: str = "auto", channels: int | None = None,
             engine: str = "auto", prune: bool = True) -> NcclCall:
    """*op* by *algorithm* (:func:`nccl_algorithm_names`) with *protocol* (LL, LL128, Simple,
    ``auto`` or ``none``: bare links) on *channels* channels (default: one per NIC rail) on
    every group of *groups* at once, *nbytes* per rank; the fastest candidate where
    *algorithm* or *protocol* is ``auto`` (NCCL's tuner, by this model). With *prune* (the
    default), candidates that a lower bound shows cannot win are not simulated
    (:func:`_fastest`, exact); ``prune=False`` simulates every one (the plain path)."""
    check_protocol(protocol)
    if channels is not None:
        check_channels(channels)
    check_nccl_algorithm(op, algorithm)
    algorithms = _candidates(topology, op, groups) if algorithm == "auto" else (algorithm,)
    if "nvls" in algorithms:
        _check_nvls(topology, groups)
    protocols = PROTOCOLS if protocol == "auto" else (protocol,)
    candidates = [(a, p) for a in algorithms for p in protocols]
    if len(candidates) == 1 or not prune or engine == "longest-path":
        calls = [_nccl_call(topology, op, a, groups, float(nbytes), p, channels, engine)
                 for a, p in candidates]
        return min(calls, key=lambda c: c.time_s)
    return _fastest(topology, op, groups, float(nbytes), candidates, channels, engine)


def _fastest(topology: Topology, op: str, groups: Sequence[Sequence[int]], nbytes: float,
             candidates: list[tuple[str, str]], channels: int | None, engine: str) -> NcclCall:
    """The first fastest of *candidates* (algorithm, protocol), as ``min`` over all of them
    would pick, simulating only those that can win: in ascending order of a lower bound of
    each one's time (:func:`_lower_bound_s`), stopping at the first bound above the fastest
    time found; each after the first under a :func:`~atpsim.engine.solvers.event_loop.horizon`
    at the fastest time found (less its own fixed latency), so that its simulation stops as
    soon as it surely ends later. Exact: a skipped or stopped candidate is slower than the
    one kept."""
    plans = _Plans(topology, op, groups, channels)
    bounds = [_lower_bound_s(topology, op, a, groups, nbytes, p, channels, plans)
              for a, p in candidates]
    best: tuple[float, int, NcclCall] | None = None
    for index in sorted(range(len(candidates)), key=bounds.__getitem__):
        if best is not None and bounds[index] > best[0]:
            break
        algorithm, protocol = candidates[index]
        limit_s = math.inf if best is None else best[0] - plans.fixed_s(algorithm, protocol)
        try:
            with horizon(limit_s):
                call = _nccl_call(topology, op, algorithm, groups, nbytes, protocol, channels,
                                  engine, plans)
        except PastHorizon:
            continue
        if best is None or (call.time_s, index) < best[:2]:
            best = (call.time_s, index, call)
    assert best is not None
    return best[2]


class _Plans:
    """What :func:`_plan` and :func:`_step_classes` give for each algorithm of one call,
    worked out once for all its protocols."""

    def __init__(self, topology: Topology, op: str, groups: Sequence[Sequence[int]],
                 channels: int | None):
        self.topology, self.op, self.groups, self.channels = topology, op, groups, channels
        self.plans: dict[str, tuple[str, tuple[tuple[int, ...], ...], str]] = {}
        self.classes: dict[str, list[str]] = {}

    def plan(self, algorithm: str) -> tuple[str, tuple[tuple[int, ...], ...], str]:
        if algorithm not in self.plans:
            self.plans[algorithm] = _plan(self.topology, self.op, algorithm, self.groups,
                                          self.channels)
        return self.plans[algorithm]

    def fixed_s(self, algorithm: str, protocol: str) -> float:
        """The protocol's fixed latency for *algorithm* (0 on bare links)."""
        if protocol == "none":
            return 0.0
        name, orders, kind = self.plan(algorithm)
        if algorithm not in self.classes:
            self.classes[algorithm] = _step_classes(self.topology, self.op, name, self.groups,
                                                    orders, kind)
        return latency_s(protocol, "tree" if kind == "tree" else "ring",
                         self.classes[algorithm], topology_profile(self.topology))


def _lower_bound_s(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
                   nbytes: float, protocol: str, channels: int | None,
                   plans: _Plans | None = None) -> float:
    """A time the candidate cannot beat: its fixed protocol latency plus the longest any GPU
    needs to push out (or take in) its schedule's bytes through all its links at once, at
    the protocol's efficiency (each byte a GPU sends leaves over one of its own links)."""
    plans = plans or _Plans(topology, op, groups, channels)
    name = plans.plan(algorithm)[0]
    fixed = plans.fixed_s(algorithm, protocol)
    links = topology if protocol == "none" else \
        effective_topology(topology, protocol, topology_profile(topology))
    sent, received = _bytes_per_gpu(build_schedule(op, name, groups, nbytes).steps, links.n_gpus)
    if not sent.any():
        return 0.0
    gpu = np.array([links.node_index[node] for node in links.gpu_nodes], dtype=np.int64)
    n_nodes = len(links.nodes)
    table = links.links
    out_Bps = np.bincount(table.src, weights=table.bandwidth_Bps, minlength=n_nodes)[gpu]
    in_Bps = np.bincount(table.dst, weights=table.bandwidth_Bps, minlength=n_nodes)[gpu]
    return fixed + float(max((sent / out_Bps).max(), (received / in_Bps).max()))


def _bytes_per_gpu(steps: Steps, n_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each GPU sends to and receives from other GPUs over all *steps* (each template
    counted once per step that runs it)."""
    sent, received = np.zeros(n_gpus), np.zeros(n_gpus)
    for template, count in steps.in_use():
        moved = np.where(template.src != template.dst, template.nbytes, 0.0)
        sent += count * np.bincount(template.src, weights=moved, minlength=n_gpus)
        received += count * np.bincount(template.dst, weights=moved, minlength=n_gpus)
    return sent, received


def _candidates(topology: Topology, op: str, groups: Sequence[Sequence[int]]) -> tuple[str, ...]:
    """What ``auto`` chooses among: :data:`AUTO_CANDIDATES`, plus the tree for an all-reduce
    across nodes and NVLS for one inside one node of an NVSwitch that reduces (NCCL's tuner
    weighs the same: ring, tree, NVLS)."""
    base = AUTO_CANDIDATES.get(op, (default_algorithm(op),))
    if op != "all_reduce":
        return base
    if not _one_node_each(topology, groups):
        return (*base, "tree")
    return (*base, "nvls") if has_nvls(topology) else base


def _one_node_each(topology: Topology, groups: Sequence[Sequence[int]]) -> bool:
    return all(group_layout(topology, g).n_nodes == 1 for g in groups if len(g) > 1)


def _check_nvls(topology: Topology, groups: Sequence[Sequence[int]]) -> None:
    """NVLS needs an NVSwitch with NVLink SHARP (H100 and later) and each group on one node."""
    if not has_nvls(topology):
        raise SimulationError(f"NVLS needs an NVSwitch with NVLink SHARP (H100 or later); "
                              f"{topology.name} has none", key="--algorithm")
    if not _one_node_each(topology, groups):
        raise SimulationError("NVLS reduces inside one NVSwitch node; a group spans nodes",
                              key="--algorithm")


def _nccl_call(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
               nbytes: float, protocol: str, channels: int | None, engine: str,
               plans: _Plans | None = None) -> NcclCall:
    plans = plans or _Plans(topology, op, groups, channels)
    name, orders, _ = plans.plan(algorithm)
    profile = topology_profile(topology)
    if protocol == "none":
        result = run_collective(topology, op, name, groups, nbytes, engine=engine)
        return NcclCall(result.time_s, result.time_s, 0.0, algorithm, "none", len(orders),
                        result.path, result.n_flows, result.group_time_s, result.link_bytes)
    result = run_collective(effective_topology(topology, protocol, profile), op, name, groups,
                            nbytes, engine=engine)
    if result.time_s == 0:
        return NcclCall(0.0, 0.0, 0.0, algorithm, protocol, len(orders), result.path, 0,
                        result.group_time_s, result.link_bytes)
    fixed = plans.fixed_s(algorithm, protocol)
    per_group = tuple(t + fixed if t > 0 else 0.0 for t in result.group_time_s)
    return NcclCall(fixed + result.time_s, result.time_s, fixed, algorithm, protocol,
                    len(orders), result.path, result.n_flows, per_group, result.link_bytes)


def planned_name(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
                 channels: int | None = None) -> str:
    """The registry name of the schedule :func:`run_nccl` runs for *algorithm* (a chosen one,
    not ``auto``) on *groups*: NCCL's channel rings, tree or hierarchical plan, registered."""
    return _plan(topology, op, algorithm, groups, channels)[0]


def _plan(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
          channels: int | None) -> tuple[str, tuple[tuple[int, ...], ...], str]:
    """(registry name to run, ring orders of the first group, step-latency kind): NCCL's
    channel rings are planned per group size from the first group of that size."""
    first = [g for g in groups if len(g) > 1][:1] or [list(groups[0])]
    if algorithm == "ring-rank-order":
        return "ring", (tuple(range(len(first[0]))),), "ring"
    if algorithm in ("hierarchical", "tree"):
        name = _plan_by_nodes(topology, op, algorithm, groups, channels)
        count = len(ring_orders(group_layout(topology, first[0]), channels)) \
            if algorithm == "tree" else 1
        return name, (tuple(range(len(first[0]))),) * count, \
            "tree" if algorithm == "tree" else "steps"
    if algorithm != "ring" or op not in RING_STEPS:
        return algorithm, (tuple(range(len(first[0]))),), "steps"
    by_size: dict[int, tuple[tuple[int, ...], ...]] = {}
    for g in groups:
        if len(g) > 1 and len(g) not in by_size:
            by_size[len(g)] = ring_orders(group_layout(topology, g), channels)
    if not by_size:
        return "ring", ((0,),), "ring"
    digest = hashlib.sha1(repr(sorted(by_size.items())).encode()).hexdigest()[:12]
    name = register_planned(op, f"ring@{digest}", _planned_rings(op, by_size))
    first_orders = by_size[len(first[0])]
    return name, first_orders, "ring"


#: Algorithms planned over a group's nodes: local positions per node -> pattern.
BY_NODES: dict[str, Callable[[Any, float], Pattern]] = {
    "hierarchical": hierarchical_all_reduce, "tree": tree_all_reduce}


def _plan_by_nodes(topology: Topology, op: str, algorithm: str,
                   groups: Sequence[Sequence[int]], channels: int | None) -> str:
    """Register *algorithm*'s pattern (:data:`BY_NODES`) for each group size, from the first
    group of that size's nodes (the tree: per channel, each node in the channel's order)."""
    by_size: dict[int, Any] = {}
    for g in groups:
        if len(g) > 1 and len(g) not in by_size:
            layout = group_layout(topology, g)
            if algorithm == "tree":
                by_size[len(g)] = tuple(_by_node(layout, o) for o in ring_orders(layout, channels))
                continue
            nodes = tuple(tuple(m) for m in layout.by_node())
            check_nodes(nodes)
            by_size[len(g)] = nodes
    digest = hashlib.sha1(repr(sorted(by_size.items())).encode()).hexdigest()[:12]
    build = BY_NODES[algorithm]

    def planned(p: int, nbytes: float) -> Pattern:
        return build(by_size[p], nbytes) if p in by_size else Steps.of(())

    return register_planned(op, f"{algorithm}@{digest}", planned)


def _by_node(layout: GroupLayout, order: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """*order* cut into its nodes' runs (each node's members in the channel's order)."""
    runs: dict[int, list[int]] = {}
    for i in order:
        runs.setdefault(layout.node[i], []).append(i)
    return tuple(tuple(r) for r in runs.values())


def _planned_rings(op: str, by_size: dict[int, tuple[tuple[int, ...], ...]]) -> PatternFn:
    def planned(p: int, nbytes: float) -> Pattern:
        return channel_ring_pattern(op, by_size[p], nbytes) if p in by_size else Steps.of(())

    return planned


def _step_classes(topology: Topology, op: str, name: str, groups: Sequence[Sequence[int]],
                  orders: tuple[tuple[int, ...], ...], kind: str) -> list[str]:
    """Each step's hop class, for the protocol's per-step latency. Rings, as NCCL counts
    them (tuning.cc): ``2(nodes - 1)`` network steps of ``2(p - 1)`` for all-reduce
    (``nodes - 1`` of ``p - 1`` otherwise, the pipelined chain of broadcast and reduce
    included), the rest at the slowest intra-node class; other
    algorithms: each step at the slowest class any of its transfers uses."""
    group = [g for g in groups if len(g) > 1][0]
    if kind == "tree":
        return _tree_classes(topology, group)
    hops = hop_classes(topology, group, orders[0])
    chain = op in ("broadcast", "reduce") and name == "ring"
    if (kind == "ring" and op in RING_STEPS) or chain:
        n_steps = len(group) - 1 if chain else RING_STEPS[op](len(group))
        nodes = group_layout(topology, group).n_nodes
        inter = (2 if op == "all_reduce" else 1) * (nodes - 1)
        intra = "pcie" if "pcie" in hops else "nvlink"
        return ["net"] * inter + [intra] * (n_steps - inter)
    order = ["nvlink", "pcie", "net"]
    classes = []
    for s in pattern(op, name, len(group), 1.0):
        pairs = sorted({(int(a), int(b)) for a, b in zip(s.src, s.dst, strict=True)})
        worst = pair_classes(topology, group, pairs)
        classes.append(max(worst, key=order.index) if worst else "nvlink")
    return classes


def _tree_classes(topology: Topology, group: Sequence[int]) -> list[str]:
    """NCCL's tree latency steps (tuning.cc): ``2(m - 1)`` intra-node chain hops (m ranks per
    node) and ``2 ceil(log2 N)`` network hops up and down N nodes."""
    nodes = group_layout(topology, group).by_node()
    chain = [(m[i], m[i + 1]) for m in nodes for i in range(len(m) - 1)]
    intra = "pcie" if "pcie" in pair_classes(topology, group, chain) else "nvlink"
    longest = max(len(m) for m in nodes)
    return [intra] * (2 * (longest - 1)) + ["net"] * (2 * math.ceil(math.log2(len(nodes))))
