"""The closed forms by hand. The engine is held to them by a swap of collective timer
backends (tests/engine/test_engine_backends.py)."""

import pytest

from atpsim.collectives.closed_form import bus_factor, collective_time_s


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
