"""Which GPUs make up the ranks of each layer: the *group tree* of a topology graph.

The hierarchical communication matrix (paper Section 3.4) needs, at every layer, groups of GPUs
that talk to each other over a faster or less shared fabric than the rest. This module finds
them from the links alone, in three passes:

1. **Bandwidth threshold** (where the link bandwidth drops). Links are taken in order of
   decreasing per-direction bandwidth and joined with union-find; whenever GPUs that were in
   different components become connected, their components become the children of a new group.
   A group remembers the nodes of the component it formed in (its *fabric*): NVLink-joined GPUs
   form a node's group before the slower PCIe path to the NIC joins, so the node's internal
   bandwidths are NVLink only, as NCCL would use them. Cost: O(E log E + V * distinct bandwidths).
2. **Torus slices** (structure, not bandwidth). A group of GPUs joined only by direct GPU-GPU
   links that form, in rank order, a row-major n-D torus (n >= 2) is split dimension by
   dimension: layer 1 holds the d0 slices of coordinate 0, the last layer the d_{n-1} GPUs of
   one ring (paper Figure 7(b)). The shape is read from the GPUs' ``coords`` when they carry it
   and otherwise searched among the factorizations of the group size; either way it is accepted
   only if the links are exactly the torus's links. Cost: O(E) per candidate shape.
3. **Shared switches** (where the aggregate bandwidth drops). In the quotient of a group (each
   rank one vertex, see :mod:`atpsim.analytic.quotient`), the ranks whose only neighbour is one
   switch become a group with it when the switch's other links carry less than those ranks can
   push into it: the GPUs under one PCIe switch of the paper's Figure 2, the nodes on an
   oversubscribed leaf switch. Repeated until no switch qualifies, so a tree with drops at
   several levels gets a layer per level. Cost: one quotient, O(E), per round.

Groups keep their GPUs in rank order and children are ordered by their lowest rank, so the tree,
and the matrix built from it, is deterministic.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import networkx as nx
import numpy as np

from atpsim.analytic.quotient import REL_TOL, GroupNode, fabric_edges, quotient, series_reduce
from atpsim.topology.graph import Topology


def group_tree(topology: Topology) -> GroupNode:
    """The group tree of *topology*: thresholds first, then torus slices and shared switches."""
    root = threshold_tree(topology)
    refine(root, topology)
    return root


# -- pass 1: bandwidth thresholds ------------------------------------------------------------
class _UnionFind:
    def __init__(self, items: Iterable[Any]):
        self.parent = {item: item for item in items}

    def find(self, item: Any) -> Any:
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def threshold_tree(topology: Topology) -> GroupNode:
    """Pass 1: groups formed as links are added from the fastest to the slowest."""
    graph = topology.graph
    uf = _UnionFind(graph.nodes)
    current: dict[Any, GroupNode] = {
        node: GroupNode((rank,), frozenset({node}), math.inf, "a single GPU")
        for rank, node in enumerate(topology.gpu_nodes)
    }
    for bandwidth, edges in _edges_by_bandwidth(graph):
        for u, v in edges:
            uf.union(u, v)
        current = _merge_groups(graph, uf, current, bandwidth)
    (root,) = current.values()  # the Topology constructor guarantees a connected graph
    return root


def _edges_by_bandwidth(graph: nx.Graph) -> list[tuple[float, list[tuple[Any, Any]]]]:
    by_bandwidth: dict[float, list[tuple[Any, Any]]] = defaultdict(list)
    for u, v, data in graph.edges(data=True):
        by_bandwidth[float(data["bandwidth_Bps"])].append((u, v))
    return sorted(by_bandwidth.items(), key=lambda item: -item[0])


def _merge_groups(
    graph: nx.Graph, uf: _UnionFind, current: dict[Any, GroupNode], bandwidth: float
) -> dict[Any, GroupNode]:
    merged: dict[Any, list[GroupNode]] = defaultdict(list)
    for old_root, group in current.items():
        merged[uf.find(old_root)].append(group)
    if all(len(groups) == 1 for groups in merged.values()):
        return {root: groups[0] for root, groups in merged.items()}
    components: dict[Any, set[Any]] = defaultdict(set)
    for node in graph.nodes:
        components[uf.find(node)].add(node)
    result = {}
    for root, groups in merged.items():
        if len(groups) == 1:
            result[root] = groups[0]
            continue
        children = sorted(groups, key=lambda g: g.gpus[0])
        gpus = tuple(sorted(itertools.chain.from_iterable(g.gpus for g in children)))
        split = "single GPUs" if all(g.is_leaf for g in children) else "GPUs joined by faster links"
        how = f"{split}; {_fabric_text(bandwidth)}"
        result[root] = GroupNode(gpus, frozenset(components[root]), bandwidth, how, children)
    return result


# -- passes 2 and 3: torus slices and shared switches ----------------------------------------
def refine(group: GroupNode, topology: Topology) -> None:
    """Split groups of single GPUs that form a torus into slices, and bunch the ranks behind a
    switch with a bandwidth drop into groups, bottom-up."""
    for child in group.children:
        refine(child, topology)
    if group.is_leaf:
        return
    if all(child.is_leaf for child in group.children):
        slices = torus_children(group, topology)
        if slices:
            group.children = slices
            return
    while children := switch_children(group, topology):
        group.children = children
        group.formed_by = f"ranks behind shared switches; {_fabric_text(group.threshold_Bps)}"


def torus_children(group: GroupNode, topology: Topology) -> list[GroupNode] | None:
    """Pass 2: the slices along dimension 1 of a torus-shaped group (None if it is no torus)."""
    graph = topology.graph
    if len(group.gpus) < 4 or any(graph.nodes[n]["kind"] != "gpu" for n in group.nodes):
        return None
    local = {topology.gpu_nodes[rank]: i for i, rank in enumerate(group.gpus)}
    links = {tuple(sorted((local[u], local[v]))) for u, v, _ in fabric_edges(graph, group)}
    dims = torus_shape(len(group.gpus), links, _coords_hint(graph, topology, group))
    if dims is None:
        return None
    group.formed_by = _slice_text(dims, 0, group.threshold_Bps)
    return _slices(group, dims, topology)


def _slice_text(dims: tuple[int, ...], axis: int, threshold_Bps: float) -> str:
    shape = "x".join(map(str, dims))
    what = "single GPUs of a ring" if axis == len(dims) - 1 else "slices"
    return f"{what} along dimension {axis + 1} of a {shape} torus; {_fabric_text(threshold_Bps)}"


def torus_shape(
    n: int, links: set[tuple[int, ...]], hint: tuple[int, ...] | None = None
) -> tuple[int, ...] | None:
    """The shape (>= 2 dimensions, each >= 2) of the row-major torus on local indices 0..n-1
    whose links are exactly *links*, trying *hint* first; None if there is none."""
    candidates = itertools.chain([hint] if hint else [], _ordered_factorizations(n))
    max_degree = max(np.bincount(np.array(sorted(links)).ravel(), minlength=n)) if links else 0
    for dims in candidates:
        if len(dims) < 2 or math.prod(dims) != n or min(dims) < 2:
            continue
        if sum(2 if d > 2 else 1 for d in dims) != max_degree:
            continue
        if torus_links(dims) == links:
            return tuple(dims)
    return None


def torus_links(dims: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Every link (i, j), i < j, of the row-major torus of shape *dims*."""
    index = np.arange(math.prod(dims))
    coords = np.array(np.unravel_index(index, dims))
    links: set[tuple[int, ...]] = set()
    for axis, size in enumerate(dims):
        step = coords.copy()
        step[axis] = (step[axis] + 1) % size
        other = np.ravel_multi_index(tuple(step), dims)
        links.update(
            zip(np.minimum(index, other).tolist(), np.maximum(index, other).tolist(), strict=True)
        )
    return links


