"""Questions about a built topology's wiring that the layers above ask by rank: which cables a
set of GPUs reach the network through (a straggling NIC port is one of these)."""

from __future__ import annotations

from collections.abc import Iterable

from atpsim.topology.graph import Topology


def nic_ports(topology: Topology, ranks: Iterable[int]) -> list[tuple[str, str]]:
    """The (NIC, switch) cables of the NICs the GPUs *ranks* are wired to, in rank order, each
    once (a NIC's neighbours that are neither GPUs nor NICs are its switches)."""
    graph = topology.graph
    ports: list[tuple[str, str]] = []
    for rank in ranks:
        gpu = topology.gpu_nodes[rank]
        for nic in sorted(n for n in graph.neighbors(gpu) if graph.nodes[n].get("kind") == "nic"):
            for switch in sorted(graph.neighbors(nic)):
                if graph.nodes[switch].get("kind") not in ("gpu", "nic") and (nic, switch) not in ports:
                    ports.append((nic, switch))
    return ports
