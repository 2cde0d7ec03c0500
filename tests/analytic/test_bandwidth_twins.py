"""P2P and group bandwidths shared across twin switches equal a max-flow per pair.

:class:`atpsim.analytic.bandwidths._TwinFlows` computes one max-flow per orbit of its ends
under permutations of twin switches; here every class pair's entry is held to its own
max-flow (:func:`_max_flow` on that pair), on the builders' fabrics (fat trees, rail
wiring, oversubscribed leaves, PCIe trees) and on random small ones where switches are twins
or only nearly so.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.analytic import bandwidths
from atpsim.analytic.grouping import group_tree
from atpsim.analytic.quotient import quotient, series_reduce
from atpsim.topology.spec import load_topology


def switched_groups(topology):
    """(adjacency, n_ranks) of every group whose bandwidths take max-flows."""
    found = []
    for group in group_tree(topology).walk():
        if group.is_leaf:
            continue
        adjacency, _ = quotient(topology, group)
        series_reduce(adjacency, len(group.children))
        if any(v >= len(group.children) for v in adjacency):
            found.append((adjacency, len(group.children)))
    return found


@pytest.mark.parametrize("topology", [
    "ib-cluster:16x8,leaf_size=20", "ib-cluster:12x8,wiring=rail",
    "ib-cluster:16x8,oversubscription=2", "ib-cluster:6x8,intra=nvlink-mesh", "pcie-tree:16",
    "nvlink-pairs:16"])
def test_every_class_pair_equals_its_own_max_flow(topology):
    groups = switched_groups(load_topology(topology))
    assert groups
    for adjacency, n_ranks in groups:
        assert_each_entry_is_its_max_flow(adjacency, n_ranks)


def assert_each_entry_is_its_max_flow(adjacency, n_ranks):
    result = bandwidths._by_class(adjacency, n_ranks)
    _, representatives = bandwidths._classes(adjacency, n_ranks)
    for c, members in enumerate(representatives):
        alone = bandwidths._max_flow(adjacency, n_ranks, members[0], None)
        assert result.class_group_Bps[c] == alone
        for d, others in enumerate(representatives):
            b = others[0] if d != c else (members[1] if len(members) > 1 else None)
            if b is not None:
                assert result.class_p2p_Bps[c, d] == bandwidths._max_flow(
                    adjacency, n_ranks, members[0], b)


@st.composite
def fabrics(draw):
    """A random quotient: ranks 0..R-1 on switches R.., links of a few bandwidths (so some
    switches are twins and some only look alike), now and then a direct rank-rank link."""
    n_ranks, n_switches = draw(st.integers(2, 6)), draw(st.integers(1, 5))
    adjacency = {v: {} for v in range(n_ranks + n_switches)}

    def link(a, b, bandwidth):
        if bandwidth:
            adjacency[a][b] = adjacency[b][a] = bandwidth

    for a in range(n_ranks, n_ranks + n_switches):
        for b in range(a + 1, n_ranks + n_switches):
            link(a, b, draw(st.sampled_from([0.0, 0.0, 25e9, 50e9])))
    for r in range(n_ranks):
        for x in draw(st.lists(st.integers(n_ranks, n_ranks + n_switches - 1), min_size=1,
                               max_size=2, unique=True)):
            link(r, x, draw(st.sampled_from([25e9, 100e9])))
    if draw(st.booleans()):
        link(0, 1, 50e9)
    return adjacency, n_ranks


@settings(max_examples=60, deadline=None, derandomize=True)
@given(fabrics())
def test_random_fabrics_every_entry_is_its_max_flow(fabric):
    assert_each_entry_is_its_max_flow(*fabric)


def test_a_fat_trees_top_layer_takes_three_max_flows(monkeypatch):
    """64 nodes on 32 leaves of two nodes: 32 rank classes, 32 + 32 + 496 entries, all alike
    by leaf permutations: GroupBW, P2P within a leaf, P2P across leaves."""
    calls = []
    real = bandwidths._max_flow
    monkeypatch.setattr(bandwidths, "_max_flow", lambda *a: calls.append(a) or real(*a))
    adjacency, n_ranks = switched_groups(load_topology("ib-cluster:64x8"))[0]
    result = bandwidths._by_class(adjacency, n_ranks)
    assert n_ranks == 64 and len(result.class_group_Bps) == 32
    assert len(calls) == 3
    assert len(np.unique(result.class_p2p_Bps[~np.eye(32, dtype=bool)])) == 1
