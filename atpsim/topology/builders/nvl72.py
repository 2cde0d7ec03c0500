"""`nvl72`: GB200 NVL72 racks, each one NVLink 5 domain, joined over an InfiniBand fat tree.

A GB200 NVL72 rack holds 72 Blackwell GPUs (18 compute trays of 4 GPUs and 2 Grace CPUs) and
9 NVLink switch trays of 2 NVLink switch chips; each GPU has 18 NVLink 5 links, one to each of
the 18 switch chips, 1.8 TB/s in all (900 GB/s per direction), so every GPU reaches every other
GPU of the rack in one switch hop at its full rate (NVIDIA DGX SuperPOD GB200 reference
architecture, "Network Fabrics", Multi-node NVLink fabric). The 18 chips are modelled as one
non-blocking switch per rack, as :func:`~.switch.nvswitch` models a DGX's NVSwitches: a GPU's
18 links to 18 chips carry any GPU-to-GPU pattern the one switch does, and the graph stays at
one switch per rack.

Between racks each GPU has one InfiniBand NIC: the compute fabric of the DGX SuperPOD with DGX
GB200 is NDR 400 Gb/s InfiniBand (same reference architecture, "Abstract" and "Network
Fabrics"), one ConnectX-7 per GPU, four per compute tray (NVIDIA Multi-Node NVLink Systems
tuning guide, "Understanding Your Grace-Blackwell Systems": compute trays of 4 GPUs with CX7).
GB300 NVL72 trays carry four ConnectX-8 800 Gb/s instead (NVIDIA NVL72 Enterprise Reference
Architecture, "System Hardware & Components"): set *nic_bandwidth_Bps* to 100 GB/s and
*pcie_bandwidth_Bps* to match. The NICs hang off the leaf/spine fat tree of
:mod:`~.cluster` (the same leaves, spines, oversubscription and wiring).

Each GPU reaches its NIC over one PCIe Gen5 x16 link, 63 GB/s per direction (assumption: the
ConnectX-7 is a PCIe Gen5 x16 device and NVIDIA's Blackwell specifications list the GPU's PCIe
Gen5 at 128 GB/s both ways), above the 50 GB/s NDR port, so the NIC binds.

Latency: 0.3 us per GPU-switch NVLink (half of NCCL's LL NVLink step, as :mod:`~.switch`) and
0.3 us per InfiniBand link (as :mod:`~.cluster`).

The GPUs are the ``gb200`` hardware profile; collectives run NCCL with the ``b200`` entry of
``atpsim/data/nccl.yaml`` (NVLink 5 at the spec rate, derived from h100's) when the NVLink rate
is the spec's.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from atpsim.topology.builders._common import add_gpu, add_link, add_switch
from atpsim.topology.builders.base import register_builder
from atpsim.topology.builders.cluster import (
    IB_LINK_LATENCY_S,
    NDR_BPS,
    WIRINGS,
    _add_fat_tree,
    _fat_tree,
)
from atpsim.topology.builders.pcie import PCIE_LINK_LATENCY_S, PCIE_X16_BPS
from atpsim.topology.builders.switch import NVLINK_BANDWIDTH_BPS, NVLINK_HOP_LATENCY_S
from atpsim.topology.graph import Topology
from atpsim.topology.params import (
    BuilderParam,
    bandwidth_param,
    choice_param,
    count_param,
    time_param,
)
from atpsim.topology.routing import UpDownRouter

#: GPUs in one GB200 NVL72 rack (one NVLink domain).
NVL72_GPUS = 72
#: The GPUs' generation, hardware profile and NCCL entry (module docstring).
GENERATION, HARDWARE, NCCL_ENTRY = "gb200", "gb200", "b200"
#: NVLink 5 per GPU and direction (B/s): the b200 generation's rate.
NVLINK5_BPS = NVLINK_BANDWIDTH_BPS["b200"]
#: GPU-NIC link per direction (B/s): PCIe Gen5 x16 (module docstring).
NIC_LINK_BPS = PCIE_X16_BPS[5]

NVL72_PARAMS = (
    BuilderParam("domains", "count", "NVL72 racks, each one NVLink domain"),
    BuilderParam("gpus_per_domain", "count", "GPUs per NVLink domain (72 in a GB200 NVL72)"),
    BuilderParam("gpu_bandwidth_Bps", "bandwidth", "NVLink per GPU and direction; none: NVLink 5, 900 GB/s"),
    BuilderParam("latency_s", "time", "each GPU-switch NVLink (half an NVLink step)"),
    BuilderParam("nic_bandwidth_Bps", "bandwidth", "per NIC (one per GPU) and direction; none: ConnectX-7 NDR 400 Gb/s"),
    BuilderParam("pcie_bandwidth_Bps", "bandwidth", "each GPU-NIC link per direction; none: PCIe Gen5 x16, 63 GB/s"),
    BuilderParam("ib_latency_s", "time", "each InfiniBand link (NIC-leaf-NIC ~0.6 us)"),
    BuilderParam("leaf_size", "count", "NIC ports per leaf; none: one rack's NICs per leaf"),
    BuilderParam("oversubscription", "ratio", "leaf down-ports per up-port (1: non-blocking)"),
    BuilderParam("wiring", "choice", "fat-tree: leaves in rack order; rail: NIC k of every rack on leaf k", WIRINGS),
)  # fmt: skip


def _add_domain(graph: nx.Graph, domain: int, gpus: int, nvlink: tuple[float, float],
                nic_link_Bps: float) -> list[str]:
    """Rack *domain*: its *gpus* GPUs (``node`` = *domain*) on one NVLink switch by links of
    *nvlink* = (bandwidth_Bps, latency_s), each GPU with its own NIC over a link of
    *nic_link_Bps*; returns the NICs' names in GPU order."""
    ranks = range(domain * gpus, (domain + 1) * gpus)
    members = [add_gpu(graph, rank, node=domain) for rank in ranks]
    add_switch(graph, (f"rack{domain}_nvswitch", "nvswitch", 1), members, ("nvlink", *nvlink))
    nics = [f"rack{domain}_nic{local}" for local in range(gpus)]
    for gpu, nic in zip(members, nics, strict=True):
        graph.add_node(nic, kind="nic", level=1)
        add_link(graph, gpu, nic, "pcie", nic_link_Bps, PCIE_LINK_LATENCY_S)
    return nics


