"""Single-switch fabrics: `nvswitch` (one DGX node) and `nvlink_network_switch` (IC5).

Both model the fabric as one non-blocking logical switch node: each GPU has one link to it
whose per-direction bandwidth is the GPU's total NVLink bandwidth. Assumption: real fabrics are
several switch chips (DGX A100: 6 NVSwitches; DGX H100: 4; DGX B200: 2; the NVLink Switch System of Hot Chips
34 joins up to 256 H100s through second-level NVLink switches) wired so that any GPU can use its
full bandwidth to any other, which a single non-blocking node represents.

Latency: each GPU-switch link carries half of NCCL's per-step NVLink latency for the LL protocol,
0.6 us (NVIDIA/nccl src/graph/tuning.cc, measured-data.md "NCCL's own latency model" [C]) —
a model constant, not a measurement — so a GPU-to-GPU hop costs 0.6 us.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from atpsim.topology.builders._common import add_gpu, add_switch
from atpsim.topology.builders.base import register_builder
from atpsim.topology.graph import Topology
from atpsim.topology.params import (
    BuilderParam,
    bandwidth_param,
    choice_param,
    count_param,
    time_param,
)
from atpsim.topology.routing import UpDownRouter

#: Per-GPU, per-direction NVLink bandwidth by generation (measured-data.md "Links" [S], NVIDIA):
#: NVLink3 (A100) 12 links, 300 GB/s; NVLink4 (H100) 18 links, 450 GB/s; NVLink5 (B200) 18
#: links, 900 GB/s (1.8 TB/s both directions: NVIDIA DGX B200 User Guide, "Hardware Overview",
#: two NVLink 5 switches with 14.4 TB/s aggregate for 8 GPUs; the GB200 NVL72 and HGX B200
#: specifications, "5th Generation NVLink: 1.8TB/s").
NVLINK_BANDWIDTH_BPS = {"a100": 300e9, "h100": 450e9, "b200": 900e9}
#: The hardware profile (``atpsim/data/hardware/``) each generation brings: the GPU of its DGX
#: (DGX A100: A100-SXM4-80GB; DGX H100: H100 SXM5 80GB; DGX B200: B200, 180 GB; NVIDIA DGX
#: A100, DGX H100 and DGX B200 user guides). A topology built with a generation names it in
#: ``meta["hardware"]``; a preset's ``hardware`` or a caller's ``--hardware`` overrides it.
GENERATION_HARDWARE = {"a100": "a100-sxm4-80gb", "h100": "h100-sxm", "b200": "b200"}
#: Half of NCCL's NVLink per-step latency (LL, 0.6 us) per GPU-switch link [C].
NVLINK_HOP_LATENCY_S = 0.3e-6


#: The NVLink generation parameter, shared with the nodes of ``ib-cluster``.
GENERATION_PARAM = BuilderParam(
    "generation",
    "choice",
    "NVLink generation: a100 = NVLink3 300 GB/s, h100 = NVLink4 450 GB/s, b200 = NVLink5 "
    "900 GB/s per GPU and direction",
    tuple(NVLINK_BANDWIDTH_BPS),
)
_LATENCY_PARAM = BuilderParam("latency_s", "time", "each GPU-switch link (half an NVLink step)")

#: (switch node, its kind, the GPU links' kind) of each single-switch fabric.
NVSWITCH_FABRIC = ("nvswitch0", "nvswitch", "nvlink")
NVLINK_NETWORK_FABRIC = ("nvl_switch0", "nvl_switch", "nvlink_network")


def _single_switch(
    builder: str,
    gpus: int,
    fabric: tuple[str, str, str],
    link: tuple[float, float],
    description: str,
    meta: dict[str, Any] | None = None,
) -> Topology:
    """*gpus* GPUs, each joined to the one switch of *fabric* by a link of *link* =
    (bandwidth_Bps, latency_s), routed up/down; named ``<builder>:<gpus>``."""
    switch, switch_kind, link_kind = fabric
    graph = nx.Graph()
    members = (add_gpu(graph, rank) for rank in range(gpus))
    add_switch(graph, (switch, switch_kind, 1), members, (link_kind, *link))
    return Topology(
        f"{builder}:{gpus}",
        graph,
        UpDownRouter(),
        description=description,
        meta={"builder": builder, **(meta or {})},
    )


@register_builder(
    "nvswitch",
    (
        BuilderParam("gpus", "count", "GPUs on the switch"),
        GENERATION_PARAM,
        BuilderParam(
            "gpu_bandwidth_Bps", "bandwidth", "per GPU and direction; none: by generation"
        ),
        _LATENCY_PARAM,
    ),
)
def nvswitch(
    gpus: int = 8,
    generation: str = "a100",
    gpu_bandwidth_Bps: Any = None,
    latency_s: Any = NVLINK_HOP_LATENCY_S,
) -> Topology:
    """GPUs on one NVSwitch fabric (a DGX A100, DGX H100 or DGX B200 node).

    *gpus* GPUs; *generation* 'a100' (NVLink3, 300 GB/s per direction per GPU), 'h100'
    (NVLink4, 450 GB/s) or 'b200' (NVLink5, 900 GB/s); *gpu_bandwidth_Bps* overrides the figure.
    The generation also names the GPUs' hardware profile (:data:`GENERATION_HARDWARE`)."""
    gpus = count_param(gpus, "gpus")
    generation = choice_param(generation, "generation", GENERATION_PARAM.choices)
    bandwidth = bandwidth_param(
        NVLINK_BANDWIDTH_BPS[generation] if gpu_bandwidth_Bps is None else gpu_bandwidth_Bps,
        "gpu_bandwidth_Bps",
    )
    latency = time_param(latency_s, "latency_s")
    description = (
        f"{gpus} {generation.upper()} GPUs on one NVSwitch fabric (modelled as one non-blocking "
        f"switch), {bandwidth / 1e9:g} GB/s per GPU per direction"
    )
    link = (bandwidth, latency)
    meta = {"generation": generation, "hardware": GENERATION_HARDWARE[generation]}
    if gpu_bandwidth_Bps is None:  # at spec: the generation's NCCL profile (atpsim/data/nccl.yaml)
        meta["nccl"] = generation
    return _single_switch("nvswitch", gpus, NVSWITCH_FABRIC, link, description, meta)


