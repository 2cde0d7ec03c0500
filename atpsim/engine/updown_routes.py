"""Up*/down* routes of many GPU pairs at once, the same links in the same order as
:class:`~atpsim.topology.routing.UpDownRouter` (all-to-all on 1024 GPUs of a fat tree routes a
million pairs; one Python call per pair dominated the run).

All pairs advance one hop per pass, every rule of the router applied to arrays:

- a GPU linked directly to the destination takes that link (first hop only);
- below the current node or not is a lookup of ``dst * V + node`` in the sorted keys of every
  (GPU, ancestor-or-self) pair (:attr:`_Fabric.anc_keys`);
- climbing, the router's candidate lists (ups with the destination below, else ups that lead
  higher, else peers with it below, else peers, else ups), then the fastest link, then the
  fewest GPUs below, then ``choices[dst % len(choices)]``: over a padded row of each node's up
  and peer neighbours, in the router's list order;
- descending, the destination when adjacent, else the children with it below (the ancestors
  of the destination that hang below the node), best as above, ``choices[src % len]`` in the
  order of the node's children.

The choices depend on (node, destination) only, so each pass works on the distinct pairs of
those (a leaf and a destination, not every source under the leaf) and spreads the answer.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from atpsim.topology.graph import Topology
from atpsim.topology.routing import UpDownRouter, UpDownState


class _Uncovered(Exception):
    """The walk met something the router would report as an error: route pair by pair."""


def _padded(rows: list[list[int]], fill: int = -1) -> np.ndarray:
    """Rows of different lengths as one array, *fill* after each row's end."""
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), max(width, 1)), fill, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


