"""Invariants on random small cases (hypothesis): the auto engine gives the reference run's
answer, bytes are conserved, reduce-scatter + all-gather = all-reduce, time grows with bytes,
bus bandwidth never exceeds the bottleneck."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import atpsim.engine.solvers.flow_network as flow_network
from atpsim.collectives.registry import algorithm_names
from atpsim.engine import collective
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import find
from tests.engine.conftest import star, tree

TOPOLOGIES = {
    "tree": tree(3, 3, [100e9, 40e9, 25e9, 70e9]),
    "star": star(9, latency_s=5e-7, slow=(4, 20e9)),
}
OPS = [(op, alg) for op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")
       for alg in algorithm_names(op)]


@st.composite
def cases(draw):
    topo = draw(st.sampled_from(sorted(TOPOLOGIES)))
    ranks = draw(st.permutations(range(9)))
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).filter(lambda s: sum(s) <= 9))
    groups, at = [], 0
    for size in sizes:
        groups.append(list(ranks[at:at + size]))
        at += size
    op, alg = draw(st.sampled_from(OPS))
    nbytes = draw(st.sampled_from([1e3, 1e6, 3e7]))
    return TOPOLOGIES[topo], op, alg, groups, nbytes


@settings(max_examples=120, deadline=None, derandomize=True)
@given(cases())
def test_fast_paths_equal_the_reference_run(case):
    topo, op, alg, groups, nbytes = case
    fast = run_collective(topo, op, alg, groups, nbytes, engine="auto")
    plain = run_collective(topo, op, alg, groups, nbytes, engine="reference")
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9, abs=1e-15)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-9, abs=1e-3)
    assert fast.n_flows == plain.n_flows
    assert plain.bytes_delivered == pytest.approx(plain.bytes_sent, rel=1e-9)
    assert fast.bytes_delivered == pytest.approx(fast.bytes_sent, rel=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cases())
def test_lazy_rate_updates_equal_full_recomputes(case):
    """Solving only the touched component gives the same rates as solving everything."""
    topo, op, alg, groups, nbytes = case
    lazy = run_collective(topo, op, alg, groups, nbytes + 1, engine="reference")
    saved = flow_network.MAX_EXPAND_ROUNDS
    flow_network.MAX_EXPAND_ROUNDS = 0
    try:
        full = collective._run(topo, op, alg, tuple(map(tuple, groups)), nbytes + 1,
                               find("engine", "reference"), None)
    finally:
        flow_network.MAX_EXPAND_ROUNDS = saved
    assert lazy.group_time_s == pytest.approx(full.group_time_s, rel=1e-9)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 8])
@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "bidirectional-ring"])
def test_reduce_scatter_plus_all_gather_is_all_reduce_on_a_switch(p, algorithm):
    """Ring always; Rabenseifner when p is a power of two (else its fold sizes differ)."""
    if algorithm == "rabenseifner" and p & (p - 1):
        pytest.skip("non-power-of-two Rabenseifner folds n, its reduce-scatter n then n/p")
    topo = star(p)
    group = [list(range(p))]
    rs = run_collective(topo, "reduce_scatter", algorithm, group, 1e8).time_s
    ag = run_collective(topo, "all_gather", algorithm, group, 1e8).time_s
    ar = run_collective(topo, "all_reduce", algorithm, group, 1e8).time_s
    assert rs + ag == pytest.approx(ar, rel=1e-12)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cases(), st.floats(1.01, 4.0))
def test_time_grows_with_bytes(case, factor):
    """Except the pipelined-chain broadcast: its chunk count steps up with the size (1 MiB
    chunks), and one more pipeline stage can make a larger buffer finish sooner, as in NCCL."""
    topo, op, alg, groups, nbytes = case
    if (op, alg) == ("broadcast", "ring"):
        return
    small = run_collective(topo, op, alg, groups, nbytes).time_s
    large = run_collective(topo, op, alg, groups, nbytes * factor).time_s
    assert large >= small
    if small > 0:
        assert large > small


def injection_Bps(topo, rank):
    """Bandwidth of the one link leaving GPU *rank* in these test topologies."""
    node = topo.node_index[topo.gpu(rank)]
    return float(topo.links.bandwidth_Bps[topo.links.src == node].max())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cases())
def test_bus_bandwidth_never_exceeds_the_bottleneck(case):
    """Some rank of the group sends at least busbw-factor * n bytes (ring: every rank sends
    2(p-1)/p n in an all-reduce; a folded Rabenseifner rank sends n), all through its one GPU
    link, so busbw <= the fastest injection link of the group."""
    topo, op, alg, groups, nbytes = case
    result = run_collective(topo, op, alg, groups, nbytes)
    for group, t in zip(groups, result.group_time_s, strict=True):
        if len(group) > 1:
            bound = max(injection_Bps(topo, r) for r in group)
            assert result.busbw_Bps(op, len(group), nbytes) * result.time_s / t <= bound * (1 + 1e-9)
