"""Routes of the distinct (src, dst) pairs of a schedule, as CSR arrays over directed links."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from atpsim.collectives.schedule import Steps
from atpsim.topology.graph import Topology


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
        starts, lens = self.ptr[pairs], self.route_len[pairs]
        owner = np.repeat(np.arange(len(pairs)), lens)
        offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        return owner, self.links[np.repeat(starts, lens) + offsets]


def subset(routes: PairRoutes, keys: np.ndarray) -> PairRoutes:
    """The routes of the pairs *keys* (distinct, sorted, all in *routes*), without routing."""
    pairs = routes.index(keys // routes.n_gpus, keys % routes.n_gpus)
    lens = routes.route_len[pairs]
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    _, links = routes.flow_links(pairs)
    return PairRoutes(routes.n_gpus, keys, routes.src[pairs], routes.dst[pairs], ptr, links,
                      routes.latency_s[pairs], routes.bottleneck_Bps[pairs])


def route_pairs(topology: Topology, keys: np.ndarray) -> PairRoutes:
    """Route the pairs ``keys = src * n_gpus + dst`` (distinct, sorted) once each."""
    n = topology.n_gpus
    src, dst = keys // n, keys % n
    route = topology.route
    routes = [route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]
    lens = np.fromiter(map(len, routes), dtype=np.int64, count=len(routes))
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    links = np.fromiter(chain.from_iterable(routes), dtype=np.int64, count=int(ptr[-1]))
    table = topology.links
    if len(keys):
        latency = np.add.reduceat(table.latency_s[links], ptr[:-1])
        bottleneck = np.minimum.reduceat(table.bandwidth_Bps[links], ptr[:-1])
    else:
        latency = bottleneck = np.zeros(0)
    return PairRoutes(n, keys, src, dst, ptr, links, latency, bottleneck)


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
