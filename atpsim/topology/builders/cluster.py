"""`ib_cluster`: nodes of G GPUs with an intra-node fabric, NICs per node, and a two-level
InfiniBand fat tree (leaf and spine switches) with an oversubscription ratio.

Intra-node fabrics:
- 'nvswitch': every GPU of a node on one NVSwitch (as :func:`~.switch.nvswitch`), NVLink3
  300 GB/s (A100) or NVLink4 450 GB/s (H100) per GPU per direction [S];
- 'nvlink-mesh': the paper's Figure 7(a) node: GPUs fully connected, each pair by
  *links_per_pair* NVLink3 links of 25 GB/s per direction (4 links = 100 GB/s per direction,
  the paper's "200 GB/s" P2P counted both ways; 3 peers x 4 links = all 12 links of an A100).

Each GPU reaches NIC ``floor(local_rank * nics_per_node / gpus_per_node)`` of its node over
PCIe Gen4 x16 (31.5 GB/s [S], GPUDirect RDMA). NICs hang off leaf switches, *leaf_size* NIC
ports per leaf, in node order; each leaf has ``ceil(leaf_size / oversubscription)`` uplinks of
the NIC rate, one to each spine. A cluster that fits on one leaf has no spines.

Numbers: HDR 200 Gb/s = 25 GB/s per port per direction [S] (measured-data.md "Links"
InfiniBand; maintainers quote about 24 GB/s achieved, nc#412). Latency: 0.3 us per `ib` link,
so NIC-leaf-NIC costs the ~0.6 us HDR figure of the same row (an approximation).
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from atpsim.errors import TopologyError
from atpsim.topology.builders._common import (
    add_gpu,
    add_link,
    bandwidth_param,
    choice_param,
    count_param,
    time_param,
)
from atpsim.topology.builders.pcie import PCIE_LINK_LATENCY_S, PCIE_X16_BPS
from atpsim.topology.builders.switch import NVLINK_BANDWIDTH_BPS, NVLINK_HOP_LATENCY_S
from atpsim.topology.graph import Topology
from atpsim.topology.registry import register_builder
from atpsim.topology.routing import UpDownRouter

HDR_BPS = 25e9
IB_LINK_LATENCY_S = 0.3e-6
NVLINK3_LINK_BPS = 25e9
INTRA_FABRICS = ("nvswitch", "nvlink-mesh")


def _add_node_fabric(
    graph: nx.Graph, node: int, ranks: range, intra: str, generation: str, links_per_pair: int
) -> None:
    if intra == "nvswitch":
        switch = f"node{node}_nvswitch"
        graph.add_node(switch, kind="nvswitch", level=1)
        for rank in ranks:
            add_link(
                graph,
                f"gpu{rank}",
                switch,
                "nvlink",
                NVLINK_BANDWIDTH_BPS[generation],
                NVLINK_HOP_LATENCY_S,
            )
        return
    for a in ranks:
        for b in ranks:
            if a < b:
                add_link(
                    graph,
                    f"gpu{a}",
                    f"gpu{b}",
                    "nvlink",
                    links_per_pair * NVLINK3_LINK_BPS,
                    2 * NVLINK_HOP_LATENCY_S,
                )


def _add_fat_tree(
    graph: nx.Graph,
    nics: list[str],
    nic_Bps: float,
    latency: float,
    leaf_size: int,
    oversubscription: float,
) -> tuple[int, int]:
    """Leaves over *nics* (``leaf_size`` each) and, when more than one leaf, spines; returns
    (leaves, spines)."""
    n_leaves = math.ceil(len(nics) / leaf_size)
    n_spines = math.ceil(leaf_size / oversubscription) if n_leaves > 1 else 0
    for leaf in range(n_leaves):
        graph.add_node(f"leaf{leaf}", kind="ib_leaf", level=2)
        for nic in nics[leaf * leaf_size : (leaf + 1) * leaf_size]:
            add_link(graph, nic, f"leaf{leaf}", "ib", nic_Bps, latency)
        for spine in range(n_spines):
            graph.add_node(f"spine{spine}", kind="ib_spine", level=3)
            add_link(graph, f"leaf{leaf}", f"spine{spine}", "ib", nic_Bps, latency)
    return n_leaves, n_spines


@register_builder("ib-cluster")
def ib_cluster(
    nodes: int = 4,
    gpus_per_node: int = 8,
    intra: str = "nvswitch",
    generation: str = "a100",
    links_per_pair: int = 4,
    nics_per_node: int | None = None,
    nic_bandwidth_Bps: Any = HDR_BPS,
    ib_latency_s: Any = IB_LINK_LATENCY_S,
    leaf_size: int = 20,
    oversubscription: float = 1.0,
) -> Topology:
    """Nodes of GPUs with an intra-node fabric and NICs on a leaf/spine InfiniBand fat tree.

    *nodes* nodes of *gpus_per_node* GPUs on an *intra* fabric ('nvswitch' or 'nvlink-mesh'),
    *nics_per_node* NICs each (default: one per GPU on 'nvswitch' as in a DGX A100, one per node
    on 'nvlink-mesh' as in the paper's Figure 7(a)), on a leaf/spine fat tree with *leaf_size*
    NIC ports per leaf and *oversubscription* = leaf down-ports / up-ports."""
    nodes = count_param(nodes, "nodes")
    per_node = count_param(gpus_per_node, "gpus_per_node")
    intra = choice_param(intra, "intra", INTRA_FABRICS)
    generation = choice_param(generation, "generation", tuple(NVLINK_BANDWIDTH_BPS))
    links_per_pair = count_param(links_per_pair, "links_per_pair")
    if nics_per_node is None:
        nics_per_node = per_node if intra == "nvswitch" else 1
    nics_per_node = count_param(nics_per_node, "nics_per_node")
    nic_Bps = bandwidth_param(nic_bandwidth_Bps, "nic_bandwidth_Bps")
    latency = time_param(ib_latency_s, "ib_latency_s")
    leaf_size = count_param(leaf_size, "leaf_size")
    if (
        isinstance(oversubscription, bool)
        or not isinstance(oversubscription, (int, float))
        or oversubscription < 1
    ):
        raise TopologyError(
            f"expected a ratio >= 1, got {oversubscription!r}", key="oversubscription"
        )
    graph = nx.Graph()
    nics: list[str] = []
    for node in range(nodes):
        ranks = range(node * per_node, (node + 1) * per_node)
        for rank in ranks:
            add_gpu(graph, rank, node=node)
        _add_node_fabric(graph, node, ranks, intra, generation, links_per_pair)
        for j in range(nics_per_node):
            nic = f"node{node}_nic{j}"
            graph.add_node(nic, kind="nic", level=1)
            nics.append(nic)
        for local, rank in enumerate(ranks):
            nic = f"node{node}_nic{local * nics_per_node // per_node}"
            add_link(graph, f"gpu{rank}", nic, "pcie", PCIE_X16_BPS[4], PCIE_LINK_LATENCY_S)
    leaves, spines = _add_fat_tree(graph, nics, nic_Bps, latency, leaf_size, oversubscription)
    return Topology(
        f"ib-cluster:{nodes}x{per_node}",
        graph,
        UpDownRouter(),
        description=(
            f"{nodes} nodes x {per_node} GPUs ({intra}), {nics_per_node} NIC(s) per node at "
            f"{nic_Bps * 8 / 1e9:g} Gb/s, {leaves} leaf and {spines} spine switch(es), "
            f"oversubscription {oversubscription:g}:1"
        ),
        meta={"builder": "ib-cluster", "nodes": nodes, "gpus_per_node": per_node},
    )
