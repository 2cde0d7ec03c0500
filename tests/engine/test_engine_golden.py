"""Golden tests: numbers derived by hand, the derivation in each docstring.

Star: p GPUs on one non-blocking switch, every link B = 100 GB/s per direction, latency
1 us, so a transfer's path latency is alpha = 2 us and its bottleneck is B.
"""

import math

import pytest

from atpsim.engine.collective import run_collective

B, LINK_LAT = 100e9, 1e-6
ALPHA = 2 * LINK_LAT
N = 2**30


@pytest.mark.parametrize("engine", ["auto", "reference"])
@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 16])
def test_ring_all_reduce_on_a_switch(make_star, p, engine):
    """Ring all-reduce: 2(p-1) steps of n/p, each alpha + n/(pB), so
    T = 2(p-1)/p * n/B + 2(p-1) * alpha (e.g. p=8: 1.75 * 10.737 ms + 14 * 2 us = 18.819 ms)."""
    result = run_collective(make_star(p), "all_reduce", "ring", [list(range(p))], N, engine=engine)
    expected = 2 * (p - 1) / p * N / B + 2 * (p - 1) * ALPHA
    assert result.time_s == pytest.approx(expected, rel=1e-3)
    assert result.time_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("engine", ["auto", "reference"])
@pytest.mark.parametrize("p", [2, 4, 8, 16, 32])
def test_rabenseifner_all_reduce_on_a_switch(make_star, p, engine):
    """Rabenseifner, power-of-two p: halving sends n/2 + n/4 + ... + n/p = (p-1)/p * n in
    log2 p steps, doubling the same back: T = 2(p-1)/p * n/B + 2 log2(p) * alpha."""
    result = run_collective(make_star(p), "all_reduce", "rabenseifner", [list(range(p))], N, engine=engine)
    expected = 2 * (p - 1) / p * N / B + 2 * math.log2(p) * ALPHA
    assert result.time_s == pytest.approx(expected, rel=1e-9)
    # a GPU's links carry several partners' flows, one at a time: the sweep checks and is exact
    assert result.path == ("symmetry+longest-path" if engine == "auto" else "reference")


def test_rabenseifner_non_power_of_two_folds(make_star):
    """p = 6: rem = 2 extra ranks fold (n bytes, alpha + n/B) into a core of 4, which runs
    2 * 3/4 * n/B + 4 alpha, then unfold (alpha + n/B): T = 3.5 n/B + 6 alpha."""
    result = run_collective(make_star(6), "all_reduce", "rabenseifner", [list(range(6))], N)
    assert result.time_s == pytest.approx(3.5 * N / B + 6 * ALPHA, rel=1e-9)


@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_two_flows_on_one_link_each_get_half(make_two_switches, engine):
    """Groups {0, 2} and {1, 3} on two switches joined by one 100 GB/s uplink: both groups'
    transfers A->B cross it together (and B->A on the other direction), so each moves at
    B/2. Ring all-reduce with p = 2 is 2 steps of n/2, path latency 3 us:
    T = 2 * (3 us + (n/2) / (B/2)) = 2 * (3 us + n/B)."""
    topo = make_two_switches(2)
    result = run_collective(topo, "all_reduce", "ring", [[0, 2], [1, 3]], N, engine=engine)
    expected = 2 * (3 * LINK_LAT + N / B)
    assert result.group_time_s == pytest.approx((expected, expected), rel=1e-9)
    assert result.path == ("symmetry+event" if engine == "auto" else "reference")  # swap the switches


def test_two_groups_share_an_uplink_each_get_half_of_it(make_two_switches):
    """Same shape, GPU links 400 GB/s, uplink 100 GB/s: alone a group runs at 100 GB/s,
    together at 50 GB/s each: T = 2 (3 us + (n/2) / 50 GB/s), versus 2 (3 us + (n/2)/100 GB/s)."""
    topo = make_two_switches(2, bandwidth_Bps=400e9, uplink_Bps=100e9)
    alone = run_collective(topo, "all_reduce", "ring", [[0, 2]], N)
    together = run_collective(topo, "all_reduce", "ring", [[0, 2], [1, 3]], N)
    assert alone.time_s == pytest.approx(2 * (3e-6 + N / 2 / 100e9), rel=1e-9)
    assert together.time_s == pytest.approx(2 * (3e-6 + N / 2 / 50e9), rel=1e-9)


