"""The matrix on the paper's interconnects, its invariants, its pieces, and its speed."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.analytic.bandwidths import series_reduce
from atpsim.analytic.grouping import torus_links, torus_shape
from atpsim.analytic.hcm import derive_hcm
from atpsim.analytic.render import format_hcm, gpu_span, hcm_to_dict
from atpsim.topology.presets import preset_info
from atpsim.topology.spec import clear_cache, load_topology

GB = 1e9


def at_spec(name):
    """Preset *name* with its spec-sheet values (presets.yaml ``spec``) in place of the
    calibrated ones that ic1-ic4 carry (atpsim.calibrate.paper; tests/calibrate/paper checks those)."""
    return load_topology({"preset": name, **preset_info(name).get("spec", {})})


def test_ic2_is_four_pairs_over_pcie_then_two_gpus_on_nvlink():
    """Paper Section 5.3: "the first layer is 4 dual-GPUs interconnected by PCIe and the second
    layer consists of 2 GPUs connected by NVLink". At spec, a pair's share of the PCIe tree is
    its switch's x16 uplink, 31.5 GB/s; the pair's NV12 bridge is 300 GB/s per direction."""
    hcm = derive_hcm(at_spec("ic2"))
    pairs, gpus = hcm.layers
    assert pairs.groups[0].ranks == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert pairs.groups[0].p2p_Bps(0, 3) == pairs.groups[0].group_Bps(0) == 31.5 * GB
    assert len(gpus.groups) == 4 and gpus.ranks_per_group == (2,)
    assert gpus.groups[0].p2p_Bps(0, 1) == gpus.groups[0].group_Bps(1) == 300 * GB


@pytest.mark.parametrize(("spec", "n", "bandwidth"), [("ic3", 8, 300 * GB), ("ic5", 256, 450 * GB)])
def test_switch_fabrics_are_one_layer(spec, n, bandwidth):
    """At spec: NVLink3 300 GB/s per direction (ic3), NVLink4 450 GB/s (ic5)."""
    hcm = derive_hcm(at_spec(spec))
    (layer,) = hcm.layers
    (group,) = layer.groups
    assert layer.ranks_per_group == (n,)
    assert group.p2p_Bps(0, n - 1) == group.group_Bps(0) == bandwidth


def test_ic1_shows_the_pcie_tree_not_the_host_staging():
    """IC1 (P2P disabled) routes every copy through host memory, which the matrix does not see:
    it shows the PCIe tree, two GPUs behind each switch's shared 31.5 GB/s uplink, and so, at
    spec, predicts tens of GB/s where the paper calibrated about 1 GB/s (Section 5.3)."""
    hcm = derive_hcm(at_spec("ic1"))
    switches, gpus = hcm.layers
    assert switches.groups[0].ranks == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert switches.groups[0].group_Bps(0) == 31.5 * GB
    assert gpus.groups[0].p2p_Bps(0, 1) == 31.5 * GB
    assert "behind one switch (pcie_switch0" in gpus.groups[0].formed_by


def test_dgx_cluster_nodes_then_gpus():
    """4 DGX-like nodes, 8 NICs each: a node reaches another over its 8 HDR NICs (8 x 25)."""
    hcm = derive_hcm(load_topology("ib-cluster:4x8"))
    nodes, gpus = hcm.layers
    assert nodes.groups[0].ranks[1] == tuple(range(8, 16))
    assert nodes.groups[0].p2p_Bps(0, 1) == nodes.groups[0].group_Bps(0) == 200 * GB
    assert gpus.groups[0].group_Bps(0) == 300 * GB


def test_oversubscribed_leaves_are_a_layer():
    """8 nodes x 8 GPUs, 8 HDR NICs per node, 2 nodes per 16-port leaf, 2:1 oversubscribed: a
    leaf takes 400 GB/s in from its nodes and has 8 x 25 = 200 GB/s onward, so its two nodes
    form a layer-1 rank of 200 GB/s; without oversubscription nodes are layer 1."""
    spec = {"builder": "ib-cluster", "nodes": 8, "gpus_per_node": 8, "leaf_size": 16}
    flat = derive_hcm(load_topology(spec))
    assert [layer.ranks_per_group for layer in flat.layers] == [(8,), (8,)]
    hcm = derive_hcm(load_topology({**spec, "oversubscription": 2}))
    leaves, nodes, gpus = hcm.layers
    assert leaves.groups[0].ranks[1] == tuple(range(16, 32))
    assert leaves.groups[0].group_Bps(0) == 200 * GB
    assert len(nodes.groups) == 4 and nodes.groups[0].ranks == (
        tuple(range(8)),
        tuple(range(8, 16)),
    )
    assert "leaf0: 200 GB/s onward for 400 GB/s in" in nodes.groups[0].formed_by
    assert len(gpus.groups) == 8


@pytest.mark.parametrize("spec", ["ic1", "ic2", "ic3", "ic4", "ic6", "torus:4x8", "ib-cluster:8x4"])
def test_invariants(spec):
    """Every GPU is in exactly one rank per group; P2P is symmetric and never above either
    rank's group bandwidth."""
    hcm = derive_hcm(load_topology(spec))
    for layer in hcm.layers:
        for group in layer.groups:
            flat = sorted(gpu for rank in group.ranks for gpu in rank)
            assert tuple(flat) == group.gpus
            p2p = group.p2p_matrix_Bps()
            np.testing.assert_array_equal(p2p, p2p.T)
            bandwidth = group.group_bandwidths_Bps()
            assert np.all(p2p <= np.minimum.outer(bandwidth, bandwidth) + 1)


