"""The matrices of the paper's Figure 7, derived from graphs (issue 4, Done-when)."""

import numpy as np
import pytest

from atpsim.analytic.hcm import derive_hcm
from atpsim.topology.spec import load_topology

GB = 1e9


def layer_shapes(hcm):
    return [(len(layer.groups), layer.ranks_per_group) for layer in hcm.layers]


def off_diagonal(matrix):
    return matrix[~np.eye(len(matrix), dtype=bool)]


def test_figure_7a_with_the_papers_numbers(fig7a):
    """4 nodes x 4 GPUs: layer 1 = 4 nodes with P2P 25 GB/s (one HDR NIC each) and group
    25 GB/s; layer 2 = 4 GPUs with P2P 4 x 50 = 200 GB/s and group 3 x 200 = 600 GB/s. The
    PCIe path GPU -> NIC -> GPU (31.5 GB/s) is not NVLink fabric and must not add to it."""
    hcm = derive_hcm(fig7a)
    assert layer_shapes(hcm) == [(1, (4,)), (4, (4,))]
    top = hcm.layers[0].groups[0]
    assert top.ranks == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    assert np.all(off_diagonal(top.p2p_matrix_Bps()) == 25 * GB)
    assert np.all(top.group_bandwidths_Bps() == 25 * GB)
    for node, group in enumerate(hcm.layers[1].groups):
        assert group.ranks == tuple((4 * node + i,) for i in range(4))
        assert np.all(off_diagonal(group.p2p_matrix_Bps()) == 200 * GB)
        assert np.all(group.group_bandwidths_Bps() == 600 * GB)


def test_figure_7a_from_the_builder_is_per_direction():
    """The ib-cluster builder's Figure 7(a) node uses the vendor's 25 GB/s per NVLink per
    direction, so the same matrix reads 100 / 300 GB/s: half the paper's bidirectional figures."""
    spec = {"builder": "ib-cluster", "nodes": 4, "gpus_per_node": 4, "intra": "nvlink-mesh"}
    hcm = derive_hcm(load_topology(spec))
    assert layer_shapes(hcm) == [(1, (4,)), (4, (4,))]
    assert np.all(off_diagonal(hcm.layers[0].groups[0].p2p_matrix_Bps()) == 25 * GB)
    node = hcm.layers[1].groups[0]
    assert np.all(off_diagonal(node.p2p_matrix_Bps()) == 100 * GB)
    assert np.all(node.group_bandwidths_Bps() == 300 * GB)


RING_OF_4 = np.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]])


@pytest.mark.parametrize("how", ["builder", "by hand, no coords"])
def test_figure_7b_torus(how, hand_torus):
    """4x4 torus of 25 GB/s links: layer 1 = 4 rings (rows of consecutive ranks), P2P 4 x 25 =
    100 GB/s between neighbouring rings and 0 otherwise, group 2 x 100; layer 2 = the 4 GPUs of
    a ring, P2P 25 GB/s between ring neighbours, group 2 x 25."""
    topology = load_topology("torus:4x4") if how == "builder" else hand_torus(4, 4)
    hcm = derive_hcm(topology)
    assert layer_shapes(hcm) == [(1, (4,)), (4, (4,))]
    rings = hcm.layers[0].groups[0]
    assert rings.ranks == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    np.testing.assert_array_equal(rings.p2p_matrix_Bps(), 100 * GB * RING_OF_4)
    np.testing.assert_array_equal(rings.group_bandwidths_Bps(), [200 * GB] * 4)
    for ring in hcm.layers[1].groups:
        np.testing.assert_array_equal(ring.p2p_matrix_Bps(), 25 * GB * RING_OF_4)
        np.testing.assert_array_equal(ring.group_bandwidths_Bps(), [50 * GB] * 4)


def test_three_dimensional_torus_gets_three_layers():
    """4x4x4: planes of 16 (P2P 16 x 25 = 400 GB/s), rings of 4 in a plane (100), GPUs (25)."""
    hcm = derive_hcm(load_topology("torus:4x4x4"))
    assert layer_shapes(hcm) == [(1, (4,)), (4, (4,)), (16, (4,))]
    p2p = [layer.groups[0].p2p_Bps(0, 1) for layer in hcm.layers]
    group = [layer.groups[0].group_Bps(0) for layer in hcm.layers]
    assert p2p == [400 * GB, 100 * GB, 25 * GB]
    assert group == [800 * GB, 200 * GB, 50 * GB]


def test_torus_dimension_of_two_has_one_link(hand_torus):
    """2x4: the two rings are joined by one link per column (a size-2 dimension has no second
    wrap link), so the group bandwidth of a ring equals its P2P, 4 x 25 = 100 GB/s."""
    hcm = derive_hcm(hand_torus(2, 4))
    top = hcm.layers[0].groups[0]
    assert top.ranks == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert top.p2p_Bps(0, 1) == top.group_Bps(0) == 100 * GB


def test_a_single_ring_is_one_layer(hand_torus):
    hcm = derive_hcm(hand_torus(1, 8))
    assert layer_shapes(hcm) == [(1, (8,))]
    ring = hcm.layers[0].groups[0]
    assert ring.p2p_Bps(0, 1) == ring.p2p_Bps(0, 7) == 25 * GB
    assert ring.p2p_Bps(0, 2) == 0
    assert ring.group_Bps(3) == 50 * GB