@register_builder("nvl72", NVL72_PARAMS)
def nvl72(
    domains: int = 1,
    gpus_per_domain: int = NVL72_GPUS,
    gpu_bandwidth_Bps: Any = None,
    latency_s: Any = NVLINK_HOP_LATENCY_S,
    nic_bandwidth_Bps: Any = None,
    pcie_bandwidth_Bps: Any = None,
    ib_latency_s: Any = IB_LINK_LATENCY_S,
    leaf_size: int | None = None,
    oversubscription: float = 1.0,
    wiring: str = "fat-tree",
) -> Topology:
    """GB200 NVL72 racks, each one NVLink 5 domain, joined over an InfiniBand fat tree.

    *domains* racks of *gpus_per_domain* GPUs (default 72), each GPU at *gpu_bandwidth_Bps* per direction to its rack's switch (default 900 GB/s) and with its
    own InfiniBand NIC of *nic_bandwidth_Bps* (default NDR 400 Gb/s) behind a
    *pcie_bandwidth_Bps* link (default PCIe Gen5 x16), on a leaf/spine fat tree of *leaf_size*
    ports per leaf (default one rack), *oversubscription* and *wiring* as in ``ib-cluster``.
    Sources and assumptions: the module docstring."""
    domains = count_param(domains, "domains")
    gpus = count_param(gpus_per_domain, "gpus_per_domain")
    spec_nvlink = gpu_bandwidth_Bps is None
    nvlink = (bandwidth_param(NVLINK5_BPS if spec_nvlink else gpu_bandwidth_Bps, "gpu_bandwidth_Bps"),
              time_param(latency_s, "latency_s"))  # fmt: skip
    nic_link_Bps = bandwidth_param(
        NIC_LINK_BPS if pcie_bandwidth_Bps is None else pcie_bandwidth_Bps, "pcie_bandwidth_Bps"
    )
    nic_Bps = NDR_BPS if nic_bandwidth_Bps is None else nic_bandwidth_Bps
    tree = _fat_tree(nic_Bps, ib_latency_s, gpus if leaf_size is None else leaf_size,
                     oversubscription, gpus)  # fmt: skip
    wiring = choice_param(wiring, "wiring", WIRINGS)
    graph = nx.Graph()
    nics = [nic for d in range(domains) for nic in _add_domain(graph, d, gpus, nvlink, nic_link_Bps)]
    leaves, spines = _add_fat_tree(graph, nics, tree, gpus, wiring)
    description = (
        f"{domains} GB200 NVL72 rack(s) x {gpus} GPUs, each rack one NVLink domain at "
        f"{nvlink[0] / 1e9:g} GB/s per GPU and direction; one {tree.nic_Bps * 8 / 1e9:g} Gb/s NIC "
        f"per GPU, {leaves} leaf and {spines} spine switch(es), oversubscription "
        f"{tree.oversubscription:g}:1, {wiring} wiring"
    )
    meta = _meta(domains, gpus, tree.nic_Bps, spec_nvlink,
                 given={"nic_given": nic_bandwidth_Bps is not None,
                        "pcie_given": pcie_bandwidth_Bps is not None})  # fmt: skip
    return Topology(f"nvl72:{domains}x{gpus}", graph, UpDownRouter(), description=description,
                    meta=meta)  # fmt: skip


def _meta(domains: int, gpus: int, nic_Bps: float, spec_nvlink: bool,
          given: dict[str, bool]) -> dict[str, Any]:  # fmt: skip
    """The racks' meta: sizes, the NIC rate (B/s per port and direction) and whether it was
    given, the generation and hardware profile, the NCCL entry where the NVLink rate is the
    spec's, and the GPU-NIC PCIe generation where that link is the spec's."""
    meta: dict[str, Any] = {"builder": "nvl72", "domains": domains, "gpus_per_domain": gpus,
                            "nic_Bps": nic_Bps, "nic_given": given["nic_given"],
                            "generation": GENERATION, "hardware": HARDWARE}  # fmt: skip
    if spec_nvlink:
        meta["nccl"] = NCCL_ENTRY
    if not given["pcie_given"]:
        meta["pcie_gen"] = 5
    return meta