class _Fabric:
    """Node-indexed arrays of the router's state for one topology (module docstring)."""

    def __init__(self, topology: Topology, state: UpDownState):
        names = topology.nodes
        index = topology.node_index
        self.n_nodes = n = len(names)
        self.gpu = np.array([index[g] for g in topology.gpu_nodes], dtype=np.int64)
        below = [np.fromiter(state.below[name], dtype=np.int64) for name in names]
        self.below_size = np.array([len(b) for b in below], dtype=np.int64)
        self.anc_keys = np.sort(np.concatenate(
            [b * n + v for v, b in enumerate(below)] or [np.zeros(0, dtype=np.int64)]))
        self._below_bits(below, len(self.gpu))
        near = [[index[u] for u in state.ups[name] + state.peers[name]] for name in names]
        self.near = _padded(near)
        self.near_width = np.array([len(row) for row in near], dtype=np.int64)
        self.is_up = np.arange(self.near.shape[1])[None, :] < np.array(
            [len(state.ups[name]) for name in names])[:, None]
        self.near_bw = self._bandwidths(state, names, self.near)
        self.leads_higher = np.array([bool(state.ups[name] or state.peers[name]) for name in names])
        self._downs(state, names, index)
        pairs = np.array(list(topology._link_id), dtype=np.int64).reshape(-1, 2)  # node indices
        keys = pairs[:, 0] * n + pairs[:, 1]
        order = np.argsort(keys)
        self.link_keys = keys[order]
        self.link_ids = np.fromiter(topology._link_id.values(), dtype=np.int64)[order]

    @staticmethod
    def _bandwidths(state: UpDownState, names: list[Any], near: np.ndarray) -> np.ndarray:
        out = np.zeros(near.shape)
        for v, row in enumerate(near.tolist()):
            for k, u in enumerate(row):
                if u >= 0:
                    out[v, k] = state.bandwidth[(names[v], names[u])]
        return out

    def _downs(self, state: UpDownState, names: list[Any], index: dict[Any, int]) -> None:
        """Sorted keys ``node * V + child`` of every down link, with the child's place in the
        node's list and the link's bandwidth."""
        keys, place, bandwidth = [], [], []
        for v, name in enumerate(names):
            for k, child in enumerate(state.downs[name]):
                keys.append(v * self.n_nodes + index[child])
                place.append(k)
                bandwidth.append(state.bandwidth[(name, child)])
        order = np.argsort(np.array(keys, dtype=np.int64))
        self.down_keys = np.array(keys, dtype=np.int64)[order]
        self.down_place = np.array(place, dtype=np.int64)[order]
        self.down_bw = np.array(bandwidth, dtype=np.float64)[order]

    def _below_bits(self, below: list[np.ndarray], n_gpus: int) -> None:
        """Who is below each node: its one rank where it has at most one (-1: none), else a
        row of bits (GPUs and NICs need no row; the switches above them hold a few)."""
        self.single = np.array([b[0] if len(b) == 1 else -1 for b in below], dtype=np.int64)
        many = np.flatnonzero(self.below_size > 1)
        self.row = np.full(self.n_nodes, -1, dtype=np.int64)
        self.row[many] = np.arange(len(many))
        self.bits = np.zeros((len(many), (n_gpus + 7) // 8), dtype=np.uint8)
        if len(many):
            rows = np.repeat(np.arange(len(many)), self.below_size[many])
            ranks = np.concatenate([below[v] for v in many.tolist()])
            np.bitwise_or.at(self.bits, (rows, ranks >> 3), (1 << (ranks & 7)).astype(np.uint8))

    def has_below(self, node: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Whether GPU *rank* is below *node* (the node itself included), elementwise."""
        node, rank = np.broadcast_arrays(node, rank)
        out = self.single[node] == rank
        row = self.row[node]
        many = row >= 0
        if many.any():
            r = rank[many]
            out[many] = (self.bits[row[many], r >> 3] >> (r & 7)) & 1 == 1
        return out

    def adjacent(self, node: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Whether *node* and GPU *rank* are joined by a link, elementwise."""
        return _member(self.link_keys, node * self.n_nodes + self.gpu[rank])

    def link(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directed link ids of the hops ``u[i] -> v[i]`` (node indices)."""
        keys = u * self.n_nodes + v
        at = np.minimum(np.searchsorted(self.link_keys, keys), len(self.link_keys) - 1)
        if not np.array_equal(self.link_keys[at], keys):
            raise _Uncovered("a hop without a link")
        return self.link_ids[at]


def _member(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of *keys* is in *sorted_keys*."""
    if not len(sorted_keys):
        return np.zeros(keys.shape, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


#: The arrays of each topology routed so far (0.3 s to build at 16,384 GPUs).
_FABRICS: weakref.WeakKeyDictionary[Topology, _Fabric] = weakref.WeakKeyDictionary()


def updown_routes(topology: Topology, src: np.ndarray, dst: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """CSR (ptr, links) of the routes ``src[i] -> dst[i]`` (GPU ranks) when *topology* routes
    up*/down*; None for any other router, or when the router would fail on some pair (the
    per-pair router then raises its own error)."""
    if type(topology.router) is not UpDownRouter or not len(src):
        return None
    fabric = _FABRICS.get(topology)
    if fabric is None:
        fabric = _FABRICS[topology] = _Fabric(topology, topology.router._prepare(topology))
    try:
        hops = _walk(fabric, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
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
    while True:
        moving = np.flatnonzero(node != target)
        if not len(moving):
            break
        if len(columns) > fabric.n_nodes:
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
    """The next node of every pair, as the router takes it."""
    nxt = np.empty(len(node), dtype=np.int64)
    direct = fabric.adjacent(node, dst) if first else np.zeros(len(node), dtype=bool)
    nxt[direct] = fabric.gpu[dst[direct]]
    down = ~direct & fabric.has_below(node, dst)
    up = ~direct & ~down
    if up.any():
        nxt[up] = _by_combination(fabric, node[up], dst[up], None)
    if down.any():
        near = fabric.adjacent(node, dst) & down
        nxt[near] = fabric.gpu[dst[near]]
        rest = down & ~near
        nxt[rest] = _by_combination(fabric, node[rest], dst[rest], src[rest])
    return nxt


def _by_combination(fabric: _Fabric, node: np.ndarray, dst: np.ndarray,
                    src: np.ndarray | None) -> np.ndarray:
    """Next hops up (*src* None) or down, the choices worked out once per distinct (node,
    destination): ``choices[dst % k]`` up, ``choices[src % k]`` down."""
    if not len(node):
        return node
    keys, first, inverse = np.unique(node * fabric.n_nodes + dst, return_index=True,
                                     return_inverse=True)
    inverse = inverse.reshape(-1)
    at, rank = node[first], dst[first]
    if src is None:
        hop = np.empty(len(keys), dtype=np.int64)
        width = fabric.near_width[at]
        for w in np.unique(width).tolist():  # rows as wide as their node's neighbours
            rows = np.flatnonzero(width == w)
            choices, count = _climb_choices(fabric, at[rows], rank[rows], max(w, 1))
            hop[rows] = choices[np.arange(len(rows)), rank[rows] % count]
        return hop[inverse]
    choices, count = _down_choices(fabric, at, rank)
    return choices[inverse, src % count[inverse]]


def _best(mask: np.ndarray, bandwidth: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The router's ``best``: among the candidates (*mask*), those on the fastest link, and
    among them those with the fewest GPUs below."""
    fastest = np.where(mask, bandwidth, -np.inf).max(axis=1, keepdims=True)
    mask = mask & (bandwidth == fastest)
    fewest = np.where(mask, size, np.iinfo(np.int64).max).min(axis=1, keepdims=True)
    return mask & (size == fewest)


def _in_order(mask: np.ndarray, nodes: np.ndarray, place: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's chosen *nodes* by *place* (the router's list order) first, and their count;
    a row with none is the router's error."""
    count = mask.sum(axis=1)
    if not count.all():
        raise _Uncovered("no hop to take")
    order = np.argsort(np.where(mask, place, np.iinfo(np.int64).max), axis=1, kind="stable")
    return np.take_along_axis(nodes, order, axis=1), count


def _climb_choices(fabric: _Fabric, node: np.ndarray, rank: np.ndarray, width: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The router's ``climb_choices`` for each (node, destination), in its order (over the
    first *width* of the nodes' up and peer neighbours)."""
    near = fabric.near[node, :width]
    valid = near >= 0
    is_up = fabric.is_up[node, :width] & valid
    is_peer = valid & ~is_up
    below = valid & fabric.has_below(np.maximum(near, 0), rank[:, None])
    higher = is_up & fabric.leads_higher[np.maximum(near, 0)]
    mask = np.zeros(near.shape, dtype=bool)
    open_rows = np.ones(len(node), dtype=bool)
    for tier in (below & is_up, higher, below & is_peer, is_peer, is_up):
        take = open_rows & tier.any(axis=1)
        mask[take] = tier[take]
        open_rows &= ~take
    size = fabric.below_size[np.maximum(near, 0)]
    mask = _best(mask, fabric.near_bw[node, :width], size)
    return _in_order(mask, near, np.broadcast_to(np.arange(near.shape[1]), near.shape))


def _down_choices(fabric: _Fabric, node: np.ndarray, rank: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The router's ``downs_towards`` for each (node, destination): the destination's
    ancestors that are children of the node, best, in the order of the node's children."""
    n = fabric.n_nodes
    if not len(fabric.down_keys):
        raise _Uncovered("no down links")
    lo = np.searchsorted(fabric.anc_keys, rank * n)
    hi = np.searchsorted(fabric.anc_keys, (rank + 1) * n)
    width = int((hi - lo).max())
    column = np.arange(width)
    inside = column[None, :] < (hi - lo)[:, None]
    listed = fabric.anc_keys[np.minimum(lo[:, None] + column, len(fabric.anc_keys) - 1)]
    ancestors = np.where(inside, listed % n, 0)
    keys = node[:, None] * n + ancestors
    at = np.minimum(np.searchsorted(fabric.down_keys, keys), len(fabric.down_keys) - 1)
    child = inside & (fabric.down_keys[at] == keys)
    mask = _best(child, fabric.down_bw[at], fabric.below_size[ancestors])
    return _in_order(mask, ancestors, fabric.down_place[at])
