"""Ring algorithms: reduce-scatter, all-gather and all-reduce = reduce-scatter then all-gather.

Local rank ``r`` sends to ``(r + 1) mod p`` in every step, one ``n/p`` chunk per step
(Patarasuk and Yuan 2009; NCCL's ring). The ring follows the order of the group.
Reduce-scatter and all-gather take ``p - 1`` steps, all-reduce ``2(p - 1)``; every step uses the
same arrays, so a ring of 4096 ranks costs two small arrays, not 8190.
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, step


def _ring_steps(p: int, chunk_bytes: float, n_steps: int) -> Pattern:
    if p < 2:
        return ()
    ranks = np.arange(p)
    one = step(ranks, (ranks + 1) % p, chunk_bytes)
    return (one,) * n_steps


def ring_reduce_scatter(p: int, nbytes: float) -> Pattern:
    """*nbytes* is the full input per rank; each of the ``p - 1`` steps moves ``n/p``."""
    return _ring_steps(p, nbytes / p, p - 1)


def ring_all_gather(p: int, nbytes: float) -> Pattern:
    """*nbytes* is the full output per rank; each of the ``p - 1`` steps moves ``n/p``."""
    return _ring_steps(p, nbytes / p, p - 1)


def ring_all_reduce(p: int, nbytes: float) -> Pattern:
    """Reduce-scatter then all-gather: ``2(p - 1)`` steps of ``n/p``."""
    return _ring_steps(p, nbytes / p, 2 * (p - 1))
