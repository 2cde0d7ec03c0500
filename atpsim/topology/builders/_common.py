"""Graph pieces every builder shares: GPU nodes, links, and a switch joined to its members.
(Parameter checks live in :mod:`atpsim.topology.params`.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx


def add_gpu(graph: nx.Graph, rank: int, **attrs: Any) -> str:
    """Add GPU *rank* as node ``gpu<rank>`` (kind 'gpu', level 0) and return its name."""
    name = f"gpu{rank}"
    graph.add_node(name, kind="gpu", rank=rank, level=0, **attrs)
    return name


def add_link(
    graph: nx.Graph, a: str, b: str, kind: str, bandwidth_Bps: float, latency_s: float
) -> None:
    """One full-duplex link between *a* and *b*, *bandwidth_Bps* in each direction."""
    graph.add_edge(a, b, kind=kind, bandwidth_Bps=float(bandwidth_Bps), latency_s=float(latency_s))


def add_switch(
    graph: nx.Graph,
    switch: tuple[str, str, int],
    members: Iterable[str],
    link: tuple[str, float, float],
) -> str:
    """Add the switch node *switch* = (name, kind, level) and join each of *members* to it by a
    link *link* = (kind, bandwidth_Bps, latency_s), in the members' order; returns the name."""
    name, kind, level = switch
    graph.add_node(name, kind=kind, level=level)
    for member in members:
        add_link(graph, member, name, *link)
    return name
