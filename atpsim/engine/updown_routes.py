"""Up*/down* routes of many GPU pairs at once, the same links in the same order as
:class:`~atpsim.topology.routing.UpDownRouter` (all-to-all on 1024 GPUs of a fat tree routes a
million pairs; one Python call per pair dominated the run).

All pairs advance one hop per pass. The router's next hop depends on the current node, the
destination and (going down) the source rank modulo the number of choices, so each pass groups
the pairs by node and asks the router's own choice functions once per node and distinct
destination (climbing: once per set of neighbours with the destination below), then picks for
every pair with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from atpsim.topology.graph import Topology
from atpsim.topology.routing import UpDownRouter, _UpDownState


class _Uncovered(Exception):
    """The walk met something the router would report as an error: route pair by pair."""


class _Fabric:
    """Node-indexed views of the router's state for one topology."""

    def __init__(self, topology: Topology, state: _UpDownState):
        self.topology, self.state = topology, state
        self.names = topology.nodes
        self.gpu = np.array([topology.node_index[g] for g in topology.gpu_nodes], dtype=np.int64)
        self._below: dict[int, np.ndarray] = {}
        pairs = np.array(list(topology._link_id), dtype=np.int64).reshape(-1, 2)
        keys = pairs[:, 0] * len(self.names) + pairs[:, 1]
        order = np.argsort(keys)
        self.link_keys = keys[order]
        self.link_ids = np.fromiter(topology._link_id.values(), dtype=np.int64)[order]

    def has_below(self, node: int, ranks: np.ndarray) -> np.ndarray:
        """Whether each of GPU *ranks* is below *node* (the node itself included)."""
        below = self._below.get(node)
        if below is None:
            below = np.array(sorted(self.state.below[self.names[node]]), dtype=np.int64)
            self._below[node] = below
        if not len(below):
            return np.zeros(len(ranks), dtype=bool)
        at = np.minimum(np.searchsorted(below, ranks), len(below) - 1)
        return below[at] == ranks

    def adjacent(self, node: int, ranks: np.ndarray) -> np.ndarray:
        """Whether GPU *ranks* are joined to *node* by a link."""
        near = self.state.adjacent[self.names[node]]
        return np.fromiter((self.topology.gpu_nodes[r] in near for r in ranks.tolist()),
                           dtype=bool, count=len(ranks))

    def link(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directed link ids of the hops ``u[i] -> v[i]`` (node indices)."""
        keys = u * len(self.names) + v
        at = np.minimum(np.searchsorted(self.link_keys, keys), len(self.link_keys) - 1)
        if not np.array_equal(self.link_keys[at], keys):
            raise _Uncovered("a hop without a link")
        return self.link_ids[at]

    def index(self, names: list[Any]) -> np.ndarray:
        return np.array([self.topology.node_index[n] for n in names], dtype=np.int64)


def updown_routes(topology: Topology, src: np.ndarray, dst: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """CSR (ptr, links) of the routes ``src[i] -> dst[i]`` (GPU ranks) when *topology* routes
    up*/down*; None for any other router, or when the router would fail on some pair (the
    per-pair router then raises its own error)."""
    if type(topology.router) is not UpDownRouter or not len(src):
        return None
    fabric = _Fabric(topology, topology.router._prepare(topology))
    try:
        hops = _walk(fabric, src, dst)
    except _Uncovered:
        return None
    lens = (hops >= 0).sum(axis=1)
    ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    return ptr, hops[hops >= 0]


def _walk(fabric: _Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Link ids hop by hop, a row per pair, -1 after the pair has arrived."""
    node, target = fabric.gpu[src], fabric.gpu[dst]
    columns: list[np.ndarray] = []
    limit = len(fabric.names)
    while True:
        moving = np.flatnonzero(node != target)
        if not len(moving):
            break
        if len(columns) > limit:
            raise _Uncovered("a route that does not terminate")
        nxt = _step(fabric, node[moving], dst[moving], src[moving], first=not columns)
        column = np.full(len(src), -1, dtype=np.int64)
        column[moving] = fabric.link(node[moving], nxt)
        columns.append(column)
        node = node.copy()
        node[moving] = nxt
    return np.stack(columns, axis=1) if columns else np.zeros((len(src), 0), dtype=np.int64)


def _step(fabric: _Fabric, node: np.ndarray, dst: np.ndarray, src: np.ndarray,
          first: bool) -> np.ndarray:
    """The next node of every pair, the pairs grouped by their current node."""
    order = np.argsort(node, kind="stable")
    nodes, starts = np.unique(node[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    nxt = np.empty(len(node), dtype=np.int64)
    for at, start, end in zip(nodes.tolist(), starts.tolist(), ends.tolist(), strict=True):
        pick = order[start:end]
        nxt[pick] = _next_hops(fabric, at, dst[pick], src[pick], first)
    return nxt


def _next_hops(fabric: _Fabric, node: int, dst: np.ndarray, src: np.ndarray,
               first: bool) -> np.ndarray:
    """As the router: from the source straight to an adjacent destination; else up until the
    destination is below, then down."""
    out = np.empty(len(dst), dtype=np.int64)
    direct = fabric.adjacent(node, dst) if first else np.zeros(len(dst), dtype=bool)
    out[direct] = fabric.gpu[dst[direct]]
    up = ~direct & ~fabric.has_below(node, dst)
    down = ~direct & ~up
    if up.any():
        out[up] = _climb(fabric, node, dst[up])
    if down.any():
        out[down] = _descend(fabric, node, dst[down], src[down])
    return out


def _climb(fabric: _Fabric, node: int, dst: np.ndarray) -> np.ndarray:
    """Hops up from *node*: the router's choices, asked once per pattern of which up and peer
    neighbours have the destination below, then ``choices[dst % len(choices)]``."""
    state, name = fabric.state, fabric.names[node]
    ranks, inverse = np.unique(dst, return_inverse=True)
    near = fabric.index(state.ups[name] + state.peers[name])
    pattern = np.array([fabric.has_below(int(n), ranks) for n in near], dtype=bool).reshape(
        len(near), len(ranks))
    _, first_of, group = np.unique(pattern, axis=1, return_index=True, return_inverse=True)
    hop = np.empty(len(ranks), dtype=np.int64)
    group = group.reshape(-1)
    for g, rep in enumerate(first_of.tolist()):
        try:
            choices = fabric.index(UpDownRouter.climb_choices(state, name, int(ranks[rep])))
        except RuntimeError as error:
            raise _Uncovered(str(error)) from error
        members = group == g
        hop[members] = choices[ranks[members] % len(choices)]
    return hop[inverse]


def _descend(fabric: _Fabric, node: int, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Hops down from *node*: the destination when adjacent, else the router's best children
    with it below, ``choices[src % len(choices)]``."""
    state, name = fabric.state, fabric.names[node]
    ranks, inverse = np.unique(dst, return_inverse=True)
    adjacent = fabric.adjacent(node, ranks)
    rows = [[fabric.topology.gpu_nodes[r]] if near else state.downs_towards(name, r)
            for r, near in zip(ranks.tolist(), adjacent.tolist(), strict=True)]
    lens = np.array([len(row) for row in rows], dtype=np.int64)
    table = np.zeros((len(rows), int(lens.max())), dtype=np.int64)
    for i, row in enumerate(rows):
        table[i, :len(row)] = fabric.index(row)
    return table[inverse, src % lens[inverse]]