def test_deterministic():
    first = hcm_to_dict(derive_hcm(load_topology("ic4")))
    clear_cache()
    assert hcm_to_dict(derive_hcm(load_topology("ic4"))) == first


@pytest.mark.parametrize(
    "spec",
    [
        "torus:16x16",
        {"preset": "ic5", "gpus": 512},
        {
            "builder": "ib-cluster",
            "nodes": 48,
            "gpus_per_node": 8,
            "leaf_size": 16,
            "oversubscription": 2,
        },
        {"builder": "pcie-tree", "gpus": 256, "gpus_per_switch": 4, "switches_per_socket": 8},
    ],
)
def test_hundreds_of_gpus_in_well_under_a_few_seconds(spec):
    topology = load_topology(spec)
    start = time.perf_counter()
    hcm = derive_hcm(topology)
    assert time.perf_counter() - start < 3.0, spec
    assert hcm.layers and format_hcm(hcm)


# -- pieces -----------------------------------------------------------------------------------
def test_series_reduction_keeps_the_bottleneck():
    """Rank 0 -NIC(9)- leaf(8) -NIC(7)- rank 1 with a dangling switch 6: one link of 25."""
    adjacency = {
        0: {9: 126.0},
        9: {0: 126.0, 8: 25.0},
        8: {9: 25.0, 7: 25.0, 6: 5.0},
        7: {8: 25.0, 1: 126.0},
        1: {7: 126.0},
        6: {8: 5.0},
    }
    series_reduce(adjacency, n_ranks=2)
    assert adjacency == {0: {1: 25.0}, 1: {0: 25.0}}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(2, 5), min_size=2, max_size=3))
def test_torus_shape_recovers_any_shape_from_its_links(dims):
    dims = tuple(dims)
    n = int(np.prod(dims))
    found = torus_shape(n, torus_links(dims))
    assert found is not None and torus_links(found) == torus_links(dims)


def test_torus_shape_rejects_a_ring_and_a_broken_torus():
    assert torus_shape(8, torus_links((8,))) is None
    links = torus_links((4, 4))
    links.discard((0, 1))
    assert torus_shape(16, links) is None


def test_gpu_span():
    assert gpu_span((0, 1, 2, 3)) == "0-3"
    assert gpu_span((0, 2, 4)) == "0,2,4"
    assert gpu_span((0, 1, 2, 3, 8, 9, 10, 11)) == "0-3,8-11"
