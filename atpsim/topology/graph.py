"""The link graph: endpoints and switches joined by full-duplex links.

A :class:`Topology` wraps an undirected ``networkx.Graph``. Node attribute ``kind`` is one of
:data:`NODE_KINDS`; GPU nodes also carry ``rank`` (0..n-1). Every edge is one full-duplex
link with ``kind`` (one of :data:`LINK_KINDS`), ``bandwidth_Bps`` per direction and
``latency_s``. The engine sees *directed* links: each edge becomes two, one per direction,
each with the full per-direction bandwidth, numbered in :class:`LinkTable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import networkx as nx
import numpy as np

from atpsim.errors import TopologyError
from atpsim.topology.routing import Router, ShortestPathRouter

NODE_KINDS = frozenset(
    {
        "gpu",
        "cpu",  # CPU socket / host memory: where an NCCL_P2P_DISABLE=1 copy is staged
        "pcie_switch",
        "nvswitch",
        "nic",
        "ib_leaf",
        "ib_spine",
        "nvl_switch",  # NVLink-Network switch
        "switch",  # generic switch of a custom graph
    }
)
LINK_KINDS = frozenset(
    {"pcie", "socket", "nvlink", "nvlink_network", "ib", "torus", "host", "custom"}
)


@dataclass(frozen=True)
class LinkTable:
    """Directed links as parallel arrays; link id ``i`` runs ``src[i] -> dst[i]``."""

    src: np.ndarray  # node index (int64)
    dst: np.ndarray
    bandwidth_Bps: np.ndarray  # float64, bytes/s in this direction
    latency_s: np.ndarray  # float64
    kind: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.src)


class Topology:
    """A GPU interconnect as a link graph plus a deterministic router.

    *graph* is validated here (kinds, positive bandwidths, GPU ranks 0..n-1, connected) so
    that a builder or a custom YAML file fails fast with the offending node or edge named.
    """

    def __init__(
        self,
        name: str,
        graph: nx.Graph,
        router: Router | None = None,
        description: str = "",
        meta: dict[str, Any] | None = None,
    ):
        _validate_graph(name, graph)
        self.name = name
        self.graph = graph
        self.description = description
        self.meta = dict(meta or {})
        self.router: Router = router or ShortestPathRouter()
        self.nodes: list[Any] = list(graph.nodes)
        self.node_index: dict[Any, int] = {n: i for i, n in enumerate(self.nodes)}
        self.gpu_nodes: list[Any] = _gpus_by_rank(graph)
        self.links, self._link_id = _build_link_table(graph, self.node_index)
        self._route_cache: dict[tuple[int, int], tuple[int, ...]] = {}

    # -- sizes -----------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        return len(self.gpu_nodes)

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, gpus={self.n_gpus}, links={self.graph.number_of_edges()})"

    # -- links -----------------------------------------------------------------------
    def link_id(self, u: Any, v: Any) -> int:
        """The directed link id of the hop from node *u* to node *v*."""
        return self._link_id[(self.node_index[u], self.node_index[v])]

    def gpu(self, rank: int) -> Any:
        """The node of GPU *rank*; a clear error for a rank that does not exist."""
        if not 0 <= rank < self.n_gpus:
            raise TopologyError(
                f"GPU rank {rank} out of range 0..{self.n_gpus - 1}", source=self.name
            )
        return self.gpu_nodes[rank]

    # -- routing ---------------------------------------------------------------------
    def route_nodes(self, src_rank: int, dst_rank: int) -> list[Any]:
        """The nodes a transfer from GPU *src_rank* to GPU *dst_rank* visits, ends included."""
        return self.router.path(self, self.gpu(src_rank), self.gpu(dst_rank))

    def route(self, src_rank: int, dst_rank: int) -> tuple[int, ...]:
        """Directed link ids from GPU *src_rank* to GPU *dst_rank* (cached; deterministic)."""
        key = (src_rank, dst_rank)
        cached = self._route_cache.get(key)
        if cached is None:
            path = self.route_nodes(src_rank, dst_rank)
            cached = tuple(self.link_id(u, v) for u, v in pairwise(path))
            self._route_cache[key] = cached
        return cached

    def path_latency_s(self, route: tuple[int, ...]) -> float:
        """Sum of the latencies of the links on *route* (seconds)."""
        return float(self.links.latency_s[list(route)].sum()) if route else 0.0

    def bottleneck_Bps(self, route: tuple[int, ...]) -> float:
        """The smallest per-direction bandwidth on *route* (bytes/s)."""
        return float(self.links.bandwidth_Bps[list(route)].min()) if route else float("inf")


def _validate_graph(name: str, graph: nx.Graph) -> None:
    if graph.number_of_nodes() == 0:
        raise TopologyError("the graph has no nodes", source=name)
    for node, data in graph.nodes(data=True):
        if data.get("kind") not in NODE_KINDS:
            raise TopologyError(
                f"node kind {data.get('kind')!r} is not one of {sorted(NODE_KINDS)}",
                source=name,
                key=f"nodes[{node}].kind",
            )
    for u, v, data in graph.edges(data=True):
        key = f"links[{u}-{v}]"
        if data.get("kind") not in LINK_KINDS:
            raise TopologyError(
                f"link kind {data.get('kind')!r} is not one of {sorted(LINK_KINDS)}",
                source=name,
                key=f"{key}.kind",
            )
        bandwidth = data.get("bandwidth_Bps")
        if not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
            raise TopologyError(
                f"expected a positive bandwidth in bytes/s, got {bandwidth!r}",
                source=name,
                key=f"{key}.bandwidth",
            )
        latency = data.get("latency_s", 0.0)
        if not isinstance(latency, (int, float)) or latency < 0:
            raise TopologyError(
                f"expected a latency >= 0 s, got {latency!r}", source=name, key=f"{key}.latency"
            )
    if not nx.is_connected(graph):
        parts = sorted(nx.connected_components(graph), key=len)
        raise TopologyError(
            f"the graph is disconnected ({len(parts)} parts; e.g. {sorted(map(str, parts[0]))[:4]}"
            " cannot reach the rest); expected every node reachable",
            source=name,
            key="links",
        )


def _gpus_by_rank(graph: nx.Graph) -> list[Any]:
    gpus = [
        (data.get("rank"), node) for node, data in graph.nodes(data=True) if data["kind"] == "gpu"
    ]
    if not gpus:
        raise TopologyError("the graph has no GPU nodes", key="nodes")
    ranks = sorted(rank for rank, _ in gpus if isinstance(rank, int))
    if ranks != list(range(len(gpus))):
        raise TopologyError(
            "expected GPU nodes to carry ranks 0..n-1 exactly once", key="nodes[*].rank"
        )
    return [node for _, node in sorted(gpus, key=lambda item: item[0])]


def _build_link_table(
    graph: nx.Graph, node_index: dict[Any, int]
) -> tuple[LinkTable, dict[tuple[int, int], int]]:
    n_edges = graph.number_of_edges()
    src = np.empty(2 * n_edges, dtype=np.int64)
    dst = np.empty(2 * n_edges, dtype=np.int64)
    bandwidth = np.empty(2 * n_edges, dtype=np.float64)
    latency = np.empty(2 * n_edges, dtype=np.float64)
    kinds: list[str] = []
    ids: dict[tuple[int, int], int] = {}
    for i, (u, v, data) in enumerate(graph.edges(data=True)):
        a, b = node_index[u], node_index[v]
        for j, (s, d) in enumerate(((a, b), (b, a))):
            k = 2 * i + j
            src[k], dst[k] = s, d
            bandwidth[k] = float(data["bandwidth_Bps"])
            latency[k] = float(data.get("latency_s", 0.0))
            kinds.append(data["kind"])
            ids[(s, d)] = k
    return LinkTable(src, dst, bandwidth, latency, tuple(kinds)), ids
