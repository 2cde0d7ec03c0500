"""The hop class of each step of a planned NCCL algorithm, for its protocol's fixed latency.

NCCL's latency model (``src/graph/tuning.cc``) charges a base per algorithm and a latency per
step by the hop's class (NVLink, PCIe, network): :func:`step_classes` lists the classes of a
plan's steps as NCCL counts them, and :func:`fixed_latency_s` adds them up for a protocol
(:func:`atpsim.collectives.protocols.latency_s`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from atpsim.collectives.channels import (
    HOP_CLASSES,
    RING_STEPS,
    GroupLayout,
    group_layout,
    hop_classes,
    pair_class_codes,
    pair_classes,
)
from atpsim.collectives.nccl.plan import NcclPlan
from atpsim.collectives.protocols import latency_s, topology_profile
from atpsim.collectives.registry import pattern
from atpsim.collectives.schedule import Step
from atpsim.topology.graph import Topology


def fixed_latency_s(topology: Topology, op: str, protocol: str, plan: NcclPlan,
                    classes: list[str]) -> float:
    """*protocol*'s fixed time for one call of *op* by *plan* whose steps are of *classes*
    (:func:`step_classes`), by *topology*'s NCCL profile (s)."""
    kind = "tree" if plan.kind == "tree" else "ring"
    return latency_s(protocol, kind, classes, topology_profile(topology), op)


def step_classes(topology: Topology, op: str, plan: NcclPlan,
                 groups: Sequence[Sequence[int]]) -> list[str]:
    """Each step's hop class, for the protocol's per-step latency. Rings, as NCCL counts
    them (tuning.cc): ``2(nodes - 1)`` network steps of ``2(p - 1)`` for all-reduce
    (``nodes - 1`` of ``p - 1`` otherwise, the pipelined chain of broadcast and reduce
    included), the rest at the slowest intra-node class; other
    algorithms: each step at the slowest class any of its transfers uses."""
    group = [g for g in groups if len(g) > 1][0]
    layout = group_layout(topology, group)
    if plan.kind == "tree":
        return _tree_classes(topology, group, layout)
    hops = hop_classes(topology, group, plan.orders[0], layout)
    chain = op in ("broadcast", "reduce") and plan.schedule == "ring"
    if (plan.kind == "ring" and op in RING_STEPS) or chain:
        n_steps = len(group) - 1 if chain else RING_STEPS[op](len(group))
        inter = (2 if op == "all_reduce" else 1) * (layout.n_nodes - 1)
        intra = "pcie" if "pcie" in hops else "nvlink"
        return ["net"] * inter + [intra] * (n_steps - inter)
    steps = pattern(op, plan.schedule, len(group), 1.0)
    worst = _worst_classes(topology, group, layout, steps.templates)
    return [worst[i] for i in steps.order]


def _worst_classes(topology: Topology, group: Sequence[int], layout: GroupLayout,
                   templates: Sequence[Step]) -> list[str]:
    """The slowest class (:data:`~atpsim.collectives.channels.HOP_CLASSES`) any transfer of
    each of *templates* uses ('nvlink' for a step that moves nothing), every transfer of every
    template classified in one pass."""
    sizes = np.array([len(t) for t in templates], dtype=np.int64)
    if not sizes.any():
        return ["nvlink"] * len(templates)
    src = np.concatenate([t.src for t in templates])
    dst = np.concatenate([t.dst for t in templates])
    codes = pair_class_codes(topology, group, src, dst, layout)
    moving = np.flatnonzero(sizes)
    starts = (np.cumsum(sizes) - sizes)[moving]
    worst = np.zeros(len(templates), dtype=np.int64)
    worst[moving] = np.maximum.reduceat(codes, starts)
    return [HOP_CLASSES[c] for c in worst.tolist()]


def _tree_classes(topology: Topology, group: Sequence[int], layout: GroupLayout) -> list[str]:
    """NCCL's tree latency steps (tuning.cc): ``2(m - 1)`` intra-node chain hops (m ranks per
    node) and ``2 ceil(log2 N)`` network hops up and down N nodes."""
    nodes = layout.by_node()
    chain = [(m[i], m[i + 1]) for m in nodes for i in range(len(m) - 1)]
    intra = "pcie" if "pcie" in pair_classes(topology, group, chain, layout) else "nvlink"
    longest = max(len(m) for m in nodes)
    return [intra] * (2 * (longest - 1)) + ["net"] * (2 * math.ceil(math.log2(len(nodes))))
