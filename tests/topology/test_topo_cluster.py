"""ib_cluster: counts, oversubscription, up/down routes stay inside a node when they can."""

import itertools

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.builders.cluster import ib_cluster


def count(topo, kind):
    return sum(1 for _, d in topo.graph.nodes(data=True) if d["kind"] == kind)


def test_dgx_style_cluster_counts():
    topo = ib_cluster(4, 8)
    assert topo.n_gpus == 32
    assert count(topo, "nvswitch") == 4
    assert count(topo, "nic") == 32
    assert count(topo, "ib_leaf") == 2  # whole nodes: 16 of 20 ports per leaf
    assert count(topo, "ib_spine") == 16  # non-blocking: one uplink per down-port
    assert [topo.graph.degree(f"leaf{i}") for i in range(2)] == [16 + 16, 16 + 16]


def test_leaves_hold_whole_nodes_by_default():
    """8 NICs per node: 16 of the 20 ports; 4 NICs per node: 20; 3 NICs per node: 18."""
    for nics, ports in [(8, 16), (4, 20), (3, 18)]:
        topo = ib_cluster(6, 8, nics_per_node=nics)
        assert topo.graph.degree("leaf0") - count(topo, "ib_spine") == ports
    explicit = ib_cluster(4, 8, leaf_size=20)
    assert explicit.graph.degree("leaf1") == 12 + 20


def test_rail_wiring_puts_nic_k_of_every_node_on_leaf_k():
    topo = ib_cluster(4, 8, nics_per_node=4, wiring="rail")
    assert count(topo, "ib_leaf") == 4
    for k in range(4):
        nics = {v for v in topo.graph.neighbors(f"leaf{k}") if v.startswith("node")}
        assert nics == {f"node{n}_nic{k}" for n in range(4)}
    assert topo.route_nodes(0, 8)[:5] == ["gpu0", "node0_nic0", "leaf0", "node1_nic0", "gpu8"]
    with pytest.raises(TopologyError):
        ib_cluster(2, 8, wiring="ring")


def test_oversubscription_thins_the_uplinks():
    topo = ib_cluster(8, 8, leaf_size=16, oversubscription=2)
    assert count(topo, "ib_leaf") == 4
    assert count(topo, "ib_spine") == 8
    assert topo.graph.degree("leaf0") == 16 + 8


def test_single_leaf_has_no_spine():
    topo = ib_cluster(2, 8)
    assert count(topo, "ib_spine") == 0


def test_routes_stay_within_a_node_for_intra_node_pairs():
    topo = ib_cluster(4, 8, leaf_size=8)
    for a, b in itertools.product(range(8), repeat=2):
        if a != b:
            assert topo.route_nodes(a, b) == [f"gpu{a}", "node0_nvswitch", f"gpu{b}"]


def test_inter_node_routes_go_up_and_down_the_fat_tree():
    topo = ib_cluster(4, 8, leaf_size=8)  # one node per leaf
    path = topo.route_nodes(3, 29)
    assert path[:3] == ["gpu3", "node0_nic3", "leaf0"]
    assert path[3].startswith("spine")
    assert path[4:] == ["leaf3", "node3_nic5", "gpu29"]
    assert topo.bottleneck_Bps(topo.route(3, 29)) == 25e9
    spines = {topo.route_nodes(a, 8 + a)[3] for a in range(8)}
    assert len(spines) > 1  # destination-mod-k spreads over the spines
    for a, b in itertools.product(range(32), repeat=2):
        path = topo.route_nodes(a, b)
        assert all(topo.graph.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_figure_7a_mesh_nodes():
    topo = ib_cluster(4, 4, intra="nvlink-mesh")
    assert topo.graph.edges["gpu0", "gpu3"]["bandwidth_Bps"] == 100e9
    assert count(topo, "nic") == 4
    assert topo.route_nodes(0, 3) == ["gpu0", "gpu3"]
    assert topo.route_nodes(1, 9) == ["gpu1", "node0_nic0", "leaf0", "node2_nic0", "gpu9"]
    assert all(d == 3 + 1 for n, d in topo.graph.degree() if n.startswith("gpu"))


def test_bad_parameters():
    with pytest.raises(TopologyError, match="intra"):
        ib_cluster(2, 4, intra="ethernet")
    with pytest.raises(TopologyError, match="oversubscription"):
        ib_cluster(2, 4, oversubscription=0.5)
    with pytest.raises(TopologyError, match="nic_bandwidth_Bps"):
        ib_cluster(2, 4, nic_bandwidth_Bps="-200 Gb/s")
