"""Ring algorithms: reduce-scatter, all-gather and all-reduce = reduce-scatter then all-gather.

Local rank ``r`` sends to ``(r + 1) mod p`` in every step, one ``n/p`` chunk per step
(Patarasuk and Yuan 2009; NCCL's ring). The ring follows the order of the group.
Reduce-scatter and all-gather take ``p - 1`` steps, all-reduce ``2(p - 1)``; the steps are
declared as one template repeated (:func:`~atpsim.collectives.schedule.repeat`), so a ring of
4096 ranks costs two small arrays, not 8190, and the engine knows every step is alike.

The *bidirectional* ring (TPU-style all-reduce on a torus, where a ring of ICI links can be
used in both directions at once) cuts the buffer in two halves and runs one ring clockwise
(``r -> r + 1``) and one counter-clockwise (``r -> r - 1``) at the same time, each half in its
own lane (:mod:`atpsim.collectives.schedule`), so neither direction waits for the other. Each
step moves ``(n/2)/p`` each way. On a ring of full-duplex links the two directions use
different links, so every step costs half the ring's bytes time (the paper's IC6 GroupBW =
2 x P2P, Figure 7(b)); on a switch both halves share each GPU's injection link and nothing is
gained. With ``p = 2`` both directions are the same pair of ranks, so it is the plain ring.
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, repeat, step


def _ring_steps(p: int, chunk_bytes: float, n_steps: int) -> Pattern:
    if p < 2:
        return Steps.of(())
    ranks = np.arange(p)
    return repeat(step(ranks, (ranks + 1) % p, chunk_bytes), n_steps)


def ring_reduce_scatter(p: int, nbytes: float) -> Pattern:
    """*nbytes* is the full input per rank; each of the ``p - 1`` steps moves ``n/p``."""
    return _ring_steps(p, nbytes / p, p - 1)


def ring_all_gather(p: int, nbytes: float) -> Pattern:
    """*nbytes* is the full output per rank; each of the ``p - 1`` steps moves ``n/p``."""
    return _ring_steps(p, nbytes / p, p - 1)


def ring_all_reduce(p: int, nbytes: float) -> Pattern:
    """Reduce-scatter then all-gather: ``2(p - 1)`` steps of ``n/p``."""
    return _ring_steps(p, nbytes / p, 2 * (p - 1))


def _bidirectional_steps(p: int, nbytes: float, n_steps: int) -> Pattern:
    if p <= 2:
        return _ring_steps(p, nbytes / p, n_steps)
    ranks = np.arange(p)
    both = step(
        np.concatenate([ranks, ranks]),
        np.concatenate([(ranks + 1) % p, (ranks - 1) % p]),
        nbytes / 2 / p,
        np.repeat([0, 1], p),
    )
    return repeat(both, n_steps)


def bidirectional_reduce_scatter(p: int, nbytes: float) -> Pattern:
    """``p - 1`` steps; in each, ``(n/2)/p`` goes clockwise and ``(n/2)/p`` counter-clockwise."""
    return _bidirectional_steps(p, nbytes, p - 1)


def bidirectional_all_gather(p: int, nbytes: float) -> Pattern:
    """``p - 1`` steps; in each, ``(n/2)/p`` goes clockwise and ``(n/2)/p`` counter-clockwise."""
    return _bidirectional_steps(p, nbytes, p - 1)


def bidirectional_all_reduce(p: int, nbytes: float) -> Pattern:
    """``2(p - 1)`` steps; in each, ``(n/2)/p`` goes each way round."""
    return _bidirectional_steps(p, nbytes, 2 * (p - 1))
