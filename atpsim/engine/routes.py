"""Routes of the distinct (src, dst) pairs of a schedule, as CSR arrays over directed links.

Pairs are routed by the topology's router, one call each, except on a torus under
dimension-order routing and under up*/down* routing (fat trees, switches), where every pair is
routed at once (:func:`torus_routes`, :func:`~atpsim.engine.updown_routes.updown_routes`: the
same links in the same order, a few numpy passes instead of a Python call per hop; all-to-all
on a 32 x 32 torus or on 1024 GPUs of a fat tree routes a million pairs).
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from atpsim.collectives.protocols import routing_base
from atpsim.collectives.schedule import Steps
from atpsim.engine.updown_routes import updown_routes
from atpsim.topology.graph import Topology
from atpsim.topology.routing import DimensionOrderRouter


@dataclass(frozen=True, eq=False)
class PairRoutes:
    """Pair ``i`` runs ``src[i] -> dst[i]`` over links ``links[ptr[i]:ptr[i+1]]``.

    *latency_s* is the sum of the route's link latencies, *bottleneck_Bps* its slowest link.
    *keys* (``src * n_gpus + dst``, sorted) finds a pair's index.
    """

    n_gpus: int
    keys: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    latency_s: np.ndarray
    bottleneck_Bps: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def route_len(self) -> np.ndarray:
        return np.diff(self.ptr)

    def index(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Pair index of each ``(src[i], dst[i])``."""
        return np.searchsorted(self.keys, src * self.n_gpus + dst)

    def flow_links(self, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Incidence of flows on links: ``(position of the flow in pairs, link id)``."""
        lens = self.route_len[pairs]
        return np.repeat(np.arange(len(pairs)), lens), self.links_of(pairs, lens)

    def links_of(self, pairs: np.ndarray, lens: np.ndarray | None = None) -> np.ndarray:
        """The links of the routes of *pairs*, route after route (gathered
        :data:`GATHER_CHUNK_PAIRS` pairs at a time, so temporaries stay small: the routes of
        a 65,536-GPU torus are 33 M links)."""
        lens = self.route_len[pairs] if lens is None else lens
        out = np.empty(int(lens.sum()), dtype=self.links.dtype)
        at = 0
        for i in range(0, len(pairs), GATHER_CHUNK_PAIRS):
            chunk = lens[i:i + GATHER_CHUNK_PAIRS]
            n = int(chunk.sum())
            offsets = np.arange(n) - np.repeat(np.cumsum(chunk) - chunk, chunk)
            out[at:at + n] = self.links[np.repeat(self.ptr[pairs[i:i + GATHER_CHUNK_PAIRS]], chunk) + offsets]
            at += n
        return out


#: Pairs whose links are gathered per numpy pass (:meth:`PairRoutes.links_of`).
GATHER_CHUNK_PAIRS = 1 << 16


def link_dtype(n_links: int) -> type[np.signedinteger]:
    """The integer type route link ids are kept in: 32 bits where they fit (the routes of a
    65,536-GPU torus are 33 M links, 134 MB instead of 268 MB)."""
    return np.int32 if n_links < 2**31 else np.int64


def used_links(links: np.ndarray, n_links: int) -> np.ndarray:
    """The distinct ids in *links* (``0 .. n_links - 1``), sorted: ``np.unique`` by a mask,
    linear instead of a sort or hash of every route link."""
    seen = np.zeros(n_links, dtype=bool)
    seen[links] = True
    return np.flatnonzero(seen)


def subset(routes: PairRoutes, keys: np.ndarray) -> PairRoutes:
    """The routes of the pairs *keys* (distinct, sorted, all in *routes*), without routing;
    *routes* itself when it holds exactly those pairs."""
    if np.array_equal(keys, routes.keys):
        return routes
    pairs = routes.index(keys // routes.n_gpus, keys % routes.n_gpus)
    lens = routes.route_len[pairs]
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    return PairRoutes(routes.n_gpus, keys, routes.src[pairs], routes.dst[pairs], ptr,
                      routes.links_of(pairs, lens), routes.latency_s[pairs],
                      routes.bottleneck_Bps[pairs])


def route_pairs(topology: Topology, keys: np.ndarray) -> PairRoutes:
    """Route the pairs ``keys = src * n_gpus + dst`` (distinct, sorted) once each; the links
    of a pair set are kept per routing base (:func:`~atpsim.collectives.protocols.
    routing_base`), so a protocol's scaled copy of a topology reuses them."""
    n = topology.n_gpus
    src, dst = keys // n, keys % n
    ptr, links = _paths(topology, keys, src, dst)
    table = topology.links
    latency, bottleneck = np.zeros(len(keys)), np.full(len(keys), np.inf)
    for i in range(0, len(keys), GATHER_CHUNK_PAIRS):  # per chunk: no float copy of every link
        end = min(i + GATHER_CHUNK_PAIRS, len(keys))
        lo, hi = ptr[i], ptr[end]
        some = np.flatnonzero(ptr[i + 1:end + 1] > ptr[i:end])  # routes of at least one link
        if len(some):
            starts = ptr[i + some] - lo
            latency[i + some] = np.add.reduceat(table.latency_s[links[lo:hi]], starts)
            bottleneck[i + some] = np.minimum.reduceat(table.bandwidth_Bps[links[lo:hi]], starts)
    return PairRoutes(n, keys, src, dst, ptr, links, latency, bottleneck)


#: Path sets kept per routing base (most recent last).
_PATHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Path sets of more links are not kept (the 33 M links of a 65,536-GPU torus all-reduce),
#: and the least recent are dropped while those kept of a routing base hold more links in
#: all. A joint job routes each call's pairs several times (its plan's links, an episode's
#: flows, its members' nodes): the SageMaker job's 287 path sets are 110 distinct ones of
#: 56,000 links in all, and kept to 4 sets it routed the repeats again (0.12 s).
PATH_SET_MAX_LINKS = 1 << 23


def _paths(topology: Topology, keys: np.ndarray, src: np.ndarray, dst: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, links) of the pairs, from the routing base's recent path sets when there."""
    base = routing_base(topology)
    kept = _PATHS.setdefault(base, _PathSets())
    digest = (len(keys), hashlib.sha1(np.ascontiguousarray(keys, dtype=np.int64).tobytes()).hexdigest())
    if digest in kept.sets:
        kept.sets.move_to_end(digest)
        return kept.sets[digest]
    ptr, links = _routes_at_once(base, src, dst) or _routes_one_by_one(base, src, dst)
    found = ptr, links.astype(link_dtype(len(base.links)), copy=False)
    if len(links) > PATH_SET_MAX_LINKS:
        return found  # kept, they would stay in memory after the run that needed them
    kept.sets[digest] = found
    kept.links += len(links)
    while kept.links > PATH_SET_MAX_LINKS:
        kept.links -= len(kept.sets.popitem(last=False)[1][1])
    return found


@dataclass
class _PathSets:
    """A routing base's path sets kept (by digest of their pairs, most recent last) and their
    links in all."""

    sets: OrderedDict = field(default_factory=OrderedDict)
    links: int = 0


def _routes_at_once(topology: Topology, src: np.ndarray, dst: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """CSR (ptr, links) of all pairs in a few numpy passes where the router allows it (torus
    under dimension-order routing, up*/down* routing); else None."""
    hops = _torus_hops(topology)
    if hops is not None:
        return torus_routes(hops, src, dst)
    return updown_routes(topology, src, dst)


def _routes_one_by_one(topology: Topology, src: np.ndarray, dst: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, links) of the pairs, one router call each."""
    route = topology.route
    routes = [route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]
    lens = np.fromiter(map(len, routes), dtype=np.int64, count=len(routes))
    ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    links = np.fromiter(chain.from_iterable(routes), dtype=np.int64, count=int(ptr[-1]))
    return ptr, links


def pair_routes(topology: Topology, steps: Steps, within: PairRoutes | None = None) -> PairRoutes:
    """Route every distinct pair of *steps* once (each template looked at once); taken from
    *within* (routes of a superset of the pairs) when given."""
    n = topology.n_gpus
    parts = [t.src * n + t.dst for t, _ in steps.in_use()]
    keys = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    if within is not None and len(within) and len(keys):
        found = np.minimum(np.searchsorted(within.keys, keys), len(within) - 1)
        if np.array_equal(within.keys[found], keys):
            return subset(within, keys)
    return route_pairs(topology, keys)


@dataclass(frozen=True)
class TorusHops:
    """A torus of shape *dims* under dimension-order routing (GPU rank = row-major index of its
    coordinates): *link[r, axis, 0]* is the link from GPU ``r`` one step forward along *axis*
    (-1 where the axis has size 1), *link[r, axis, 1]* one step backward."""

    dims: tuple[int, ...]
    link: np.ndarray


def _torus_hops(topology: Topology) -> TorusHops | None:
    """The hop table of *topology* when its router is dimension-order and its GPUs sit at the
    coordinates their ranks name (what the router assumes); else None."""
    router = topology.router
    if not isinstance(router, DimensionOrderRouter) or not topology.n_gpus:
        return None
    dims = router.dims
    n = topology.n_gpus
    if int(np.prod(dims)) != n or topology.graph.number_of_nodes() != n:
        return None
    coords = np.array(np.unravel_index(np.arange(n), dims)).T.reshape(n, len(dims))
    nodes = topology.gpu_nodes
    data = topology.graph.nodes
    if any(tuple(data[nodes[r]].get("coords", ())) != tuple(coords[r]) for r in range(n)):
        return None
    strides = np.array([int(np.prod(dims[a + 1:])) for a in range(len(dims))], dtype=np.int64)
    link = np.full((n, len(dims), 2), -1, dtype=np.int64)
    try:
        for axis, size in enumerate(dims):
            if size == 1:
                continue
            for side, step in enumerate((1, -1)):
                nxt = np.arange(n) + (((coords[:, axis] + step) % size) - coords[:, axis]) * strides[axis]
                link[:, axis, side] = [topology.link_id(nodes[a], nodes[b])
                                       for a, b in zip(range(n), nxt.tolist(), strict=True)]
    except KeyError:
        return None
    return TorusHops(tuple(dims), link.astype(link_dtype(len(topology.links))))


#: Pairs routed per numpy pass (bounds the temporaries to a few hops per pair in the chunk).
TORUS_CHUNK_PAIRS = 1 << 16


def torus_routes(hops: TorusHops, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, links) of the dimension-order routes ``src[i] -> dst[i]``: along each axis in
    turn, the shorter way round (forward on a tie), as
    :class:`~atpsim.topology.routing.DimensionOrderRouter` routes them."""
    ptr = np.zeros(len(src) + 1, dtype=np.int64)
    for i in range(0, len(src), TORUS_CHUNK_PAIRS):
        legs = _legs(hops.dims, src[i:i + TORUS_CHUNK_PAIRS], dst[i:i + TORUS_CHUNK_PAIRS])
        ptr[i + 1:i + 1 + len(legs[3])] = legs[3].sum(axis=1)
    np.cumsum(ptr, out=ptr)
    links = np.empty(int(ptr[-1]), dtype=hops.link.dtype)  # filled in place: no second copy
    for i in range(0, len(src), TORUS_CHUNK_PAIRS):
        end = min(i + TORUS_CHUNK_PAIRS, len(src))
        links[ptr[i]:ptr[end]] = _torus_links(hops, src[i:end], dst[i:end])
    return ptr, links


def _legs(dims: tuple[int, ...], src: np.ndarray, dst: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Coordinates of the ends, whether each axis goes backward, and the hops along it."""
    here = np.array(np.unravel_index(src, dims), dtype=np.int64).reshape(len(dims), len(src)).T
    there = np.array(np.unravel_index(dst, dims), dtype=np.int64).reshape(len(dims), len(dst)).T
    size = np.array(dims, dtype=np.int64)
    forward = (there - here) % size
    back = forward > size - forward
    return here, there, back, np.where(back, size - forward, forward)


def _torus_links(hops: TorusHops, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The links of the routes, pair after pair."""
    dims = hops.dims
    size = np.array(dims, dtype=np.int64)
    here, there, back, count = _legs(dims, src, dst)
    strides = np.array([int(np.prod(dims[a + 1:])) for a in range(len(dims))], dtype=np.int64)
    # the rank where each (pair, axis) leg starts: axes before it corrected, the rest not yet
    leg_start = np.zeros_like(here)
    for axis in range(len(dims)):
        done = (there[:, :axis] * strides[:axis]).sum(axis=1)
        leg_start[:, axis] = done + (here[:, axis:] * strides[axis:]).sum(axis=1)
    legs = count.ravel()
    j = np.arange(int(legs.sum())) - np.repeat(np.cumsum(legs) - legs, legs)
    backward = back.ravel()
    at = here.ravel()
    along = np.tile(np.arange(len(dims)), len(src))
    position = (np.repeat(at, legs) + np.where(np.repeat(backward, legs), -j, j)) % np.repeat(size[along], legs)
    rank = np.repeat(leg_start.ravel() - at * strides[along], legs) + position * np.repeat(strides[along], legs)
    flat = np.repeat(along * 2 + backward, legs) + rank * (2 * len(dims))
    return hops.link.ravel()[flat]
