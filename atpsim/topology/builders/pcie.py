"""PCIe trees: `pcie_tree` (the paper's Machine A with NVLink disabled, IC1) and `nvlink_pairs`
(Machine B, IC2: GPUs in NVLink pairs, pairs over the PCIe tree).

The tree (paper Section 2, Figure 2): each GPU sits under a PCIe switch, each switch under a
CPU socket, and the sockets are bridged by a `socket` link (AMD GMI/xGMI or Intel QPI/UPI).
Each socket has a host-memory node (kind 'cpu', ``host_mem<i>``) joined by a `host` link: with
``p2p=False`` (``NCCL_P2P_DISABLE=1``) every GPU-to-GPU transfer is staged through the source
socket's host memory (:class:`~atpsim.topology.routing.HostStagedRouter`).

Numbers (per direction):
- PCIe x16: Gen4 31.5 GB/s, Gen5 63 GB/s [S PCI-SIG] (measured-data.md "Links" PCIe row); a
  PCIe switch's uplink to the socket is x16 too. Latency 0.5 us per PCIe link, so GPU-switch-GPU
  costs NCCL's PCIe per-step latency for LL, 1.0 us [C] (a model constant).
- socket link 64 GB/s, 0.5 us: assumption (the paper names GMI/QPI without a figure; AMD EPYC
  sockets are joined by several x16 xGMI links, each of the order of PCIe Gen4 x16 or more).
- host staging 26.3 GB/s: the measured host-to-device copy rate on an A100 node (measured-data.md
  "Links" PCIe row, AZ [M]) stands in for the rate a staged copy into or out of pinned host
  memory reaches; latency 1 us, assumption. IC1's calibrated bandwidths (about 1-5 GB/s, facts
  "Calibrated IC1 numbers") are far lower: calibration, not this graph, closes that gap.
- cross-socket lanes (optional, *cross_socket_gpu_bandwidth_Bps*): a PCIe device reading or
  writing the other socket's memory is limited per device (its outstanding-request credits
  across the socket bridge), well below the bridge's aggregate. With the option set, the sockets
  are no longer joined by one `socket` link: each socket climbs through its `socket` link
  (the bridge's aggregate, per direction) to a hub ``socket_hub<s>``, and the hubs are joined by
  one lane ``remote_lane<j>`` (`socket` links) per GPU of a socket; up*/down* routing sends a transfer
  over lane ``destination rank mod lanes``, so each GPU receives cross-socket traffic through
  its own lane. This is what makes IC1's calibrated bandwidths consistent (paper Section 5.3):
  one cross-socket flow is lane-bound, several share the bridge.
- *pcie_bandwidth_Bps* replaces the x16 rate of *pcie_gen* on every PCIe link (an effective
  rate from a calibration; the generation's figure is the spec).
- NVLink pair (nvlink_pairs): an NV12 bridge = 12 NVLink3 links = 300 GB/s per direction [S];
  nt#178 measured 208 GB/s all-reduce busbw within such a pair [M] (69% of the link), and
  20 GB/s once a third GPU across the host joins (measured-data.md "All-reduce").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import networkx as nx

from atpsim.errors import TopologyError
from atpsim.topology.builders._common import add_gpu, add_link
from atpsim.topology.builders.base import register_builder
from atpsim.topology.graph import Topology
from atpsim.topology.params import (
    BuilderParam,
    bandwidth_param,
    choice_param,
    count_param,
    time_param,
)
from atpsim.topology.routing import HostStagedRouter, UpDownRouter

PCIE_X16_BPS = {4: 31.5e9, 5: 63e9}
PCIE_LINK_LATENCY_S = 0.5e-6
SOCKET_BANDWIDTH_BPS = 64e9
SOCKET_LATENCY_S = 0.5e-6
HOST_STAGING_BANDWIDTH_BPS = 26.3e9
HOST_LATENCY_S = 1e-6
NV12_BANDWIDTH_BPS = 300e9
NVLINK_LATENCY_S = 0.6e-6  # NCCL's NVLink per-step latency, LL [C]
PCIE_GENERATIONS = ("4", "5")

#: The tree's shape and links, shared by ``pcie-tree`` and ``nvlink-pairs``.
_GPUS = BuilderParam("gpus", "count", "GPUs, filling switches and sockets in rank order")
_SHAPE = (
    BuilderParam("gpus_per_switch", "count", "GPUs per PCIe switch"),
    BuilderParam("switches_per_socket", "count", "PCIe switches per CPU socket"),
    BuilderParam("sockets", "count", "CPU sockets; none: as many as the GPUs need"),
    BuilderParam("pcie_gen", "choice", "PCIe generation of the x16 links", PCIE_GENERATIONS),
)
_PCIE_LATENCY = BuilderParam("pcie_latency_s", "time", "each PCIe link")
_SOCKET = (
    BuilderParam("socket_bandwidth_Bps", "bandwidth", "the socket bridge, per direction"),
    BuilderParam("socket_latency_s", "time", "the socket bridge"),
)
_PCIE_BANDWIDTH = BuilderParam(
    "pcie_bandwidth_Bps", "bandwidth", "every PCIe link; none: the x16 rate of pcie_gen"
)
PCIE_TREE_PARAMS = (
    _GPUS,
    *_SHAPE,
    BuilderParam("p2p", "flag", "false: copies staged through host memory (NCCL_P2P_DISABLE=1)"),
    _PCIE_LATENCY,
    *_SOCKET,
    BuilderParam("host_staging_bandwidth_Bps", "bandwidth", "socket to host memory, per direction"),
    BuilderParam("host_latency_s", "time", "socket to host memory"),
    _PCIE_BANDWIDTH,
    BuilderParam(
        "cross_socket_gpu_bandwidth_Bps", "bandwidth", "per-GPU cross-socket lane; none: no lanes"
    ),
)
NVLINK_PAIRS_PARAMS = (
    _GPUS,
    BuilderParam("nvlink_bandwidth_Bps", "bandwidth", "each pair's NV12 bridge, per direction"),
    BuilderParam("nvlink_latency_s", "time", "each pair's NVLink"),
    *_SHAPE,
    _PCIE_LATENCY,
    *_SOCKET,
    _PCIE_BANDWIDTH,
)


class TreeShape(NamedTuple):
    """A balanced PCIe tree: *gpus* GPUs, *per_switch* per PCIe switch, *per_socket* switches
    per CPU socket, *sockets* sockets."""

    gpus: int
    per_switch: int
    per_socket: int
    sockets: int


@dataclass(frozen=True)
class TreeLinks:
    """The tree's links, per direction: PCIe (every GPU-switch and switch-socket link), the
    socket bridge and the host-memory link as (bandwidth_Bps, latency_s), and *lane_Bps*, the
    per-GPU cross-socket lane (None: no lanes, sockets joined directly)."""

    pcie_Bps: float
    pcie_latency_s: float
    socket: tuple[float, float]
    host: tuple[float, float]
    lane_Bps: float | None = None


def _shape(gpus: Any, gpus_per_switch: Any, switches_per_socket: Any, sockets: Any) -> TreeShape:
    """The checked tree shape; GPUs fill switches and sockets in rank order, and *sockets* None
    means as many as the GPUs need."""
    gpus = count_param(gpus, "gpus")
    per_switch = count_param(gpus_per_switch, "gpus_per_switch")
    per_socket = count_param(switches_per_socket, "switches_per_socket")
    needed = -(-gpus // (per_switch * per_socket))
    if sockets is None:
        return TreeShape(gpus, per_switch, per_socket, needed)
    sockets = count_param(sockets, "sockets")
    if needed != sockets:
        raise TopologyError(
            f"expected {gpus} GPUs to fill {sockets} socket(s) of {per_socket} switch(es) x "
            f"{per_switch} GPUs, but they need {needed}",
            key="sockets",
        )
    return TreeShape(gpus, per_switch, per_socket, sockets)


def tree_graph(shape: TreeShape, links: TreeLinks) -> nx.Graph:
    """GPUs (level 0) under PCIe switches (1) under sockets ``cpu<i>`` (2) with host memory
    ``host_mem<i>`` (3); every pair of sockets joined by a `socket` link, or, with lanes,
    through per-GPU cross-socket lanes (:func:`_add_remote_lanes`)."""
    graph = nx.Graph()
    _add_sockets(graph, shape.sockets, links)
    if links.lane_Bps is not None and shape.sockets > 1:
        lanes = shape.per_switch * shape.per_socket
        _add_remote_lanes(graph, shape.sockets, lanes, links.socket, links.lane_Bps)
    pcie = ("pcie", links.pcie_Bps, links.pcie_latency_s)
    for rank in range(shape.gpus):
        switch = rank // shape.per_switch
        name = f"pcie_switch{switch}"
        if name not in graph:
            graph.add_node(name, kind="pcie_switch", level=1)
            add_link(graph, name, f"cpu{switch // shape.per_socket}", *pcie)
        add_link(graph, add_gpu(graph, rank), name, *pcie)
    return graph


def _add_sockets(graph: nx.Graph, sockets: int, links: TreeLinks) -> None:
    """Sockets ``cpu<s>`` with their host memory ``host_mem<s>``; without lanes, each socket
    joined to every earlier one by a `socket` link."""
    for s in range(sockets):
        graph.add_node(f"cpu{s}", kind="cpu", level=2, host_memory=f"host_mem{s}")
        graph.add_node(f"host_mem{s}", kind="cpu", level=3)
        add_link(graph, f"cpu{s}", f"host_mem{s}", "host", *links.host)
        for other in range(s if links.lane_Bps is None else 0):
            add_link(graph, f"cpu{other}", f"cpu{s}", "socket", *links.socket)


def _add_remote_lanes(
    graph: nx.Graph, sockets: int, lanes: int, socket: tuple[float, float], lane_Bps: float
) -> None:
    """Socket ``cpu<s>`` -`socket`- hub ``socket_hub<s>`` (level 3), and *lanes* lane nodes
    (level 4) each joined to every hub by a `socket` link of *lane_Bps*: a cross-socket transfer
    crosses its socket's bridge share and one lane (picked by destination rank)."""
    bandwidth_Bps, latency_s = socket
    for s in range(sockets):
        graph.add_node(f"socket_hub{s}", kind="cpu", level=3)
        add_link(graph, f"cpu{s}", f"socket_hub{s}", "socket", bandwidth_Bps, latency_s / 2)
    for lane in range(lanes):
        graph.add_node(f"remote_lane{lane}", kind="cpu", level=4)
        for s in range(sockets):
            add_link(graph, f"socket_hub{s}", f"remote_lane{lane}", "socket", lane_Bps, 0.0)


