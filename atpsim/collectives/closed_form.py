"""The oracle: each algorithm's time on uniform links with no contention.

Every transfer costs ``alpha + bytes / B`` (alpha = *latency_s*, the end-to-end latency of one
transfer's path; B = *bandwidth_Bps*, its bottleneck). They are the ``closed-form`` collective
timer backend (:mod:`atpsim.engine.backends`), and the link-level engine is held to them where
nothing is shared by a swap of backends (tests/engine/test_engine_backends.py). References:
Thakur, Rabenseifner and Gropp 2005 (ref [27]), Patarasuk and Yuan 2009 (ring), nccl-tests'
PERFORMANCE.md (bus bandwidth).
"""

from __future__ import annotations

import math

import numpy as np

from atpsim.collectives.broadcast import chain_chunks
from atpsim.collectives.nvls import nvls_time_s
from atpsim.collectives.rabenseifner import bit_reverse, core_layout, piece_layout
from atpsim.collectives.registry import check_algorithm
from atpsim.errors import SimulationError


def collective_time_s(
    op: str, algorithm: str, p: int, nbytes: float, bandwidth_Bps: float, latency_s: float
) -> float:
    """Time (s) of *op* by *algorithm* on *p* ranks for an *nbytes* buffer (nccl-tests sizes)."""
    check_algorithm(op, algorithm)
    if p < 1:
        raise SimulationError(f"expected a group size >= 1, got {p}")
    if p == 1 or nbytes == 0:
        return 0.0
    a, n, b = latency_s, float(nbytes), bandwidth_Bps
    if algorithm == "ring" and op in ("reduce_scatter", "all_gather"):
        return (p - 1) * (a + n / p / b)  # p-1 steps of n/p
    if algorithm == "ring" and op == "all_reduce":
        return 2 * (p - 1) * (a + n / p / b)  # reduce-scatter + all-gather
    if algorithm == "nvls":
        return nvls_time_s(p, n, b, a)  # n up and n down each GPU link, at once
    if algorithm == "bidirectional-ring":
        return _bidirectional(op, p, n, b, a)
    if algorithm == "rabenseifner":
        return _rabenseifner(op, p, n, b, a)
    if op in ("broadcast", "reduce"):  # a reduce is the broadcast reversed (collectives.reduce)
        if algorithm == "ring":
            chunks = chain_chunks(n)
            return (p - 1 + chunks - 1) * (a + n / chunks / b)  # pipeline fill + drain
        return math.ceil(math.log2(p)) * (a + n / b)  # binomial: ceil(log2 p) rounds of n
    if op == "all_to_all":
        return (p - 1) * (a + n / p / b)  # pairwise: p-1 steps of n/p
    if op == "sendrecv":
        return a + n / b  # one step: n to the next rank
    raise SimulationError(f"no closed form for {op} by {algorithm}")


def _bidirectional(op: str, p: int, n: float, b: float, a: float) -> float:
    """Both directions of a ring of full-duplex links at once, ``(n/2)/p`` each way per step
    (so ``2(p-1)/p * (n/2)/B + 2(p-1) alpha`` for all-reduce): exact where the clockwise and
    counter-clockwise hops use different links (a torus ring). On a switch both halves share
    each GPU's link and the plain ring's time is what the engine gives. ``p = 2`` is the ring."""
    if p == 2:
        return collective_time_s(op, "ring", p, n, b, a)
    steps = 2 * (p - 1) if op == "all_reduce" else p - 1
    return steps * (a + n / 2 / p / b)


def _rabenseifner(op: str, p: int, n: float, b: float, a: float) -> float:
    pof2, rem, _ = core_layout(p)
    log_p = pof2.bit_length() - 1
    if op == "all_reduce":
        core = 2 * log_p * a + 2 * (pof2 - 1) / pof2 * n / b  # Thakur et al. 2005, Sec. 4.4
        return core + (2 * (a + n / b) if rem else 0.0)  # fold and unfold move n each
    if rem == 0:
        return log_p * a + (p - 1) / p * n / b  # halving (or doubling) alone
    return _weighted_core_time(op, p, n, b, a)


def _weighted_core_time(op: str, p: int, n: float, b: float, a: float) -> float:
    """Non-power-of-two reduce-scatter / all-gather: the core exchanges unequal segments, so
    the time follows the recurrence ``done_i = max(done_i, done_j) + alpha + max(bytes)/B``
    over partner pairs, between a fold and an unfold."""
    pof2, rem, _, weight = piece_layout(p)
    bits = pof2.bit_length() - 1
    block = weight[bit_reverse(np.arange(pof2), bits)] * n / p
    cum = np.concatenate([[0.0], np.cumsum(block)])
    i = np.arange(pof2)
    folded = i < rem
    fold_in, fold_out = (n, n / p) if op == "reduce_scatter" else (n / p, n - n / p)
    done = np.where(folded, a + fold_in / b, 0.0)
    if op == "reduce_scatter":
        lo, hi, masks = np.zeros(pof2, int), np.full(pof2, pof2), [1 << k for k in range(bits)]
    else:
        lo, masks = bit_reverse(i, bits), [1 << k for k in reversed(range(bits))]
        hi = lo + 1
    for m in masks:
        j = i ^ m
        upper = (i & m) != 0
        if op == "reduce_scatter":
            mid = (lo + hi) // 2
            sent = np.where(upper, cum[mid] - cum[lo], cum[hi] - cum[mid])
            lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
        else:
            sent = cum[hi] - cum[lo]
            size = hi - lo
            lo, hi = np.where(upper, lo - size, lo), np.where(upper, hi, hi + size)
        done = np.maximum(done, done[j]) + a + np.maximum(sent, sent[j]) / b
    return float(np.max(np.where(folded, done + a + fold_out / b, done)))


def bus_factor(op: str, p: int) -> float:
    """nccl-tests' busbw / algbw (PERFORMANCE.md): 2(p-1)/p for all-reduce, (p-1)/p for
    reduce-scatter, all-gather and all-to-all, 1 for broadcast, reduce and sendrecv."""
    if p <= 1:
        return 0.0 if op not in ("broadcast", "reduce", "sendrecv") else 1.0
    factors = {"all_reduce": 2 * (p - 1) / p, "reduce_scatter": (p - 1) / p,
               "all_gather": (p - 1) / p, "all_to_all": (p - 1) / p, "broadcast": 1.0,
               "reduce": 1.0, "sendrecv": 1.0}
    if op not in factors:
        raise SimulationError(f"no bus bandwidth factor for {op!r}")
    return factors[op]