def _ordered_factorizations(n: int, minimum_dims: int = 2) -> Iterator[tuple[int, ...]]:
    def split(rest: int) -> Iterator[tuple[int, ...]]:
        if rest == 1:
            yield ()
            return
        for d in range(2, rest + 1):
            if rest % d == 0:
                for tail in split(rest // d):
                    yield (d, *tail)

    return (dims for dims in sorted(split(n), key=len) if len(dims) >= minimum_dims)


def _coords_hint(graph: nx.Graph, topology: Topology, group: GroupNode) -> tuple[int, ...] | None:
    coords = [graph.nodes[topology.gpu_nodes[rank]].get("coords") for rank in group.gpus]
    if any(c is None for c in coords) or len({len(c) for c in coords}) != 1:
        return None
    dims = tuple(int(max(axis)) - int(min(axis)) + 1 for axis in zip(*coords, strict=True))
    return tuple(d for d in dims if d > 1)


def _slices(
    group: GroupNode, dims: tuple[int, ...], topology: Topology, axis: int = 0
) -> list[GroupNode]:
    """The dims[axis] slices of *group* (consecutive blocks of its GPUs), each split further."""
    block = len(group.gpus) // dims[axis]
    children = []
    for i in range(dims[axis]):
        gpus = group.gpus[i * block : (i + 1) * block]
        if len(gpus) == 1:
            children.append(_leaf(gpus[0], topology))
            continue
        nodes = frozenset(topology.gpu_nodes[rank] for rank in gpus)
        how = _slice_text(dims, axis + 1, group.threshold_Bps)
        child = GroupNode(gpus, nodes, group.threshold_Bps, how)
        child.children = _slices(child, dims, topology, axis + 1)
        children.append(child)
    return children


def switch_children(group: GroupNode, topology: Topology) -> list[GroupNode] | None:
    """Pass 3: ranks that reach the rest of *group* only through one switch, whose links onward
    carry less than those ranks can push into it, become one group with that switch (the GPUs
    of one PCIe switch, the nodes of an oversubscribed leaf). None if no switch qualifies."""
    n_ranks = len(group.children)
    adjacency, names = quotient(topology, group)
    series_reduce(adjacency, n_ranks)
    new_children: list[GroupNode] = []
    taken: set[int] = set()
    for vertex in sorted(v for v in adjacency if v >= n_ranks):
        links = adjacency[vertex]
        members = [r for r in sorted(links) if r < n_ranks and set(adjacency[r]) == {vertex}]
        feed = sum(links[r] for r in members)
        onward = sum(bandwidth for other, bandwidth in links.items() if other not in members)
        if 2 <= len(members) < n_ranks and onward < feed * (1 - REL_TOL):
            new_children.append(
                _switch_group(group, members, names[vertex], topology, onward, feed)
            )
            taken.update(members)
    if not new_children:
        return None
    new_children.extend(child for r, child in enumerate(group.children) if r not in taken)
    return sorted(new_children, key=lambda g: g.gpus[0])


def _switch_group(
    group: GroupNode,
    members: list[int],
    switch: Any,
    topology: Topology,
    onward: float,
    feed: float,
) -> GroupNode:
    children = [group.children[r] for r in members]
    gpus = tuple(sorted(itertools.chain.from_iterable(child.gpus for child in children)))
    what = "single GPUs" if all(child.is_leaf for child in children) else "groups"
    how = (
        f"{what} behind one switch ({switch}: {onward / 1e9:g} GB/s onward for "
        f"{feed / 1e9:g} GB/s in); {_fabric_text(group.threshold_Bps)}"
    )
    nodes = _behind(group, children, switch, topology)
    return GroupNode(gpus, nodes, group.threshold_Bps, how, children)


def _behind(
    group: GroupNode, members: list[GroupNode], switch: Any, topology: Topology
) -> frozenset[Any]:
    """The nodes of *group*'s fabric that the other ranks cannot reach without passing through
    *switch* or the *members*: the switch, the members and what hangs off them only (NICs)."""
    blocked = {switch}.union(*(child.nodes for child in members))
    start = [node for child in group.children if child not in members for node in child.nodes]
    seen, stack = set(start), list(start)
    graph, floor = topology.graph, group.threshold_Bps * (1 - REL_TOL)
    while stack:
        for other, data in graph[stack.pop()].items():
            if other in group.nodes and other not in seen and other not in blocked:
                if data["bandwidth_Bps"] >= floor:
                    seen.add(other)
                    stack.append(other)
    return frozenset(group.nodes - seen)


def _leaf(rank: int, topology: Topology) -> GroupNode:
    return GroupNode((rank,), frozenset({topology.gpu_nodes[rank]}), math.inf, "a single GPU")


def _fabric_text(threshold_Bps: float) -> str:
    return f"fabric: links of at least {threshold_Bps / 1e9:g} GB/s"