def _pcie_Bps(pcie_gen: Any, pcie_bandwidth_Bps: Any) -> float:
    """Per-direction PCIe link rate: *pcie_bandwidth_Bps* if given, else Gen *pcie_gen* x16."""
    gen = PCIE_X16_BPS[int(choice_param(str(pcie_gen), "pcie_gen", PCIE_GENERATIONS))]
    if pcie_bandwidth_Bps is None:
        return gen
    return bandwidth_param(pcie_bandwidth_Bps, "pcie_bandwidth_Bps")


def _links(
    pcie_gen: Any,
    pcie_latency_s: Any,
    socket: tuple[Any, Any],
    host: tuple[Any, Any],
    pcie_bandwidth_Bps: Any = None,
    lane_Bps: Any = None,
) -> TreeLinks:
    """The checked link parameters (*socket* and *host* as (bandwidth, latency)); *lane_Bps*
    None leaves the lanes out."""
    return TreeLinks(
        _pcie_Bps(pcie_gen, pcie_bandwidth_Bps),
        time_param(pcie_latency_s, "pcie_latency_s"),
        (
            bandwidth_param(socket[0], "socket_bandwidth_Bps"),
            time_param(socket[1], "socket_latency_s"),
        ),
        (
            bandwidth_param(host[0], "host_staging_bandwidth_Bps"),
            time_param(host[1], "host_latency_s"),
        ),
        None if lane_Bps is None else bandwidth_param(lane_Bps, "cross_socket_gpu_bandwidth_Bps"),
    )


