"""One NCCL algorithm laid over the machine: the schedule the engine runs, and its channels.

NCCL's channel rings (one per NIC rail, :mod:`atpsim.collectives.channels`) are planned per
group size from the first group of that size; the hierarchical all-reduce and the double binary
tree from that group's nodes. Each is a
:class:`~atpsim.collectives.planned.PlannedPattern` handed to the engine as it is; the other
algorithms are registry names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from atpsim.collectives.channels import (
    RING_STEPS,
    GroupLayout,
    channel_ring_pattern,
    group_layout,
    ring_orders,
)
from atpsim.collectives.hierarchical import check_nodes, hierarchical_all_reduce
from atpsim.collectives.planned import PlannedPattern
from atpsim.collectives.schedule import Pattern
from atpsim.collectives.tree import tree_all_reduce
from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class NcclPlan:
    """NCCL *algorithm* planned for one call: *schedule* is what the engine runs (a registry
    name or a :class:`~atpsim.collectives.planned.PlannedPattern`), *orders* the ring orders
    of the first group of more than one rank (one per channel), *kind* how the protocol counts
    its steps' latency (``ring``, ``tree`` or ``steps``: each step as the pattern has it)."""

    algorithm: str
    schedule: str
    orders: tuple[tuple[int, ...], ...]
    kind: str

    @property
    def channels(self) -> int:
        return len(self.orders)


def plan_algorithm(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
                   channels: int | None = None) -> NcclPlan:
    """*op* by NCCL *algorithm* (a chosen one, not ``auto``) on *groups* of *topology*, on
    *channels* channels (default: one per NIC rail)."""
    first = [g for g in groups if len(g) > 1][:1] or [list(groups[0])]
    in_order = (tuple(range(len(first[0]))),)
    if algorithm == "ring-rank-order":
        return NcclPlan(algorithm, "ring", in_order, "ring")
    if algorithm in ("hierarchical", "tree"):
        schedule = _plan_by_nodes(topology, op, algorithm, groups, channels)
        if algorithm == "hierarchical":
            return NcclPlan(algorithm, schedule, in_order, "steps")
        count = len(ring_orders(group_layout(topology, first[0]), channels))
        return NcclPlan(algorithm, schedule, in_order * count, "tree")
    if algorithm != "ring" or op not in RING_STEPS:
        return NcclPlan(algorithm, algorithm, in_order, "steps")
    by_size: dict[int, tuple[tuple[int, ...], ...]] = {}
    for g in groups:
        if len(g) > 1 and len(g) not in by_size:
            by_size[len(g)] = ring_orders(group_layout(topology, g), channels)
    if not by_size:
        return NcclPlan(algorithm, "ring", ((0,),), "ring")
    rings = PlannedPattern.of(op, "ring", by_size, partial(channel_ring_pattern, op))
    return NcclPlan(algorithm, rings, by_size[len(first[0])], "ring")


#: Algorithms planned over a group's nodes: local positions per node -> pattern.
BY_NODES: dict[str, Callable[[Any, float], Pattern]] = {
    "hierarchical": hierarchical_all_reduce, "tree": tree_all_reduce}


def _plan_by_nodes(topology: Topology, op: str, algorithm: str,
                   groups: Sequence[Sequence[int]], channels: int | None) -> PlannedPattern:
    """*algorithm*'s pattern (:data:`BY_NODES`) for each group size, from the first group of
    that size's nodes (the tree: per channel, each node in the channel's order)."""
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
    return PlannedPattern.of(op, algorithm, by_size, BY_NODES[algorithm])


def _by_node(layout: GroupLayout, order: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """*order* cut into its nodes' runs (each node's members in the channel's order)."""
    runs: dict[int, list[int]] = {}
    for i in order:
        runs.setdefault(layout.node[i], []).append(i)
    return tuple(tuple(r) for r in runs.values())
