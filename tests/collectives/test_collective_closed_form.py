"""Two backends, one oracle: the engine on a non-blocking switch equals each closed form."""

import pytest

from atpsim.collectives.closed_form import bus_factor, collective_time_s
from atpsim.collectives.registry import algorithm_names, op_names
from atpsim.engine.runner import run_collective
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import star

B, LINK_LAT = 50e9, 7e-7
ALL = [(op, alg) for op in op_names() for alg in algorithm_names(op)]


@pytest.mark.parametrize("op,algorithm", ALL)
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8, 11])
@pytest.mark.parametrize("nbytes", [4096.0, 3 * 2**20 + 5, 2.0**30])
def test_engine_equals_the_closed_form_on_a_switch(op, algorithm, p, nbytes):
    """On a switch the bidirectional ring's halves share each GPU's link: the ring's time."""
    topo = star(p, bandwidth_Bps=B, latency_s=LINK_LAT)
    result = run_collective(topo, op, algorithm, [list(range(p))], nbytes, engine="event")
    formula = "ring" if algorithm == "bidirectional-ring" else algorithm
    expected = collective_time_s(op, formula, p, nbytes, B, 2 * LINK_LAT)
    assert result.time_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("algorithm", ["ring", "bidirectional-ring"])
@pytest.mark.parametrize("p", [2, 3, 5, 8])
@pytest.mark.parametrize("engine", ["auto", "event"])
def test_engine_equals_the_closed_form_on_a_torus_ring(op, algorithm, p, engine):
    """A 1D torus of p GPUs: every ring hop is one link of its own, each direction apart."""
    topo = torus(dims=(p,), link_bandwidth_Bps=B, link_latency_s=LINK_LAT)
    result = run_collective(topo, op, algorithm, [list(range(p))], 3e7, engine=engine)
    expected = collective_time_s(op, algorithm, p, 3e7, B, LINK_LAT)
    assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_ring_all_reduce_by_hand():
    """p = 4, n = 1 GB, B = 100 GB/s, alpha = 1 us: 6 steps of (1 us + 2.5 ms) = 15.006 ms."""
    assert collective_time_s("all_reduce", "ring", 4, 1e9, 100e9, 1e-6) == pytest.approx(15.006e-3)


def test_rabenseifner_by_hand():
    """p = 8, n = 1 GB, B = 100 GB/s, alpha = 1 us: 2 * 7/8 * 10 ms + 6 us = 17.506 ms."""
    assert collective_time_s("all_reduce", "rabenseifner", 8, 1e9, 100e9, 1e-6) == pytest.approx(17.506e-3)


def test_bidirectional_ring_by_hand():
    """p = 4, n = 1 GB, B = 100 GB/s, alpha = 1 us: 6 steps of (1 us + 0.5 GB / 4 / B =
    1.25 ms) = 7.506 ms, about half the ring's 15.006 ms (Figure 7(b): GroupBW = 2 x P2P)."""
    t = collective_time_s("all_reduce", "bidirectional-ring", 4, 1e9, 100e9, 1e-6)
    assert t == pytest.approx(7.506e-3)
    rs = collective_time_s("reduce_scatter", "bidirectional-ring", 4, 1e9, 100e9, 1e-6)
    assert rs == pytest.approx(3.753e-3)


def test_trivial_sizes_cost_nothing():
    assert collective_time_s("all_reduce", "ring", 1, 1e9, 1e9, 1e-6) == 0.0
    assert collective_time_s("all_gather", "ring", 8, 0, 1e9, 1e-6) == 0.0


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("all_to_all", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 8) == 1.0