@register_builder("pcie-tree", PCIE_TREE_PARAMS)
def pcie_tree(
    gpus: int = 8,
    gpus_per_switch: int = 2,
    switches_per_socket: int = 2,
    sockets: int | None = None,
    pcie_gen: int = 4,
    p2p: bool = True,
    pcie_latency_s: Any = PCIE_LINK_LATENCY_S,
    socket_bandwidth_Bps: Any = SOCKET_BANDWIDTH_BPS,
    socket_latency_s: Any = SOCKET_LATENCY_S,
    host_staging_bandwidth_Bps: Any = HOST_STAGING_BANDWIDTH_BPS,
    host_latency_s: Any = HOST_LATENCY_S,
    pcie_bandwidth_Bps: Any = None,
    cross_socket_gpu_bandwidth_Bps: Any = None,
) -> Topology:
    """GPUs on a PCIe tree under CPU sockets, peer-to-peer or staged through host memory (IC1).

    *gpus* GPUs on a balanced PCIe tree (*gpus_per_switch* per switch, *switches_per_socket*
    per socket, filled in rank order; *sockets* defaults to as many as needed, 2 for 8 GPUs) of
    PCIe Gen *pcie_gen* x16 links (or *pcie_bandwidth_Bps*). *p2p* False stages every
    GPU-to-GPU transfer through host memory (``NCCL_P2P_DISABLE=1``, the paper's IC1).
    *cross_socket_gpu_bandwidth_Bps* adds the per-GPU cross-socket lanes (module docstring)."""
    shape = _shape(gpus, gpus_per_switch, switches_per_socket, sockets)
    if not isinstance(p2p, bool):
        raise TopologyError(f"expected true or false, got {p2p!r}", key="p2p")
    socket = (socket_bandwidth_Bps, socket_latency_s)
    host = (host_staging_bandwidth_Bps, host_latency_s)
    lane_Bps = cross_socket_gpu_bandwidth_Bps
    links = _links(pcie_gen, pcie_latency_s, socket, host, pcie_bandwidth_Bps, lane_Bps)
    staged = "staged through host memory (P2P disabled)" if not p2p else "PCIe peer-to-peer"
    return Topology(
        f"pcie-tree:{shape.gpus}",
        tree_graph(shape, links),
        UpDownRouter() if p2p else HostStagedRouter(),
        description=(
            f"{shape.gpus} GPUs on a PCIe Gen{pcie_gen} tree ({shape.per_switch} per switch, "
            f"{shape.per_socket} switches per socket, {shape.sockets} sockets); "
            f"GPU-to-GPU {staged}"
        ),
        meta={"builder": "pcie-tree", "p2p": p2p},
    )