@register_builder(
    "nvlink-network-switch",
    (
        BuilderParam("gpus", "count", "GPUs on the fabric"),
        BuilderParam("gpu_bandwidth_Bps", "bandwidth", "per GPU and direction (NVLink4, H100)"),
        _LATENCY_PARAM,
    ),
)
def nvlink_network_switch(
    gpus: int = 256,
    gpu_bandwidth_Bps: Any = NVLINK_BANDWIDTH_BPS["h100"],
    latency_s: Any = NVLINK_HOP_LATENCY_S,
) -> Topology:
    """GPUs on one NVLink-Network switch fabric (the paper's IC5), modelled non-blocking.

    *gpus* GPUs; default 450 GB/s per GPU per direction (NVLink4, H100), as in the NVLink
    Switch System (Hot Chips 34). Thousands of GPUs on one fabric is the paper's hypothetical."""
    gpus = count_param(gpus, "gpus")
    bandwidth = bandwidth_param(gpu_bandwidth_Bps, "gpu_bandwidth_Bps")
    latency = time_param(latency_s, "latency_s")
    description = (
        f"{gpus} GPUs on one NVLink-Network switch fabric (assumed non-blocking), "
        f"{bandwidth / 1e9:g} GB/s per GPU per direction"
    )
    link = (bandwidth, latency)
    return _single_switch("nvlink-network-switch", gpus, NVLINK_NETWORK_FABRIC, link, description)
