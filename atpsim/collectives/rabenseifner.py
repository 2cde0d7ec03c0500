"""Recursive halving / doubling: Rabenseifner all-reduce, reduce-scatter and all-gather.

Rabenseifner's all-reduce (Thakur, Rabenseifner and Gropp 2005, ref [27]; MPICH's
``allreduce_intra_reduce_scatter_allgather``) is a recursive-halving reduce-scatter (partner at
distance 1 first, half the buffer; then distance 2, a quarter; ...) followed by the mirror-image
recursive-doubling all-gather. When ``p`` is not a power of two, ``rem = p - 2^floor(log2 p)``
extra ranks fold in first: even rank ``2i`` (``i < rem``) sends its buffer to ``2i + 1`` and
sits out; the power-of-two *core* runs; then ``2i + 1`` sends the result back (unfold).

Core rank ``i`` ends the halving owning core block ``bitrev(i)``. For all-reduce the ``pof2``
blocks are equal (``n / pof2``, as MPICH splits the count). Stand-alone reduce-scatter and
all-gather use the same exchanges on ``p`` pieces of ``n / p``: a core rank that absorbed a
folded partner owns two pieces, so its block weighs two.
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Step, Steps, step


def core_layout(p: int) -> tuple[int, int, np.ndarray]:
    """``(pof2, rem, core_rank)``: *core_rank[i]* is the local rank of core rank ``i``."""
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    core = np.arange(pof2)
    return pof2, rem, np.where(core < rem, 2 * core + 1, core + rem)


def bit_reverse(values: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros_like(values)
    for b in range(bits):
        out |= ((values >> b) & 1) << (bits - 1 - b)
    return out


def _block_sizes(pof2: int, owner_weight: np.ndarray, piece_bytes: float) -> np.ndarray:
    """Bytes of core block ``b``: the weight of its final owner ``bitrev(b)`` times a piece."""
    bits = pof2.bit_length() - 1
    return owner_weight[bit_reverse(np.arange(pof2), bits)] * piece_bytes


def halving_steps(pof2: int, block_bytes: np.ndarray, core_rank: np.ndarray) -> list[Step]:
    """Recursive halving over core ranks: at mask ``m`` rank ``i`` keeps the half of its
    segment chosen by bit ``m`` of ``i`` and sends the other half to ``i ^ m``."""
    cum = np.concatenate([[0.0], np.cumsum(block_bytes)])
    i = np.arange(pof2)
    lo, hi = np.zeros(pof2, dtype=np.int64), np.full(pof2, pof2, dtype=np.int64)
    steps = []
    mask = 1
    while mask < pof2:
        mid = (lo + hi) // 2
        upper = (i & mask) != 0
        send_lo, send_hi = np.where(upper, lo, mid), np.where(upper, mid, hi)
        steps.append(step(core_rank[i], core_rank[i ^ mask], cum[send_hi] - cum[send_lo]))
        lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
        mask <<= 1
    return steps


def doubling_steps(pof2: int, block_bytes: np.ndarray, core_rank: np.ndarray) -> list[Step]:
    """Recursive doubling, the halving run backwards: rank ``i`` sends the segment it holds."""
    bits = pof2.bit_length() - 1
    cum = np.concatenate([[0.0], np.cumsum(block_bytes)])
    i = np.arange(pof2)
    lo = bit_reverse(i, bits)
    hi = lo + 1
    steps = []
    mask = pof2 >> 1
    while mask >= 1:
        steps.append(step(core_rank[i], core_rank[i ^ mask], cum[hi] - cum[lo]))
        size = hi - lo
        upper = (i & mask) != 0
        lo, hi = np.where(upper, lo - size, lo), np.where(upper, hi, hi + size)
        mask >>= 1
    return steps


def _fold(rem: int, nbytes: float, *, back: bool) -> list[Step]:
    if rem == 0:
        return []
    even = 2 * np.arange(rem)
    return [step(even + 1, even, nbytes) if back else step(even, even + 1, nbytes)]


def rabenseifner_all_reduce(p: int, nbytes: float) -> Pattern:
    """Fold (``n``), halving (``n/2, n/4, ...``), doubling (``..., n/4, n/2``), unfold (``n``)."""
    if p < 2:
        return Steps.of(())
    pof2, rem, core = core_layout(p)
    blocks = np.full(pof2, nbytes / pof2)
    return Steps.of(
        _fold(rem, nbytes, back=False)
        + halving_steps(pof2, blocks, core)
        + doubling_steps(pof2, blocks, core)
        + _fold(rem, nbytes, back=True)
    )


def piece_layout(p: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """``(pof2, rem, core_rank, weight)`` for reduce-scatter / all-gather over ``p`` pieces:
    core rank ``i < rem`` holds its folded partner's piece too (weight 2)."""
    pof2, rem, core = core_layout(p)
    weight = np.where(np.arange(pof2) < rem, 2.0, 1.0)
    return pof2, rem, core, weight


def rabenseifner_reduce_scatter(p: int, nbytes: float) -> Pattern:
    """Recursive-halving reduce-scatter of an ``n``-byte input into ``p`` pieces of ``n/p``."""
    if p < 2:
        return Steps.of(())
    pof2, rem, core, weight = piece_layout(p)
    blocks = _block_sizes(pof2, weight, nbytes / p)
    return Steps.of(
        _fold(rem, nbytes, back=False)
        + halving_steps(pof2, blocks, core)
        + _fold(rem, nbytes / p, back=True)
    )


def rabenseifner_all_gather(p: int, nbytes: float) -> Pattern:
    """Recursive-doubling all-gather of ``p`` pieces of ``n/p`` into an ``n``-byte output."""
    if p < 2:
        return Steps.of(())
    pof2, rem, core, weight = piece_layout(p)
    blocks = _block_sizes(pof2, weight, nbytes / p)
    return Steps.of(
        _fold(rem, nbytes / p, back=False)
        + doubling_steps(pof2, blocks, core)
        + _fold(rem, nbytes - nbytes / p, back=True)
    )
