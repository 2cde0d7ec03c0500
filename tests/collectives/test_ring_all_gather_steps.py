"""A ring all-gather on p ranks takes p - 1 steps of n/p (each rank already holds its own
chunk): each rank sends (p-1)/p · n in all, and on a non-blocking switch the time is
(p - 1)(alpha + n/(p·B)). Held for the plain ring (atpsim.collectives.ring), the bidirectional
ring, and NCCL's channel rings (atpsim.collectives.channels.RING_STEPS) as a run counts them.

Guards issue 25's mutation 7 (the all-gather ring with p steps instead of p - 1)."""

from __future__ import annotations

import pytest

from atpsim.collectives.channels import channel_ring_pattern
from atpsim.collectives.ring import bidirectional_all_gather, ring_all_gather
from atpsim.engine.collective import run_collective
from atpsim.engine.nccl import run_nccl
from atpsim.topology.spec import load_topology
from tests.engine.conftest import star


def sent_bytes(pattern) -> float:
    return sum(float(s.nbytes.sum()) for s in pattern)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_the_ring_takes_p_minus_1_steps_of_n_over_p(p):
    """8 MB on p ranks: p - 1 steps, each rank sending 8/p MB per step, (p-1)·8 MB in all."""
    pattern = ring_all_gather(p, 8e6)
    assert len(pattern) == p - 1
    assert all(len(s) == p and set(s.nbytes.tolist()) == {8e6 / p} for s in pattern)
    assert sent_bytes(pattern) == pytest.approx((p - 1) * 8e6, rel=1e-12)


@pytest.mark.parametrize("p", [3, 4, 8])
def test_the_bidirectional_ring_takes_p_minus_1_steps(p):
    """Half each way round: p - 1 steps of 2p transfers of (n/2)/p, (p-1)·n in all again."""
    pattern = bidirectional_all_gather(p, 8e6)
    assert len(pattern) == p - 1
    assert sent_bytes(pattern) == pytest.approx((p - 1) * 8e6, rel=1e-12)


def test_nccl_channel_rings_take_p_minus_1_steps():
    """Two channels over 8 ranks, 16 MiB: 7 steps of 16 transfers of 1 MiB (n / (C·p))."""
    orders = (tuple(range(8)), tuple(reversed(range(8))))
    pattern = channel_ring_pattern("all_gather", orders, 2**24)
    assert len(pattern) == 7
    assert all(len(s) == 16 and set(s.nbytes.tolist()) == {2**20} for s in pattern)


def test_a_ring_on_a_switch_moves_p_minus_1_over_p_of_the_buffer_per_link():
    """4 GPUs on one switch (100 GB/s links, 1 us each, so alpha = 2 us a transfer), 4 MB:
    12 flows of 1 MB, 3 MB up and 3 MB down every GPU's cable, and 3 · (2 us + 1 MB / 100 GB/s)
    = 3 · 12 us = 36 us."""
    result = run_collective(star(4), "all_gather", "ring", [list(range(4))], 4e6)
    assert result.n_flows == 12
    assert result.bytes_delivered == pytest.approx(12e6, rel=1e-12)
    assert result.link_bytes == pytest.approx([3e6] * 8, rel=1e-12)
    assert result.time_s == pytest.approx(36e-6, rel=1e-9)


@pytest.mark.parametrize(
    "spec, flows", [("dgx-a100", 8 * 7), ("ib-cluster:2x8,nics_per_node=4", 4 * 16 * 15)]
)
def test_nccls_ring_sends_p_minus_1_over_p_of_the_buffer_from_every_gpu(spec, flows):
    """16 MiB on every GPU of the machine: C channels of p(p-1) flows (dgx-a100: one channel,
    56; two nodes of 4 NICs: four channels of 16 · 15), and every GPU sends and receives
    (p-1)/p · 16 MiB over its links (14 MiB on 8 GPUs, 15 MiB on 16)."""
    topology = load_topology(spec)
    p = topology.n_gpus
    call = run_nccl(topology, "all_gather", "ring", [list(range(p))], 2**24, protocol="Simple")
    assert call.n_flows == flows
    for rank in range(p):
        gpu = topology.gpu(rank)
        near = list(topology.graph.neighbors(gpu))
        sent = sum(call.link_bytes[topology.link_id(gpu, v)] for v in near)
        received = sum(call.link_bytes[topology.link_id(v, gpu)] for v in near)
        assert sent == pytest.approx((p - 1) / p * 2**24, rel=1e-12)
        assert received == pytest.approx((p - 1) / p * 2**24, rel=1e-12)
