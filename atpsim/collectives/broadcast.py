"""Broadcast from the group's first rank: a pipelined chain ("ring") or a binomial tree.

*ring* (NCCL's ring broadcast): the buffer is cut into ``C`` chunks of at most
:data:`CHUNK_BYTES` (``C`` at most :data:`MAX_CHUNKS`); position ``i`` of the chain forwards
chunk ``j - i`` to position ``i + 1`` in step ``j``, so ``p - 1 + C - 1`` steps of ``n / C``.
*binomial* (MPICH's short-message broadcast): in step ``k`` every rank ``r < 2^k`` that has
the data sends all ``n`` bytes to ``r + 2^k``; ``ceil(log2 p)`` steps.
"""

from __future__ import annotations

import math

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, step

CHUNK_BYTES = 1 << 20
MAX_CHUNKS = 256


def chain_chunks(nbytes: float) -> int:
    """How many chunks the pipelined chain cuts *nbytes* into."""
    return int(min(MAX_CHUNKS, max(1, math.ceil(nbytes / CHUNK_BYTES))))


def ring_broadcast(p: int, nbytes: float) -> Pattern:
    if p < 2:
        return Steps.of(())
    chunks = chain_chunks(nbytes)
    steps = []
    for j in range(p - 1 + chunks - 1):
        senders = np.arange(max(0, j - chunks + 1), min(j, p - 2) + 1)
        steps.append(step(senders, senders + 1, nbytes / chunks))
    return Steps.of(steps)


def binomial_broadcast(p: int, nbytes: float) -> Pattern:
    if p < 2:
        return Steps.of(())
    steps = []
    span = 1
    while span < p:
        senders = np.arange(min(span, p - span))
        steps.append(step(senders, senders + span, nbytes))
        span <<= 1
    return Steps.of(steps)
