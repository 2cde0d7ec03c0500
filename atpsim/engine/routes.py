"""Routes of the distinct (src, dst) pairs of a schedule, as CSR arrays over directed links."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Step
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


def distinct_arrays(steps: Iterable[Step], name: str) -> list[np.ndarray]:
    seen: dict[int, np.ndarray] = {}
    for s in steps:
        array = getattr(s, name)
        seen.setdefault(id(array), array)
    return list(seen.values())


def pair_routes(topology: Topology, steps: Iterable[Step]) -> PairRoutes:
    """Route every distinct pair of *steps* once (steps sharing arrays are looked at once)."""
    n = topology.n_gpus
    by_id: dict[tuple[int, int], np.ndarray] = {}
    for s in steps:
        by_id.setdefault((id(s.src), id(s.dst)), s.src * n + s.dst)
    keys = np.unique(np.concatenate(list(by_id.values()))) if by_id else np.zeros(0, np.int64)
    src, dst = keys // n, keys % n
    routes = [topology.route(int(a), int(b)) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    links = np.fromiter((link for r in routes for link in r), dtype=np.int64, count=int(ptr[-1]))
    table = topology.links
    if len(keys):
        latency = np.add.reduceat(table.latency_s[links], ptr[:-1])
        bottleneck = np.minimum.reduceat(table.bandwidth_Bps[links], ptr[:-1])
    else:
        latency = bottleneck = np.zeros(0)
    return PairRoutes(n, keys, src, dst, ptr, links, latency, bottleneck)