@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_a_ring_with_one_slow_hop_runs_at_that_link_rate(make_star, engine):
    """GPU 3's link at 10 GB/s (the others 100): the hop 3 -> 4 (up at 10) and 2 -> 3 (down
    at 10) are slow; every step waits for them (rendezvous), so each of the 2(p-1) steps
    costs alpha + n/(p * 10 GB/s): T = 2(p-1) (alpha + n/(p B_slow))."""
    p, slow = 8, 10e9
    topo = make_star(p, slow=(3, slow))
    result = run_collective(topo, "all_reduce", "ring", [list(range(p))], N, engine=engine)
    assert result.time_s == pytest.approx(2 * (p - 1) * (ALPHA + N / p / slow), rel=1e-3)


@pytest.mark.parametrize("op,algorithm", [("all_reduce", "ring"), ("all_reduce", "rabenseifner"),
                                          ("broadcast", "binomial"), ("all_to_all", "pairwise")])
@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_bytes_delivered_equal_bytes_sent(make_tree, op, algorithm, engine):
    """Every flow delivers its bytes: sum over flows, and per link (bytes x route length)."""
    topo = make_tree(3, 3, [100e9, 50e9, 25e9])
    result = run_collective(topo, op, algorithm, [list(range(9))], 3e6, engine=engine)
    assert result.bytes_delivered == pytest.approx(result.bytes_sent, rel=1e-9)
    assert result.bytes_sent > 0


def test_link_bytes_of_a_ring_on_a_switch(make_star):
    """Ring all-reduce on a star: each GPU's up and down link carries 2(p-1) chunks of n/p."""
    p = 4
    topo = make_star(p)
    result = run_collective(topo, "all_reduce", "ring", [list(range(p))], N)
    per_link = 2 * (p - 1) * N / p
    assert result.link_bytes.tolist() == pytest.approx([per_link] * (2 * p), rel=1e-9)


def test_a_group_of_one_and_zero_bytes_cost_nothing(make_star):
    topo = make_star(4)
    assert run_collective(topo, "all_reduce", "ring", [[0], [1]], N).time_s == 0.0
    assert run_collective(topo, "all_reduce", "ring", [[0, 1, 2, 3]], 0).time_s == 0.0
    mixed = run_collective(topo, "all_reduce", "ring", [[0], [1, 2]], N)
    assert mixed.group_time_s[0] == 0.0 and mixed.group_time_s[1] > 0


@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner"])
@pytest.mark.parametrize("dim", [1, 2])
def test_identical_link_disjoint_groups_are_simulated_once(algorithm, dim):
    """DeviceMesh(4, 4) on a 4x4 torus: each dimension's groups are the torus' rows or
    columns, link-disjoint and alike, so auto simulates one and replicates it; the plain
    reference run simulating all four jointly agrees, link by link."""
    from atpsim.parallel.mesh import DeviceMesh
    from atpsim.topology.spec import load_topology

    topo = load_topology("torus:4x4")
    groups = DeviceMesh(4, 4).groups(dim)
    fast = run_collective(topo, "all_reduce", algorithm, groups, N)
    plain = run_collective(topo, "all_reduce", algorithm, groups, N, engine="reference")
    assert fast.path.startswith("replicated+") and plain.path == "reference"
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-9)
    one = run_collective(topo, "all_reduce", algorithm, groups[:1], N)
    assert fast.n_flows == plain.n_flows == 4 * one.n_flows
    assert fast.time_s == pytest.approx(one.time_s, rel=1e-12)


def test_a_repeat_is_memoized(make_star):
    topo = make_star(8)
    first = run_collective(topo, "all_reduce", "ring", [list(range(8))], N)
    assert run_collective(topo, "all_reduce", "ring", [tuple(range(8))], N) is first
    assert run_collective(topo, "all_reduce", "ring", [list(range(8))], N, engine="reference") is not first


def test_the_longest_path_engine_refuses_when_links_are_shared(make_two_switches):
    from atpsim.errors import SimulationError

    with pytest.raises(SimulationError, match="not exact"):
        run_collective(make_two_switches(2), "all_reduce", "ring", [[0, 2], [1, 3]], N, engine="longest-path")


def test_an_unknown_engine_names_the_nearest(make_star):
    from atpsim.errors import SimulationError

    with pytest.raises(SimulationError, match="did you mean 'reference'"):
        run_collective(make_star(4), "all_reduce", "ring", [[0, 1, 2, 3]], N, engine="referense")


def test_the_memo_is_bounded(make_star, monkeypatch):
    from atpsim.engine import collective

    monkeypatch.setattr(collective, "MEMO_ENTRIES", 3)
    topo = make_star(4)
    for size in range(1, 10):
        run_collective(topo, "all_reduce", "ring", [[0, 1, 2, 3]], float(size))
    assert len(collective._MEMO[topo]) <= 3
