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
   per pair of such classes gives all their entries. Ranks with direct links each form their
   own class.
4. Pairs of classes are alike too where switches are: switches with the same neighbours among
   the switches, at the same bandwidths (the leaves of a fat tree, its spines) can be permuted
   among themselves, an automorphism of the switch fabric. P2P(a, b) is a max-flow over the
   switches plus a and b (the other ranks removed), so pairs whose ends attach to the same
   number of such twin switches at the same bandwidths, twin class by twin class (and with the
   same direct link), are mapped onto each other and share one max-flow
   (:class:`_TwinFlows`). GroupBW(a) likewise: every other rank drains into the sink at no cost,
   so it lies on the sink side of every finite cut and only the bandwidth each switch has to
   the other ranks together matters. A fat tree's top layer (256 leaf classes on
   ``ib-cluster:512x8``: 33,152 max-flows) needs 3; identical groups (the nodes of a cluster)
   share their results (:data:`MEMO_ENTRIES`). Equal to the max-flow of each pair to the last
   bit where bandwidths are whole bytes/s (every preset), else to float rounding.
"""

from __future__ import annotations

import math
from collections import OrderedDict
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


#: Results kept for groups whose reduced quotient is the same graph (the nodes of a cluster).
MEMO_ENTRIES = 64
_MEMO: OrderedDict[tuple, RankBandwidths] = OrderedDict()


def rank_bandwidths(topology: Topology, group: GroupNode) -> RankBandwidths:
    """P2P and group bandwidths of *group*'s children (its ranks) on its fabric."""
    n_ranks = len(group.children)
    adjacency, _ = quotient(topology, group)
    series_reduce(adjacency, n_ranks)
    key = (n_ranks, tuple(sorted((v, tuple(sorted(nb.items()))) for v, nb in adjacency.items())))
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    if all(vertex < n_ranks for vertex in adjacency):
        result = _direct(adjacency, n_ranks)
    else:
        result = _by_class(adjacency, n_ranks)
    _MEMO[key] = result
    while len(_MEMO) > MEMO_ENTRIES:
        _MEMO.popitem(last=False)
    return result


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
    flows = _TwinFlows(adjacency, n_ranks)
    for c, members in enumerate(representatives):
        group[c] = flows.max_flow(members[0], None)
        if len(members) > 1:
            p2p[c, c] = flows.max_flow(members[0], members[1])
        for d in range(c + 1, n_classes):
            p2p[c, d] = p2p[d, c] = flows.max_flow(members[0], representatives[d][0])
    return RankBandwidths(rank_class, p2p, group)


class _TwinFlows:
    """Max-flows on one quotient, one per orbit of their ends under permutations of twin
    switches (module docstring, step 4): a switch's twin class is its neighbourhood among the
    switches, bandwidths included; switches with the same one are never adjacent, and any
    permutation within a class is an automorphism of the switch fabric."""

    def __init__(self, adjacency: Adjacency, n_ranks: int):
        self.adjacency, self.n_ranks = adjacency, n_ranks
        classes: dict[tuple, int] = {}
        self.twin: dict[int, int] = {}
        self.ranks_at: dict[int, list[float]] = {}  # switch -> bandwidths of its rank links
        for v, neighbours in adjacency.items():
            if v >= n_ranks:
                key = tuple(sorted((u, w) for u, w in neighbours.items() if u >= n_ranks))
                self.twin[v] = classes.setdefault(key, len(classes))
                self.ranks_at[v] = [w for u, w in neighbours.items() if u < n_ranks]
        self.values: dict[tuple, float] = {}

    def max_flow(self, source: int, sink: int | None) -> float:
        """:func:`_max_flow`, computed once per key of the ends."""
        key = self._p2p_key(source, sink) if sink is not None else self._group_key(source)
        if key not in self.values:
            self.values[key] = _max_flow(self.adjacency, self.n_ranks, source, sink)
        return self.values[key]

    def _p2p_key(self, a: int, b: int) -> tuple:
        """What fixes the flow graph of (a, b) up to twin permutations: their direct link and,
        per switch they reach, its twin class and the two bandwidths."""
        near_a, near_b = self.adjacency[a], self.adjacency[b]
        reached = {x for x in (*near_a, *near_b) if x >= self.n_ranks}
        profile = sorted((self.twin[x], near_a.get(x, 0.0), near_b.get(x, 0.0)) for x in reached)
        return "p2p", near_a.get(b, 0.0), tuple(profile)

    def _group_key(self, a: int) -> tuple:
        """The same for GroupBW(a): a's links to the other ranks together and, per switch, its
        twin class, a's bandwidth to it and the other ranks' bandwidth to it together."""
        near = self.adjacency[a]
        to_ranks = math.fsum(w for u, w in near.items() if u < self.n_ranks)
        profile = []
        for x, at in self.ranks_at.items():
            mine = near.get(x, 0.0)
            others = list(at)
            if x in near:
                others.remove(mine)
            profile.append((self.twin[x], mine, math.fsum(others)))
        return "group", to_ranks, tuple(sorted(profile))


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
