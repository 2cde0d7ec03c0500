"""Two backends, one oracle: the engine on a non-blocking switch equals each closed form."""

import pytest

from atpsim.collectives.closed_form import bus_factor, collective_time_s
from atpsim.collectives.registry import algorithm_names, op_names
from atpsim.engine.runner import run_collective
from tests.engine.conftest import star

B, LINK_LAT = 50e9, 7e-7
ALL = [(op, alg) for op in op_names() for alg in algorithm_names(op)]


@pytest.mark.parametrize("op,algorithm", ALL)
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8, 11])
@pytest.mark.parametrize("nbytes", [4096.0, 3 * 2**20 + 5, 2.0**30])
def test_engine_equals_the_closed_form_on_a_switch(op, algorithm, p, nbytes):
    topo = star(p, bandwidth_Bps=B, latency_s=LINK_LAT)
    result = run_collective(topo, op, algorithm, [list(range(p))], nbytes, engine="event")
    expected = collective_time_s(op, algorithm, p, nbytes, B, 2 * LINK_LAT)
    assert result.time_s == pytest.approx(expected, rel=1e-9)


def test_ring_all_reduce_by_hand():
    """p = 4, n = 1 GB, B = 100 GB/s, alpha = 1 us: 6 steps of (1 us + 2.5 ms) = 15.006 ms."""
    assert collective_time_s("all_reduce", "ring", 4, 1e9, 100e9, 1e-6) == pytest.approx(15.006e-3)


def test_rabenseifner_by_hand():
    """p = 8, n = 1 GB, B = 100 GB/s, alpha = 1 us: 2 * 7/8 * 10 ms + 6 us = 17.506 ms."""
    assert collective_time_s("all_reduce", "rabenseifner", 8, 1e9, 100e9, 1e-6) == pytest.approx(17.506e-3)


def test_trivial_sizes_cost_nothing():
    assert collective_time_s("all_reduce", "ring", 1, 1e9, 1e9, 1e-6) == 0.0
    assert collective_time_s("all_gather", "ring", 8, 0, 1e9, 1e-6) == 0.0


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("all_to_all", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 8) == 1.0
