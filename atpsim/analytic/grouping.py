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
3. **Shared uplinks** (where the aggregate bandwidth drops). Inside a group whose children are
   single GPUs, a bridge (a link whose removal disconnects the fabric) that carries less than
   the GPUs on its smaller side can push into it makes that side a group: the GPUs under one
   PCIe switch of the paper's Figure 2, or a node behind one NIC. Applied recursively, so a
   PCIe tree with drops at several levels gets a layer per level. Cost: O(V) per bridge plus a
   max-flow on the side.

Groups keep their GPUs in rank order and children are ordered by their lowest rank, so the tree,
and the matrix built from it, is deterministic.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from atpsim.topology.graph import Topology

_REL_TOL = 1e-9


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


def group_tree(topology: Topology) -> GroupNode:
    """The group tree of *topology*: thresholds first, then tori and shared uplinks refined."""
    root = threshold_tree(topology)
    refine(root, topology)
    return root


def fabric_edges(graph: nx.Graph, group: GroupNode) -> Iterator[tuple[Any, Any, float]]:
    """The links of *group*'s fabric: edges among its nodes of at least its threshold."""
    for u, v, data in graph.subgraph(group.nodes).edges(data=True):
        bandwidth = float(data["bandwidth_Bps"])
        if bandwidth >= group.threshold_Bps * (1 - _REL_TOL):
            yield u, v, bandwidth


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


# -- passes 2 and 3: refinement of groups of single GPUs -------------------------------------
def refine(group: GroupNode, topology: Topology) -> None:
    """Split every group whose children are single GPUs by torus slices or shared uplinks."""
    for child in group.children:
        refine(child, topology)
    if group.is_leaf or not all(child.is_leaf for child in group.children):
        return
    children = torus_children(group, topology) or uplink_children(group, topology)
    if children:
        group.children = children
        for child in children:
            refine(child, topology)


def torus_children(group: GroupNode, topology: Topology) -> list[GroupNode] | None:
    """Pass 2: the slices along dimension 0 of a torus-shaped group (None if it is no torus)."""
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
        links.update(zip(np.minimum(index, other).tolist(), np.maximum(index, other).tolist(), strict=True))
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


def uplink_children(group: GroupNode, topology: Topology) -> list[GroupNode] | None:
    """Pass 3: the GPUs behind each bridge of the group's fabric that carries less than they
    can push into it, as groups; the other GPUs stay single. None if no bridge qualifies."""
    fabric = nx.Graph()
    fabric.add_nodes_from(group.nodes)
    fabric.add_weighted_edges_from(fabric_edges(topology.graph, group), weight="capacity")
    sides = [side for side in _bridge_sides(fabric, topology) if len(side[0]) < len(group.gpus)]
    maximal = _maximal_laminar(sides)
    if not maximal:
        return None
    covered = set().union(*(gpus for gpus, _ in maximal))
    children = []
    for gpus, nodes in maximal:
        ranks = tuple(sorted(gpus))
        how = f"single GPUs behind one shared uplink; {_fabric_text(group.threshold_Bps)}"
        children.append(
            GroupNode(ranks, nodes, group.threshold_Bps, how, [_leaf(r, topology) for r in ranks])
        )
    children.extend(_leaf(rank, topology) for rank in sorted(set(group.gpus) - covered))
    group.formed_by = f"GPUs behind shared uplinks; {_fabric_text(group.threshold_Bps)}"
    return sorted(children, key=lambda g: g.gpus[0])


def _leaf(rank: int, topology: Topology) -> GroupNode:
    return GroupNode((rank,), frozenset({topology.gpu_nodes[rank]}), math.inf, "a single GPU")


def _fabric_text(threshold_Bps: float) -> str:
    return f"fabric: links of at least {threshold_Bps / 1e9:g} GB/s"


def _bridge_sides(
    fabric: nx.Graph, topology: Topology
) -> Iterator[tuple[frozenset[int], frozenset[Any]]]:
    """(GPU ranks, nodes) of each smaller side of a bridge that is a bandwidth drop."""
    rank_of = {node: rank for rank, node in enumerate(topology.gpu_nodes)}
    for u, v in nx.bridges(fabric):
        if u in rank_of or v in rank_of:
            continue  # a GPU's own link, or a chain of GPUs: not a shared uplink
        capacity = fabric.edges[u, v]["capacity"]
        fabric.remove_edge(u, v)
        near_u, near_v = nx.node_connected_component(fabric, u), nx.node_connected_component(fabric, v)
        fabric.add_edge(u, v, capacity=capacity)
        gpus_u = frozenset(rank_of[n] for n in near_u if n in rank_of)
        gpus_v = frozenset(rank_of[n] for n in near_v if n in rank_of)
        for gpus, nodes, end in ((gpus_u, near_u, u), (gpus_v, near_v, v)):
            if 2 <= len(gpus) <= len(gpus_u | gpus_v) / 2:
                if capacity < _feed_Bps(fabric.subgraph(nodes), gpus, end, topology) * (1 - _REL_TOL):
                    yield gpus, frozenset(nodes)


def _feed_Bps(side: nx.Graph, gpus: frozenset[int], end: Any, topology: Topology) -> float:
    """Max-flow from the GPUs of a bridge's side into the bridge's endpoint on that side."""
    flow = nx.DiGraph()
    for a, b, data in side.edges(data=True):
        flow.add_edge(a, b, capacity=data["capacity"])
        flow.add_edge(b, a, capacity=data["capacity"])
    source = ("source",)
    for rank in gpus:
        flow.add_edge(source, topology.gpu_nodes[rank])
    return float(nx.maximum_flow_value(flow, source, end))


def _maximal_laminar(
    sides: list[tuple[frozenset[int], frozenset[Any]]],
) -> list[tuple[frozenset[int], frozenset[Any]]]:
    """The sides not inside a larger one; a side crossing an already kept one is dropped."""
    kept: list[tuple[frozenset[int], frozenset[Any]]] = []
    for gpus, nodes in sorted(sides, key=lambda s: (-len(s[0]), min(s[0]))):
        if any(gpus <= k for k, _ in kept):
            continue
        if any(gpus & k for k, _ in kept):
            continue
        kept.append((gpus, nodes))
    return kept
