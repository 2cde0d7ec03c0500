"""The pipelined chain broadcast against an oracle written here from its definition, sharing
no helper with the code (issue 11, section 5): a buffer of n bytes is cut into
C = clamp(ceil(n / 1 MiB), 1, 256) chunks (atpsim.collectives.broadcast's documented chunk
size and cap); chunk c leaves rank 0 at step c and moves one hop per step, so the chain takes
p - 1 + C - 1 steps of n / C bytes, and every rank but the root receives each chunk once."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from atpsim.collectives.closed_form import collective_time_s
from atpsim.collectives.registry import build_schedule

MiB = 2**20


def oracle_chunks(nbytes: float) -> int:
    return max(1, min(256, math.ceil(nbytes / MiB)))


@pytest.mark.parametrize(
    ("nbytes", "chunks"),
    [(1, 1), (MiB, 1), (MiB + 1, 2), (3.5 * MiB, 4), (255 * MiB, 255), (256 * MiB, 256),
     (257 * MiB, 256), (10 * 2**30, 256)],
)  # fmt: skip
def test_chunk_counts_by_hand(nbytes, chunks):
    assert oracle_chunks(nbytes) == chunks
    schedule = build_schedule("broadcast", "ring", [[0, 1, 2, 3, 4]], nbytes)
    sizes = schedule.transfer_bytes.tolist()
    assert sizes == pytest.approx([nbytes / chunks] * len(sizes))
    assert len(sizes) == 4 * chunks  # 4 hops of a 5-rank chain, each chunk once


@pytest.mark.parametrize("p", [2, 3, 5, 8])
@pytest.mark.parametrize("nbytes", [1000.0, 3.5 * MiB, 300 * MiB])
def test_the_chain_moves_each_chunk_once_per_hop(p, nbytes):
    chunks = oracle_chunks(nbytes)
    schedule = build_schedule("broadcast", "ring", [list(range(p))], nbytes)
    hops = Counter(zip(schedule.src.tolist(), schedule.dst.tolist(), strict=True))
    assert hops == {(r, r + 1): chunks for r in range(p - 1)}
    assert int(schedule.step_index.max()) + 1 == p - 1 + chunks - 1
    received = Counter()
    for dst, size in zip(schedule.dst.tolist(), schedule.transfer_bytes.tolist(), strict=True):
        received[dst] += size
    assert sorted(received) == list(range(1, p))
    assert list(received.values()) == pytest.approx([nbytes] * (p - 1))


def test_closed_form_of_a_hand_example():
    """p = 4, n = 3.5 MiB: C = 4 chunks of 917,504 B, 3 + 3 = 6 steps, each 1 us plus
    917,504 B / 10 GB/s = 91.7504 us: 6 x 92.7504 us = 556.5024 us."""
    time_s = collective_time_s("broadcast", "ring", 4, 3.5 * MiB, 10e9, 1e-6)
    assert time_s == pytest.approx(556.5024e-6, rel=1e-12)