@register_builder("nvlink-pairs", NVLINK_PAIRS_PARAMS)
def nvlink_pairs(
    gpus: int = 8,
    nvlink_bandwidth_Bps: Any = NV12_BANDWIDTH_BPS,
    nvlink_latency_s: Any = NVLINK_LATENCY_S,
    gpus_per_switch: int = 2,
    switches_per_socket: int = 2,
    sockets: int | None = None,
    pcie_gen: int = 4,
    pcie_latency_s: Any = PCIE_LINK_LATENCY_S,
    socket_bandwidth_Bps: Any = SOCKET_BANDWIDTH_BPS,
    socket_latency_s: Any = SOCKET_LATENCY_S,
    pcie_bandwidth_Bps: Any = None,
) -> Topology:
    """GPUs in NVLink pairs over a PCIe tree (the paper's Machine B, IC2).

    *gpus* GPUs in NVLink pairs (ranks 2i and 2i+1, one NV12 bridge each) over a PCIe tree
    (the paper's Machine B, IC2). Transfers within a pair take the NVLink; between pairs, the
    PCIe tree peer-to-peer, at Gen *pcie_gen* x16 or *pcie_bandwidth_Bps* per link."""
    shape = _shape(gpus, gpus_per_switch, switches_per_socket, sockets)
    if shape.gpus % 2:
        raise TopologyError(
            f"expected an even number of GPUs to pair, got {shape.gpus}", key="gpus"
        )
    socket = (socket_bandwidth_Bps, socket_latency_s)
    host = (HOST_STAGING_BANDWIDTH_BPS, HOST_LATENCY_S)
    graph = tree_graph(shape, _links(pcie_gen, pcie_latency_s, socket, host, pcie_bandwidth_Bps))
    bandwidth = bandwidth_param(nvlink_bandwidth_Bps, "nvlink_bandwidth_Bps")
    latency = time_param(nvlink_latency_s, "nvlink_latency_s")
    for rank in range(0, shape.gpus, 2):
        add_link(graph, f"gpu{rank}", f"gpu{rank + 1}", "nvlink", bandwidth, latency)
    return Topology(
        f"nvlink-pairs:{shape.gpus}",
        graph,
        UpDownRouter(),
        description=(
            f"{shape.gpus} GPUs in {shape.gpus // 2} NVLink pairs ({bandwidth / 1e9:g} GB/s per "
            f"direction) over a PCIe Gen{pcie_gen} tree ({shape.sockets} sockets)"
        ),
        meta={"builder": "nvlink-pairs"},
    )
