"""A GPU generation brings what its DGX has (issue 23, "the machine as it is"): the hardware
profile of its GPU and the PCIe generation of its GPU-NIC links, each default held here to its
source; a caller's value overrides either.

Sources: DGX A100 = A100-SXM4-80GB GPUs, PCIe Gen4 switches to ConnectX-6 HDR NICs (NVIDIA DGX
A100 User Guide); DGX H100 = H100 SXM5 80GB GPUs, Xeon 8480C with PCIe 5.0 and eight ConnectX-7
400 Gb/s NICs (NVIDIA DGX H100 User Guide, DGX BasePOD reference architecture); DGX B200 = eight
B200 (1,440 GB), two NVLink 5 switches (14.4 TB/s aggregate: 900 GB/s per GPU and direction),
Xeon 8570 PCIe Gen5 CPUs and eight ConnectX-7 400 Gb/s NICs (NVIDIA DGX B200 User Guide). PCIe x16 per
direction (PCI-SIG): Gen4 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s, Gen5 32 GT/s = 63 GB/s.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from atpsim.compute.hardware import DEFAULT_HARDWARE, profile_names, topology_hardware
from atpsim.errors import TopologyError
from atpsim.topology.builders.cluster import DGX_NIC_BPS, DGX_PCIE_GEN, ib_cluster
from atpsim.topology.builders.pcie import PCIE_X16_BPS
from atpsim.topology.builders.switch import GENERATION_HARDWARE, nvswitch
from atpsim.topology.spec import load_topology


def pcie_rates_Bps(topo):
    """The bandwidth of every GPU-NIC (`pcie`) link of *topo*."""
    return {d["bandwidth_Bps"] for _, _, d in topo.graph.edges(data=True) if d["kind"] == "pcie"}


def test_each_generation_names_its_dgx_gpu_profile():
    assert GENERATION_HARDWARE == {"a100": "a100-sxm4-80gb", "h100": "h100-sxm", "b200": "b200"}
    assert set(GENERATION_HARDWARE.values()) <= set(profile_names())


def test_each_generation_names_its_dgx_pcie_generation():
    assert DGX_PCIE_GEN == {"a100": 4, "h100": 5, "b200": 5}


def test_pcie_x16_rates_are_the_pci_sig_figures():
    """GT/s per lane x 16 lanes x 128b/130b encoding / 8 bits, rounded as the spec quotes it."""
    for gen, gt_per_s in [(4, 16e9), (5, 32e9)]:
        assert PCIE_X16_BPS[gen] == pytest.approx(gt_per_s * 16 * 128 / 130 / 8, rel=0.01)
    assert PCIE_X16_BPS == {4: 31.5e9, 5: 63e9}


@pytest.mark.parametrize("generation, hardware, pcie_Bps", [
    ("a100", "a100-sxm4-80gb", 31.5e9),
    ("h100", "h100-sxm", 63e9),
    ("b200", "b200", 63e9),
])  # fmt: skip
def test_a_cluster_s_generation_brings_hardware_and_pcie(generation, hardware, pcie_Bps):
    topo = load_topology(f"ib-cluster:2x8,generation={generation}")
    assert topo.meta["hardware"] == hardware and topology_hardware(topo) == hardware
    assert topo.meta["pcie_gen"] == DGX_PCIE_GEN[generation]
    assert pcie_rates_Bps(topo) == {pcie_Bps}
    assert f"PCIe Gen{DGX_PCIE_GEN[generation]}" in topo.description


def test_the_nic_path_of_an_h100_cluster_is_gen5():
    """GPU 0 -> GPU 8 leaves through its NIC over a 63 GB/s link, so a 50 GB/s NDR NIC, not
    the PCIe hop, is the bottleneck."""
    topo = load_topology("ib-cluster:2x8,generation=h100,nic_bandwidth_Bps=50 GB/s")
    nodes = topo.route_nodes(0, 8)
    hops = [topo.graph.edges[a, b] for a, b in pairwise(nodes)]
    assert [hop["kind"] for hop in hops] == ["pcie", "ib", "ib", "pcie"]
    assert [hop["bandwidth_Bps"] for hop in hops] == [63e9, 50e9, 50e9, 63e9]


def test_pcie_gen_overrides_the_generation_s():
    assert pcie_rates_Bps(ib_cluster(2, 8, generation="h100", pcie_gen=4)) == {31.5e9}
    assert pcie_rates_Bps(load_topology("ib-cluster:2x8,pcie_gen=5")) == {63e9}


def test_a_pcie_gen_that_is_not_4_or_5_is_refused_by_name():
    with pytest.raises(TopologyError, match="pcie_gen"):
        ib_cluster(2, 8, pcie_gen=6)


def test_the_paper_s_mesh_nodes_keep_gen4_and_name_no_generation():
    """ic4's nodes (NVLink3 mesh) are A100s behind Gen4; their profile is the preset's."""
    topo = ib_cluster(2, 4, intra="nvlink-mesh", nics_per_node=1)
    assert pcie_rates_Bps(topo) == {31.5e9}
    assert "hardware" not in topo.meta and topology_hardware(topo) == DEFAULT_HARDWARE
    assert load_topology("ic4").meta["hardware"] == "a100-sxm4-80gb-paper-stack"


def test_an_nvswitch_node_s_generation_brings_its_hardware():
    assert nvswitch(8, "h100").meta["hardware"] == "h100-sxm"
    assert nvswitch(8, "a100", gpu_bandwidth_Bps=200e9).meta["hardware"] == "a100-sxm4-80gb"


def test_a_caller_s_hardware_and_a_preset_s_override_the_generation_s():
    topo = load_topology("ib-cluster:1x8,generation=h100")
    assert topology_hardware(topo, "a100-sxm4-80gb") == "a100-sxm4-80gb"
    assert load_topology("ic3").meta["hardware"] == "a100-sxm4-80gb-paper-stack"
    assert load_topology("dgx-h100").meta["hardware"] == "h100-sxm"


def ib_rates_Bps(topo):
    """The bandwidth of every InfiniBand (`ib`) link of *topo*."""
    return {d["bandwidth_Bps"] for _, _, d in topo.graph.edges(data=True) if d["kind"] == "ib"}


def test_each_generation_names_its_dgx_nic():
    """DGX A100: ConnectX-6 HDR 200 Gb/s = 25 GB/s per direction; DGX H100: ConnectX-7 NDR
    400 Gb/s = 50 GB/s, DGX B200 the same ConnectX-7 (module docstring's sources)."""
    assert DGX_NIC_BPS == {"a100": 25e9, "h100": 50e9, "b200": 50e9}


@pytest.mark.parametrize("generation, nic_Bps", [("a100", 25e9), ("h100", 50e9), ("b200", 50e9)])
def test_a_cluster_s_nics_are_its_generation_s_unless_given(generation, nic_Bps):
    assert ib_rates_Bps(ib_cluster(nodes=2, generation=generation)) == {nic_Bps}
    given = ib_cluster(nodes=2, generation=generation, nic_bandwidth_Bps=12.5e9)
    assert ib_rates_Bps(given) == {12.5e9}


def test_generation_b200_is_nvlink5_with_the_b200_profile_and_nccl_entry():
    """A DGX B200 node: NVLink 5 at 900 GB/s per GPU and direction (1.8 TB/s both ways), the
    b200 hardware profile and the b200 NCCL entry; an ib-cluster of them the same inside."""
    node = load_topology("nvswitch:8,generation=b200")
    assert set(node.links.bandwidth_Bps) == {900e9}
    assert (node.meta["hardware"], node.meta["nccl"]) == ("b200", "b200")
    cluster = load_topology("ib-cluster:2x8,generation=b200")
    nvlink = {d["bandwidth_Bps"] for _, _, d in cluster.graph.edges(data=True) if d["kind"] == "nvlink"}
    assert nvlink == {900e9} and ib_rates_Bps(cluster) == {50e9}
    assert (cluster.meta["hardware"], cluster.meta["nccl"]) == ("b200", "b200")
