"""Shared pieces of the matrix derivation: the group tree's node type, a group's fabric, and the
*quotient* of a fabric in which each child group (rank) is one vertex.

A group's *fabric* is the part of the topology graph that makes it a group: its nodes, and the
links among them of at least its threshold bandwidth. Contracting each rank's own fabric to one
vertex (parallel links add up, links inside a rank vanish) keeps every max-flow between ranks;
so does *series reduction*: a switch with one neighbour carries nothing and is dropped, and a
switch with two (a NIC between a node and its leaf switch) becomes one link of the smaller
bandwidth.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from atpsim.topology.graph import Topology

REL_TOL = 1e-9
#: vertex -> neighbour -> bandwidth (bytes/s per direction), symmetric.
Adjacency = dict[int, dict[int, float]]


@dataclass
class GroupNode:
    """A group of GPUs: *gpus* (ranks, sorted), the graph *nodes* of the fabric that makes it a
    group, the smallest link bandwidth of that fabric, how it was found, and its children."""

    gpus: tuple[int, ...]
    nodes: frozenset[Any]
    threshold_Bps: float
    formed_by: str
    children: list[GroupNode] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self) -> Iterator[GroupNode]:
        """This group and every group below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def fabric_edges(graph: nx.Graph, group: GroupNode) -> Iterator[tuple[Any, Any, float]]:
    """The links of *group*'s fabric: edges among its nodes of at least its threshold."""
    for u, v, data in graph.subgraph(group.nodes).edges(data=True):
        bandwidth = float(data["bandwidth_Bps"])
        if bandwidth >= group.threshold_Bps * (1 - REL_TOL):
            yield u, v, bandwidth


def quotient(topology: Topology, group: GroupNode) -> tuple[Adjacency, dict[int, Any]]:
    """*group*'s fabric with each child (rank) contracted to vertex 0..R-1, and the graph node of
    every other vertex (numbered from R on)."""
    owner: dict[Any, int] = {}
    for index, child in enumerate(group.children):
        for node in child.nodes:
            owner[node] = index
    next_id = itertools.count(len(group.children))
    others: dict[Any, int] = defaultdict(lambda: next(next_id))
    adjacency: Adjacency = defaultdict(dict)
    for u, v, bandwidth in sorted(fabric_edges(topology.graph, group), key=_edge_key):
        a = owner[u] if u in owner else others[u]
        b = owner[v] if v in owner else others[v]
        if a != b:
            adjacency[a][b] = adjacency[a].get(b, 0.0) + bandwidth
            adjacency[b][a] = adjacency[b].get(a, 0.0) + bandwidth
    for index in range(len(group.children)):
        adjacency.setdefault(index, {})
    return dict(adjacency), {vertex: node for node, vertex in others.items()}


def _edge_key(edge: tuple[Any, Any, float]) -> tuple[str, str]:
    return str(edge[0]), str(edge[1])


def series_reduce(adjacency: Adjacency, n_ranks: int) -> None:
    """Drop switches of degree <= 1 and replace switches of degree 2 by one link of the smaller
    bandwidth, until none is left (in place). Max-flows between ranks are unchanged."""
    pending = [vertex for vertex in adjacency if vertex >= n_ranks]
    while pending:
        vertex = pending.pop()
        if vertex not in adjacency or len(adjacency[vertex]) > 2:
            continue
        neighbours = adjacency.pop(vertex)
        for other in neighbours:
            del adjacency[other][vertex]
        if len(neighbours) == 2:
            (a, cap_a), (b, cap_b) = neighbours.items()
            joined = adjacency[a].get(b, 0.0) + min(cap_a, cap_b)
            adjacency[a][b] = adjacency[b][a] = joined
        pending.extend(other for other in neighbours if other >= n_ranks)
