"""P2P and group bandwidths of the ranks of one group (paper Section 3.4), by max-flow.

For a group G with child ranks r_1..r_R, on G's fabric (the links that make G a group, see
:mod:`atpsim.analytic.grouping`), with bandwidths per direction:

- ``P2P(a, b)`` = the max-flow from the GPUs of rank a to those of rank b when the other ranks
  of G are removed: the aggregate bandwidth *between* the two ranks, through switches but not
  through other ranks. On the paper's Figure 7(a) node this is the 4 NVLinks of a GPU pair
  (200 GB/s), not the 600 GB/s a flow could reach by relaying through the other two GPUs; on the
  torus of Figure 7(b) it is the 4 links between two neighbouring rings (100 GB/s) and 0 between
  rings that are not neighbours.
- ``GroupBW(a)`` = the max-flow from rank a to all the other ranks of G together: rank a's
  aggregate bandwidth to the rest of its group (600 GB/s for an A100 with 12 NVLinks of the
  paper's 50 GB/s; twice P2P for a torus ring, whose links go both ways round).

How it is computed, and what it costs:

1. The *quotient* of the group's fabric, each rank contracted to one vertex, then *series
   reduction* (:mod:`atpsim.analytic.quotient`); both keep every max-flow value.
2. If only ranks remain (tori, NVLink meshes: direct links), P2P is the link bandwidth between
   the two ranks and GroupBW the sum over a rank's links: both are exactly the cut, O(E).
3. Otherwise ranks with identical neighbourhoods and no direct links to other ranks (the GPUs of
   one switch, the nodes of one leaf) are interchangeable by an automorphism, so one max-flow
   per pair of such classes gives all their entries: 2 flows for a single switch of any size,
   O(leaves^2) for a fat tree. Ranks with direct links each form their own class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from atpsim.analytic.quotient import Adjacency, GroupNode, quotient, series_reduce
from atpsim.topology.graph import Topology


@dataclass(frozen=True, eq=False)
class RankBandwidths:
    """P2P and group bandwidths of R ranks, stored by class: rank i is in class
    ``rank_class[i]``; ``class_p2p_Bps[c, d]`` is P2P between a rank of class c and a different
    rank of class d; ``class_group_Bps[c]`` is GroupBW of a rank of class c (bytes/s)."""

    rank_class: np.ndarray
    class_p2p_Bps: np.ndarray
    class_group_Bps: np.ndarray


def rank_bandwidths(topology: Topology, group: GroupNode) -> RankBandwidths:
    """P2P and group bandwidths of *group*'s children (its ranks) on its fabric."""
    n_ranks = len(group.children)
    adjacency, _ = quotient(topology, group)
    series_reduce(adjacency, n_ranks)
    if all(vertex < n_ranks for vertex in adjacency):
        return _direct(adjacency, n_ranks)
    return _by_class(adjacency, n_ranks)


def _direct(adjacency: Adjacency, n_ranks: int) -> RankBandwidths:
    p2p = np.zeros((n_ranks, n_ranks))
    for a, neighbours in adjacency.items():
        for b, bandwidth in neighbours.items():
            p2p[a, b] = bandwidth
    return RankBandwidths(np.arange(n_ranks), p2p, p2p.sum(axis=1))


def _by_class(adjacency: Adjacency, n_ranks: int) -> RankBandwidths:
    rank_class, representatives = _classes(adjacency, n_ranks)
    n_classes = len(representatives)
    p2p = np.zeros((n_classes, n_classes))
    group = np.zeros(n_classes)
    for c, members in enumerate(representatives):
        group[c] = _max_flow(adjacency, n_ranks, members[0], None)
        if len(members) > 1:
            p2p[c, c] = _max_flow(adjacency, n_ranks, members[0], members[1])
        for d in range(c + 1, n_classes):
            p2p[c, d] = p2p[d, c] = _max_flow(adjacency, n_ranks, members[0], representatives[d][0])
    return RankBandwidths(rank_class, p2p, group)


def _classes(adjacency: Adjacency, n_ranks: int) -> tuple[np.ndarray, list[list[int]]]:
    """Ranks grouped by neighbourhood; a rank linked directly to another rank is alone."""
    by_key: dict[Any, list[int]] = {}
    for rank in range(n_ranks):
        neighbours = adjacency[rank]
        if any(other < n_ranks for other in neighbours):
            key: Any = ("alone", rank)
        else:
            key = tuple(sorted(neighbours.items()))
        by_key.setdefault(key, []).append(rank)
    representatives = list(by_key.values())
    rank_class = np.empty(n_ranks, dtype=np.int64)
    for c, members in enumerate(representatives):
        rank_class[members] = c
    return rank_class, representatives


def _max_flow(adjacency: Adjacency, n_ranks: int, source: int, sink: int | None) -> float:
    """Max-flow from rank *source* to rank *sink* with the other ranks removed, or, when *sink*
    is None, to all other ranks together."""
    flow = nx.DiGraph()
    for a, neighbours in adjacency.items():
        if sink is not None and a < n_ranks and a not in (source, sink):
            continue
        for b, bandwidth in neighbours.items():
            if sink is not None and b < n_ranks and b not in (source, sink):
                continue
            flow.add_edge(a, b, capacity=bandwidth)
    target: Any = sink
    if sink is None:
        target = ("all other ranks",)
        for rank in range(n_ranks):
            if rank != source:
                flow.add_edge(rank, target)
    if source not in flow or target not in flow:
        return 0.0
    return float(nx.maximum_flow_value(flow, source, target))
