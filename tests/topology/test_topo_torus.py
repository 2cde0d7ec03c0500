"""torus builder and dimension-order routing."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.errors import TopologyError
from atpsim.topology.builders.torus import coords_of, rank_of, square_dims, torus


def wrapped_manhattan(a, b, dims):
    return sum(min((x - y) % n, (y - x) % n) for x, y, n in zip(a, b, dims, strict=True))


def test_2d_torus_counts_degrees_and_bandwidth():
    topo = torus((4, 4))
    assert topo.n_gpus == 16
    assert topo.graph.number_of_edges() == 32
    assert all(deg == 4 for _, deg in topo.graph.degree())
    assert set(topo.links.bandwidth_Bps) == {25e9}
    assert set(topo.links.kind) == {"torus"}


def test_size_two_dimension_gets_one_link_and_size_one_none():
    topo = torus((2, 3, 1))
    # dim 0 (size 2): 3 links; dim 1 (size 3): 2 rings of 3 links; dim 2: none
    assert topo.graph.number_of_edges() == 3 + 6
    assert all(deg == 3 for _, deg in topo.graph.degree())


def test_rank_is_row_major_index_of_coords():
    topo = torus((3, 4, 5))
    for rank in range(topo.n_gpus):
        coords = topo.graph.nodes[topo.gpu_nodes[rank]]["coords"]
        assert coords == coords_of(rank, (3, 4, 5))
        assert rank_of(coords, (3, 4, 5)) == rank
    assert coords_of(1, (3, 4, 5)) == (0, 0, 1)


def test_route_goes_dimension_0_first_and_positive_on_a_tie():
    topo = torus((4, 4))
    # (0,0) -> (2,2): both half way round; positive direction, dimension 0 first
    assert topo.route_nodes(0, 10) == ["gpu0", "gpu4", "gpu8", "gpu9", "gpu10"]
    # (0,0) -> (3,3): one step back in each dimension
    assert topo.route_nodes(0, 15) == ["gpu0", "gpu12", "gpu15"]


@settings(max_examples=60, deadline=None)
@given(
    dims=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    data=st.data(),
)
def test_route_length_is_wrapped_manhattan_distance(dims, data):
    topo = torus(tuple(dims))
    n = math.prod(dims)
    src = data.draw(st.integers(0, n - 1))
    dst = data.draw(st.integers(0, n - 1))
    route = topo.route(src, dst)
    assert len(route) == wrapped_manhattan(coords_of(src, dims), coords_of(dst, dims), dims)
    nodes = topo.route_nodes(src, dst)
    assert nodes[0] == topo.gpu_nodes[src] and nodes[-1] == topo.gpu_nodes[dst]


def test_every_route_on_small_tori_is_a_path_of_links():
    for dims in [(2, 2), (3, 5), (2, 2, 2)]:
        topo = torus(dims)
        for a, b in itertools.product(range(topo.n_gpus), repeat=2):
            path = topo.route_nodes(a, b)
            assert all(topo.graph.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_square_dims():
    assert square_dims(16) == (4, 4)
    assert square_dims(32) == (4, 8)
    assert square_dims(7) == (1, 7)
    assert square_dims(4096) == (64, 64)


@pytest.mark.parametrize("bad", [(), (0, 4), (4, -1), "4x4"])
def test_bad_dims(bad):
    with pytest.raises(TopologyError, match="dims"):
        torus(bad)


def test_negative_bandwidth():
    with pytest.raises(TopologyError, match="link_bandwidth_Bps"):
        torus((2, 2), link_bandwidth_Bps=-1)
