"""pcie_tree and nvlink_pairs: structure, host-staged routing (IC1), pairs (IC2)."""

import itertools

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.builders.pcie import nvlink_pairs, pcie_tree


def kinds(topo, kind):
    return [n for n, d in topo.graph.nodes(data=True) if d["kind"] == kind]


def test_pcie_tree_structure():
    topo = pcie_tree(8)
    assert topo.n_gpus == 8
    assert len(kinds(topo, "pcie_switch")) == 4
    assert sorted(kinds(topo, "cpu")) == ["cpu0", "cpu1", "host_mem0", "host_mem1"]
    assert all(topo.graph.degree(s) == 3 for s in kinds(topo, "pcie_switch"))
    assert topo.graph.edges["cpu0", "cpu1"]["kind"] == "socket"
    assert topo.graph.edges["gpu0", "pcie_switch0"]["bandwidth_Bps"] == 31.5e9
    assert pcie_tree(8, pcie_gen=5).graph.edges["gpu0", "pcie_switch0"]["bandwidth_Bps"] == 63e9


def test_p2p_routes_stay_under_the_common_switch():
    topo = pcie_tree(8)
    assert topo.route_nodes(0, 1) == ["gpu0", "pcie_switch0", "gpu1"]
    assert topo.route_nodes(0, 7) == [
        "gpu0",
        "pcie_switch0",
        "cpu0",
        "cpu1",
        "pcie_switch3",
        "gpu7",
    ]


def test_p2p_disabled_stages_through_the_source_socket_host_memory():
    topo = pcie_tree(8, p2p=False)
    assert topo.route_nodes(0, 1) == [
        "gpu0",
        "pcie_switch0",
        "cpu0",
        "host_mem0",
        "cpu0",
        "pcie_switch0",
        "gpu1",
    ]
    path = topo.route_nodes(0, 7)
    assert path == [
        "gpu0",
        "pcie_switch0",
        "cpu0",
        "host_mem0",
        "cpu0",
        "cpu1",
        "pcie_switch3",
        "gpu7",
    ]
    route = topo.route(0, 7)
    assert "socket" in [topo.links.kind[i] for i in route]
    assert topo.bottleneck_Bps(route) == 26.3e9
    # 4 PCIe hops at 0.5 us, host in and out at 1 us, socket 0.5 us
    assert topo.path_latency_s(route) == pytest.approx(4.5e-6)


@pytest.mark.parametrize("p2p", [True, False])
def test_every_pair_routes_over_existing_links(p2p):
    topo = pcie_tree(16, p2p=p2p)
    for a, b in itertools.product(range(16), repeat=2):
        path = topo.route_nodes(a, b)
        assert path[0] == f"gpu{a}" and path[-1] == f"gpu{b}"
        assert all(topo.graph.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_smaller_trees_need_fewer_sockets():
    assert len(kinds(pcie_tree(4), "pcie_switch")) == 2
    assert "cpu1" not in pcie_tree(4).graph


def test_shape_errors():
    with pytest.raises(TopologyError, match="sockets"):
        pcie_tree(8, sockets=3)
    with pytest.raises(TopologyError, match="pcie_gen"):
        pcie_tree(8, pcie_gen=3)
    with pytest.raises(TopologyError, match="p2p"):
        pcie_tree(8, p2p="no")
    with pytest.raises(TopologyError, match="host_staging_bandwidth_Bps"):
        pcie_tree(8, host_staging_bandwidth_Bps=0)


def test_nvlink_pairs_structure_and_routes():
    topo = nvlink_pairs(8)
    pairs = [(u, v) for u, v, d in topo.graph.edges(data=True) if d["kind"] == "nvlink"]
    assert sorted(pairs) == [("gpu0", "gpu1"), ("gpu2", "gpu3"), ("gpu4", "gpu5"), ("gpu6", "gpu7")]
    assert topo.graph.edges["gpu0", "gpu1"]["bandwidth_Bps"] == 300e9
    assert topo.route_nodes(0, 1) == ["gpu0", "gpu1"]
    assert topo.route_nodes(1, 2) == ["gpu1", "pcie_switch0", "cpu0", "pcie_switch1", "gpu2"]
    assert topo.bottleneck_Bps(topo.route(1, 6)) == 31.5e9


def test_nvlink_pairs_needs_an_even_count():
    with pytest.raises(TopologyError, match="even"):
        nvlink_pairs(7, gpus_per_switch=7, switches_per_socket=1)
