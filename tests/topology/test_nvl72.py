"""The nvl72 builder (issue 24): GB200 NVL72 racks, each one NVLink 5 domain, joined over an
InfiniBand fat tree.

Expected figures (atpsim/topology/builders/nvl72.py's sources): 72 GPUs per rack; NVLink 5 at
900 GB/s per GPU and direction through one switch hop (2 x 0.3 us); between racks GPU -> PCIe
Gen5 x16 (63 GB/s) -> ConnectX-7 NDR NIC (400 Gb/s = 50 GB/s) -> leaf -> spine -> leaf -> NIC
-> GPU, the NIC the bottleneck; hardware gb200, NCCL entry b200.
"""

import time
from itertools import pairwise

import pytest

from atpsim.api import collective
from atpsim.compute.hardware import topology_hardware
from atpsim.errors import TopologyError
from atpsim.topology.builders.nvl72 import nvl72
from atpsim.topology.spec import load_topology, requested_gpus


def hops(topo, src, dst):
    """(kind, bandwidth_Bps) of each link on the route from GPU *src* to GPU *dst*."""
    nodes = topo.route_nodes(src, dst)
    return [(topo.graph.edges[a, b]["kind"], topo.graph.edges[a, b]["bandwidth_Bps"])
            for a, b in pairwise(nodes)]  # fmt: skip


@pytest.mark.parametrize(("spec", "gpus", "domains"), [
    ("nvl72:1", 72, 1), ("nvl72:domains=2", 144, 2), ("nvl72:3", 216, 3), ("nvl72:2x36", 72, 2),
])  # fmt: skip
def test_gpu_count_is_racks_times_gpus_per_rack(spec, gpus, domains):
    """The count is known before building (the size limit checks it) and the graph has it."""
    topo = load_topology(spec)
    assert topo.n_gpus == gpus == requested_gpus(spec)
    assert topo.meta["domains"] == domains
    nodes = {topo.graph.nodes[topo.gpu(rank)]["node"] for rank in range(gpus)}
    assert nodes == set(range(domains))


def test_one_rack_by_default_and_a_gpu_count_sizes_the_racks_and_must_divide():
    assert load_topology("nvl72").n_gpus == 72
    assert load_topology("nvl72", n_gpus=144).meta["domains"] == 2
    with pytest.raises(TopologyError, match="divisible by gpus_per_domain=72"):
        load_topology("nvl72", n_gpus=100)


def test_two_gpus_of_a_rack_meet_through_one_switch_at_nvlink5_rate():
    topo = load_topology("nvl72:domains=2")
    assert topo.route_nodes(0, 71) == ["gpu0", "rack0_nvswitch", "gpu71"]
    assert hops(topo, 72, 143) == [("nvlink", 900e9), ("nvlink", 900e9)]
    route = topo.route(0, 71)
    assert topo.bottleneck_Bps(route) == 900e9
    assert topo.path_latency_s(route) == pytest.approx(0.6e-6)


def test_racks_meet_through_each_gpu_s_own_nic_and_the_fat_tree():
    topo = load_topology("nvl72:domains=2")
    assert hops(topo, 5, 77) == [("pcie", 63e9), ("ib", 50e9), ("ib", 50e9), ("ib", 50e9),
                                 ("ib", 50e9), ("pcie", 63e9)]  # fmt: skip
    assert topo.route_nodes(5, 77)[1] == "rack0_nic5" and topo.route_nodes(5, 77)[-2] == "rack1_nic5"
    assert topo.bottleneck_Bps(topo.route(5, 77)) == 50e9
    kinds = [d["kind"] for _, d in topo.graph.nodes(data=True)]
    assert (kinds.count("nic"), kinds.count("nvswitch"), kinds.count("ib_leaf")) == (144, 2, 2)


def test_rail_wiring_keeps_nic_k_of_every_rack_on_leaf_k():
    topo = load_topology("nvl72:domains=2,wiring=rail")
    assert topo.route_nodes(5, 77) == ["gpu5", "rack0_nic5", "leaf5", "rack1_nic5", "gpu77"]


def test_nic_and_pcie_rates_may_be_given():
    """GB300 NVL72-like racks: ConnectX-8 at 800 Gb/s behind a faster host link."""
    topo = nvl72(2, 4, nic_bandwidth_Bps="800 Gb/s", pcie_bandwidth_Bps="121 GB/s")
    assert {bw for kind, bw in hops(topo, 0, 4)} == {100e9, 121e9}
    assert topo.meta["nic_given"] and "pcie_gen" not in topo.meta


def test_meta_names_gb200_hardware_and_the_b200_nccl_entry():
    topo = load_topology("nvl72")
    assert (topo.meta["generation"], topo.meta["hardware"], topo.meta["nccl"]) == (
        "gb200", "gb200", "b200")
    assert topology_hardware(topo) == "gb200"
    assert topology_hardware(topo, "b200") == "b200"
    off_spec = nvl72(1, 8, gpu_bandwidth_Bps="450 GB/s")
    assert "nccl" not in off_spec.meta and set(hops(off_spec, 0, 1)) == {("nvlink", 450e9)}


@pytest.mark.parametrize(("params", "key"), [
    ({"domains": 0}, "domains"), ({"gpus_per_domain": -1}, "gpus_per_domain"),
    ({"wiring": "ring"}, "wiring"), ({"oversubscription": 0.5}, "oversubscription"),
])  # fmt: skip
def test_bad_parameters_are_refused_by_name(params, key):
    with pytest.raises(TopologyError) as info:
        nvl72(**params)
    assert key in info.value.format()


def test_a_rack_wide_all_reduce_completes_below_the_nvlink_rate():
    """72 GPUs, 64 MiB all-reduce (NCCL's tuner, b200 entry): busbw under Simple's share of
    NVLink 5 (0.8295 x 900 GB/s) and well above an NDR NIC's 50 GB/s; in about a second."""
    start = time.perf_counter()
    (row,) = collective("nvl72", "all_reduce", "64M").rows
    assert time.perf_counter() - start < 10
    assert 50e9 < row.busbw_Bps < 0.8295 * 900e9


def test_an_all_reduce_across_racks_is_held_by_the_nics():
    """2 racks of 4 GPUs (small, so quick): the 4 NICs of a rack carry what crosses between
    racks, so busbw stays below the NVLink rate and a 4x faster NIC makes it faster."""
    (slow,) = collective("nvl72:2x4", "all_reduce", "256M").rows
    (fast,) = collective("nvl72:2x4,nic_bandwidth_Bps=200 GB/s,pcie_bandwidth_Bps=250 GB/s",
                         "all_reduce", "256M").rows  # fmt: skip
    assert slow.busbw_Bps < 0.8295 * 900e9
    assert fast.busbw_Bps > 1.5 * slow.busbw_Bps
