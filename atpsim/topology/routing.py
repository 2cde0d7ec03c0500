"""Deterministic routers: a router maps (topology, source node, destination node) to a path.

Routers are small pluggable objects so that a builder can pick the one that fits its shape:
shortest path by hop count for small irregular graphs, dimension-order routing on tori,
up*/down* (tree) routing with destination-mod-k uplink choice on switched fabrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import networkx as nx

if TYPE_CHECKING:
    from atpsim.topology.graph import Topology


class Router(Protocol):
    """Anything with ``path(topology, src, dst) -> [src, ..., dst]`` (node names)."""

    name: str

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]: ...


class ShortestPathRouter:
    """Fewest hops; ties broken by networkx's BFS order, which follows insertion order."""

    name = "shortest"

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]:
        return list(nx.shortest_path(topology.graph, src, dst))
