"""Plain-data summaries of a topology and of one route, for ``atpsim topo show`` / ``route``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class LinkGroup:
    """Full-duplex links of one kind, per-direction bandwidth and latency, and how many."""

    kind: str
    bandwidth_Bps: float
    latency_s: float
    count: int


@dataclass(frozen=True)
class TopologySummary:
    name: str
    description: str
    n_gpus: int
    nodes_by_kind: dict[str, int]
    links: list[LinkGroup]
    router: str
    meta: dict[str, Any]
    wiring: list[str]


@dataclass(frozen=True)
class Hop:
    src: Any
    dst: Any
    kind: str
    bandwidth_Bps: float
    latency_s: float


@dataclass(frozen=True)
class RouteSummary:
    src_rank: int
    dst_rank: int
    hops: list[Hop]
    latency_s: float
    bottleneck_Bps: float


def summarize(topology: Topology) -> TopologySummary:
    """Counts of nodes by kind and of links by (kind, bandwidth, latency), sorted for reading."""
    nodes = Counter(data["kind"] for _, data in topology.graph.nodes(data=True))
    groups = Counter(
        (data["kind"], float(data["bandwidth_Bps"]), float(data.get("latency_s", 0.0)))
        for _, _, data in topology.graph.edges(data=True)
    )
    links = [LinkGroup(k, bw, lat, n) for (k, bw, lat), n in sorted(groups.items())]
    return TopologySummary(
        topology.name,
        topology.description,
        topology.n_gpus,
        dict(sorted(nodes.items(), key=lambda kv: (kv[0] != "gpu", kv[0]))),
        links,
        getattr(topology.router, "name", type(topology.router).__name__),
        dict(topology.meta),
        wiring(topology) if topology.graph.number_of_nodes() <= WIRING_MAX_NODES else [],
    )


#: Small graphs also list who is wired to whom (``atpsim topo show``).
WIRING_MAX_NODES = 48


def wiring(topology: Topology) -> list[str]:
    """One line per switch or host node ('pcie_switch0 (pcie_switch): gpu0 gpu1 cpu0'), then the
    direct GPU-to-GPU links ('gpu0 -- gpu1 (nvlink)')."""
    graph = topology.graph
    lines = []
    for node, data in graph.nodes(data=True):
        if data["kind"] != "gpu":
            lines.append(f"{node} ({data['kind']}): " + " ".join(map(str, graph.adj[node])))
    for u, v, data in graph.edges(data=True):
        if graph.nodes[u]["kind"] == "gpu" and graph.nodes[v]["kind"] == "gpu":
            lines.append(f"{u} -- {v} ({data['kind']})")
    return lines


def describe_route(topology: Topology, src_rank: int, dst_rank: int) -> RouteSummary:
    """The hops from GPU *src_rank* to GPU *dst_rank*, their sum latency and bottleneck."""
    nodes = topology.route_nodes(src_rank, dst_rank)
    route = topology.route(src_rank, dst_rank)
    links = topology.links
    hops = [
        Hop(u, v, links.kind[i], float(links.bandwidth_Bps[i]), float(links.latency_s[i]))
        for (u, v), i in zip(pairwise(nodes), route, strict=True)
    ]
    return RouteSummary(
        src_rank, dst_rank, hops, topology.path_latency_s(route), topology.bottleneck_Bps(route)
    )
