"""`ib_cluster`: nodes of G GPUs with an intra-node fabric, NICs per node, and a two-level
InfiniBand fat tree (leaf and spine switches) with an oversubscription ratio.

Intra-node fabrics:
- 'nvswitch': every GPU of a node on one NVSwitch (as :func:`~.switch.nvswitch`), NVLink3
  300 GB/s (A100), NVLink4 450 GB/s (H100) or NVLink5 900 GB/s (B200) per GPU per direction
  [S];
- 'nvlink-mesh': the paper's Figure 7(a) node: GPUs fully connected, each pair by
  *links_per_pair* NVLink3 links of 25 GB/s per direction (4 links = 100 GB/s per direction,
  the paper's "200 GB/s" P2P counted both ways; 3 peers x 4 links = all 12 links of an A100).

Each GPU reaches NIC ``floor(local_rank * nics_per_node / gpus_per_node)`` of its node over
one PCIe x16 link (GPUDirect RDMA) of generation *pcie_gen*: Gen4 31.5 GB/s, Gen5 63 GB/s per
direction [S PCI-SIG: 16 and 32 GT/s per lane, 128b/130b encoding] (:data:`~.pcie.PCIE_X16_BPS`).
By default the generation's DGX has: Gen4 in a DGX A100 (PCIe Gen4 switches joining GPUs and
ConnectX-6 HDR NICs; NVIDIA DGX A100 User Guide, NVIDIA "Defining AI Innovation with DGX A100"),
Gen5 in a DGX H100 (Xeon Platinum 8480C with PCIe 5.0, eight single-port ConnectX-7 400 Gb/s
NICs on PCIe network modules; NVIDIA DGX H100 User Guide "Network Modules", NVIDIA DGX BasePOD
reference architecture "Core Components"), so an NDR NIC is not held to a Gen4 link; Gen5 in a
DGX B200 too (two Xeon 8570 "PCIe Gen5 CPUs" and eight single-port ConnectX-7 cards at up to
400 Gb/s InfiniBand; NVIDIA DGX B200 User Guide, "Hardware Overview"). NICs hang off leaf switches, *leaf_size* NIC
ports per leaf, in node order; each leaf has ``ceil(leaf_size / oversubscription)`` uplinks of
the NIC rate, one to each spine. A cluster that fits on one leaf has no spines. By default a
leaf holds whole nodes: the largest multiple of the NICs per node within 20 ports (a node's
NICs split across leaves would send half a node's rails through the spines). *wiring* 'rail'
cables as DGX SuperPODs are (NVIDIA DGX SuperPOD reference architecture): NIC ``k`` of every
node on leaf ``k`` (one leaf per rail), so NCCL's channel ``k`` (:mod:`atpsim.collectives.
channels`) stays on its leaf; 'fat-tree' (default) fills leaves in node order.

Nodes on NVSwitch at the spec NVLink rate name the NCCL profile of their generation
(``meta["nccl"]``, ``atpsim/data/nccl.yaml``): the effective protocol parameters fitted to the
Azure A100 curve (a100), fitted to the 8xH100 rows (h100), or derived from h100's (b200);
and the hardware profile of their GPU
(``meta["hardware"]``, :data:`~.switch.GENERATION_HARDWARE`), which a caller's hardware
overrides.

Numbers: HDR 200 Gb/s = 25 GB/s per port per direction [S] (measured-data.md "Links"
InfiniBand; maintainers quote about 24 GB/s achieved, nc#412). Latency: 0.3 us per `ib` link,
so NIC-leaf-NIC costs the ~0.6 us HDR figure of the same row (an approximation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import networkx as nx

from atpsim.topology.builders._common import add_gpu, add_link, add_switch
from atpsim.topology.builders.base import register_builder
from atpsim.topology.builders.pcie import PCIE_GENERATIONS, PCIE_LINK_LATENCY_S, PCIE_X16_BPS
from atpsim.topology.builders.switch import (
    GENERATION_HARDWARE,
    GENERATION_PARAM,
    NVLINK_BANDWIDTH_BPS,
    NVLINK_HOP_LATENCY_S,
)
from atpsim.topology.graph import Topology
from atpsim.topology.params import (
    BuilderParam,
    bandwidth_param,
    choice_param,
    count_param,
    ratio_param,
    time_param,
)
from atpsim.topology.routing import UpDownRouter

HDR_BPS = 25e9
#: NDR 400 Gb/s = 50 GB/s per port per direction (ConnectX-7; NVIDIA DGX H100 User Guide).
NDR_BPS = 50e9
#: The NIC of each generation's DGX: DGX A100 one HDR ConnectX-6 per GPU, DGX H100 and DGX B200
#: one NDR ConnectX-7 per GPU (module docstring's sources).
DGX_NIC_BPS = {"a100": HDR_BPS, "h100": NDR_BPS, "b200": NDR_BPS}
IB_LINK_LATENCY_S = 0.3e-6
NVLINK3_LINK_BPS = 25e9
INTRA_FABRICS = ("nvswitch", "nvlink-mesh")
WIRINGS = ("fat-tree", "rail")
#: The PCIe generation of the GPU-NIC links in each generation's DGX (module docstring): DGX A100
#: Gen4, DGX H100 and DGX B200 Gen5.
DGX_PCIE_GEN = {"a100": 4, "h100": 5, "b200": 5}
#: Leaf switch ports when none are given (a 40-port HDR switch split half down, half up).
DEFAULT_LEAF_PORTS = 20

CLUSTER_PARAMS = (
    BuilderParam("nodes", "count", "nodes"),
    BuilderParam("gpus_per_node", "count", "GPUs per node"),
    BuilderParam(
        "intra", "choice", "the node's fabric (nvlink-mesh: paper Fig. 7(a))", INTRA_FABRICS
    ),
    GENERATION_PARAM,
    BuilderParam(
        "links_per_pair", "count", "NVLink3 links (25 GB/s) per GPU pair of an nvlink-mesh"
    ),
    BuilderParam(
        "nics_per_node", "count", "none: one per GPU on nvswitch (DGX A100), one on nvlink-mesh"
    ),
    BuilderParam(
        "pcie_gen", "choice", "PCIe generation of each GPU-NIC x16 link; none: the generation's "
        "DGX (a100: 4, 31.5 GB/s; h100, b200: 5, 63 GB/s)", PCIE_GENERATIONS,
    ),
    BuilderParam("nic_bandwidth_Bps", "bandwidth", "per NIC port and direction (default: the generation's DGX NIC, HDR 200 Gb/s for a100, NDR 400 Gb/s for h100 and b200)"),
    BuilderParam("ib_latency_s", "time", "each InfiniBand link (NIC-leaf-NIC ~0.6 us)"),
    BuilderParam("leaf_size", "count", "NIC ports per leaf; none: whole nodes within 20 ports"),
    BuilderParam("oversubscription", "ratio", "leaf down-ports per up-port (1: non-blocking)"),
    BuilderParam("wiring", "choice", "fat-tree: leaves in node order; rail: NIC k of every node on leaf k", WIRINGS),
)


@dataclass(frozen=True)
class _NodeShape:
    """One cluster node: *gpus* GPUs on the *intra* fabric (NVLink *generation*, or
    *links_per_pair* NVLink3 links between each pair of a mesh) and *nics* NICs, each GPU's
    NIC behind a PCIe Gen *pcie_gen* x16 link."""

    gpus: int
    intra: str
    generation: str
    links_per_pair: int
    nics: int
    pcie_gen: int


@dataclass(frozen=True)
class _FatTree:
    """The InfiniBand tree: *nic_Bps* per port and direction, *latency_s* per `ib` link,
    *leaf_size* NIC ports per leaf, *oversubscription* leaf down-ports per up-port."""

    nic_Bps: float
    latency_s: float
    leaf_size: int
    oversubscription: float


def _node_shape(
    gpus_per_node: Any, intra: Any, generation: Any, links_per_pair: Any, nics_per_node: Any,
    pcie_gen: Any = None,
) -> _NodeShape:
    """The checked node parameters; *nics_per_node* None means one NIC per GPU on 'nvswitch'
    (a DGX A100) and one per node on 'nvlink-mesh' (the paper's Figure 7(a)); *pcie_gen* None
    means the generation's DGX (:data:`DGX_PCIE_GEN`)."""
    gpus = count_param(gpus_per_node, "gpus_per_node")
    intra = choice_param(intra, "intra", INTRA_FABRICS)
    generation = choice_param(generation, "generation", GENERATION_PARAM.choices)
    links_per_pair = count_param(links_per_pair, "links_per_pair")
    if nics_per_node is None:
        nics_per_node = gpus if intra == "nvswitch" else 1
    nics = count_param(nics_per_node, "nics_per_node")
    if pcie_gen is None:
        pcie_gen = DGX_PCIE_GEN[generation]
    gen = int(choice_param(str(pcie_gen), "pcie_gen", PCIE_GENERATIONS))
    return _NodeShape(gpus, intra, generation, links_per_pair, nics, gen)


def _fat_tree(
    nic_bandwidth_Bps: Any, ib_latency_s: Any, leaf_size: Any, oversubscription: Any,
    nics_per_node: int = 1,
) -> _FatTree:
    """The checked fat-tree parameters; *oversubscription* must be a number >= 1; *leaf_size*
    None holds whole nodes (the most multiples of *nics_per_node* within 20 ports)."""
    nic_Bps = bandwidth_param(nic_bandwidth_Bps, "nic_bandwidth_Bps")
    latency_s = time_param(ib_latency_s, "ib_latency_s")
    if leaf_size is None:
        leaf_size = max(1, DEFAULT_LEAF_PORTS // nics_per_node) * nics_per_node
    leaf_size = count_param(leaf_size, "leaf_size")
    ratio = ratio_param(oversubscription, "oversubscription")
    return _FatTree(nic_Bps, latency_s, leaf_size, ratio)


def _add_node_fabric(graph: nx.Graph, node: int, ranks: range, shape: _NodeShape) -> None:
    """Node *node*'s GPUs (*ranks*) on one NVSwitch, or fully connected by NVLink3 links."""
    if shape.intra == "nvswitch":
        members = (f"gpu{rank}" for rank in ranks)
        link = ("nvlink", NVLINK_BANDWIDTH_BPS[shape.generation], NVLINK_HOP_LATENCY_S)
        add_switch(graph, (f"node{node}_nvswitch", "nvswitch", 1), members, link)
        return
    bandwidth_Bps = shape.links_per_pair * NVLINK3_LINK_BPS
    for a, b in combinations(ranks, 2):
        add_link(graph, f"gpu{a}", f"gpu{b}", "nvlink", bandwidth_Bps, 2 * NVLINK_HOP_LATENCY_S)


def _add_node(graph: nx.Graph, node: int, shape: _NodeShape) -> list[str]:
    """Node *node*: its GPUs, their fabric, and its NICs, each GPU joined to NIC
    ``floor(local_rank * nics / gpus)`` by PCIe x16 of the node's generation; returns the NICs'
    names."""
    ranks = range(node * shape.gpus, (node + 1) * shape.gpus)
    for rank in ranks:
        add_gpu(graph, rank, node=node)
    _add_node_fabric(graph, node, ranks, shape)
    nics = [f"node{node}_nic{j}" for j in range(shape.nics)]
    for nic in nics:
        graph.add_node(nic, kind="nic", level=1)
    for local, rank in enumerate(ranks):
        nic = nics[local * shape.nics // shape.gpus]
        add_link(graph, f"gpu{rank}", nic, "pcie", PCIE_X16_BPS[shape.pcie_gen], PCIE_LINK_LATENCY_S)
    return nics


def _leaf_ports(nics: list[str], tree: _FatTree, rails: int, wiring: str) -> list[list[str]]:
    """The NICs of each leaf: *leaf_size* in node order, or (rail wiring) NIC ``k`` of every
    node on leaf ``k``, *rails* NICs per node."""
    if wiring == "rail":
        return [nics[k::rails] for k in range(rails)]
    return [nics[i : i + tree.leaf_size] for i in range(0, len(nics), tree.leaf_size)]


def _add_fat_tree(graph: nx.Graph, nics: list[str], tree: _FatTree, rails: int = 1,
                  wiring: str = "fat-tree") -> tuple[int, int]:
    """Leaves over *nics* (:func:`_leaf_ports`) and, when more than one leaf, spines, each
    leaf with ``ceil(ports / oversubscription)`` uplinks; returns (leaves, spines)."""
    leaves = _leaf_ports(nics, tree, rails, wiring)
    n_leaves = len(leaves)
    widest = max(len(ports) for ports in leaves)
    n_spines = math.ceil(widest / tree.oversubscription) if n_leaves > 1 else 0
    link = ("ib", tree.nic_Bps, tree.latency_s)
    for leaf, ports in enumerate(leaves):
        add_switch(graph, (f"leaf{leaf}", "ib_leaf", 2), ports, link)
        for spine in range(n_spines):
            graph.add_node(f"spine{spine}", kind="ib_spine", level=3)
            add_link(graph, f"leaf{leaf}", f"spine{spine}", *link)
    return n_leaves, n_spines


@register_builder("ib-cluster", CLUSTER_PARAMS)
def ib_cluster(
    nodes: int = 4,
    gpus_per_node: int = 8,
    intra: str = "nvswitch",
    generation: str = "a100",
    links_per_pair: int = 4,
    nics_per_node: int | None = None,
    pcie_gen: int | None = None,
    nic_bandwidth_Bps: Any = None,
    ib_latency_s: Any = IB_LINK_LATENCY_S,
    leaf_size: int | None = None,
    oversubscription: float = 1.0,
    wiring: str = "fat-tree",
) -> Topology:
    """Nodes of GPUs with an intra-node fabric and NICs on a leaf/spine InfiniBand fat tree
    (by default DGX A100-class nodes: NVSwitch, NVLink3, one HDR NIC per GPU; with
    ``generation='h100'`` DGX H100-class: NVLink4, one NDR NIC per GPU behind PCIe Gen5; with
    ``generation='b200'`` DGX B200-class: NVLink5, the same NICs).

    *nodes* nodes of *gpus_per_node* GPUs on an *intra* fabric ('nvswitch' or 'nvlink-mesh'),
    *nics_per_node* NICs each (default: one per GPU on 'nvswitch' as in a DGX A100, one per node
    on 'nvlink-mesh' as in the paper's Figure 7(a)), each GPU's NIC behind a PCIe x16 link of
    generation *pcie_gen* (default: the generation's DGX, Gen4 for a100, Gen5 for h100 and b200, see
    the module docstring for the sources), on a leaf/spine fat tree with *leaf_size*
    NIC ports per leaf (default: whole nodes within 20 ports), *oversubscription* = leaf
    down-ports / up-ports, and *wiring* 'fat-tree' (leaves in node order) or 'rail' (NIC k of
    every node on leaf k)."""
    nodes = count_param(nodes, "nodes")
    shape = _node_shape(gpus_per_node, intra, generation, links_per_pair, nics_per_node, pcie_gen)
    nic_Bps = DGX_NIC_BPS[shape.generation] if nic_bandwidth_Bps is None else nic_bandwidth_Bps
    tree = _fat_tree(nic_Bps, ib_latency_s, leaf_size, oversubscription, shape.nics)
    wiring = choice_param(wiring, "wiring", WIRINGS)
    graph = nx.Graph()
    nics = [nic for node in range(nodes) for nic in _add_node(graph, node, shape)]
    leaves, spines = _add_fat_tree(graph, nics, tree, shape.nics, wiring)
    return Topology(
        f"ib-cluster:{nodes}x{shape.gpus}",
        graph,
        UpDownRouter(),
        description=(
            f"{nodes} nodes x {shape.gpus} GPUs ({shape.intra}), {shape.nics} NIC(s) per node "
            f"at {tree.nic_Bps * 8 / 1e9:g} Gb/s behind PCIe Gen{shape.pcie_gen} x16, {leaves} leaf and {spines} spine switch(es), "
            f"oversubscription {tree.oversubscription:g}:1, {wiring} wiring"
        ),
        meta=_meta(nodes, shape, wiring, tree.nic_Bps, given=_given(nic_bandwidth_Bps, pcie_gen)),
    )


def _given(nic_bandwidth_Bps: Any, pcie_gen: Any) -> dict[str, bool]:
    """Whether the caller gave the NIC rate and the PCIe generation (else the generation's DGX
    chose them: :data:`DGX_NIC_BPS`, :data:`DGX_PCIE_GEN`)."""
    return {"nic_given": nic_bandwidth_Bps is not None, "pcie_gen_given": pcie_gen is not None}


def _meta(nodes: int, shape: _NodeShape, wiring: str, nic_Bps: float,
          given: dict[str, bool]) -> dict[str, Any]:  # fmt: skip
    """The cluster's meta: sizes, wiring, the GPU-NIC PCIe generation, the NIC rate (B/s per
    port and direction), whether each was *given* or the default of the DGX of generation
    ``dgx_defaults`` (what :mod:`atpsim.calibrate.provenance` names), and the generation, NCCL
    profile and hardware profile of NVSwitch nodes."""
    meta: dict[str, Any] = {"builder": "ib-cluster", "nodes": nodes, "gpus_per_node": shape.gpus,
                            "wiring": wiring, "pcie_gen": shape.pcie_gen, "nic_Bps": nic_Bps,
                            "dgx_defaults": shape.generation, **given}
    if shape.intra == "nvswitch":
        meta.update(generation=shape.generation, nccl=shape.generation,
                    hardware=GENERATION_HARDWARE[shape.generation])
    return meta
