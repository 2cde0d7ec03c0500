"""All-to-all by pairwise exchange: in step ``k = 1..p-1`` rank ``r`` sends ``n/p`` to
``(r + k) mod p`` and receives from ``(r - k) mod p`` (MPICH's long-message all-to-all).
*nbytes* is each rank's whole send buffer, as in nccl-tests' alltoall."""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, step


def pairwise_all_to_all(p: int, nbytes: float) -> Pattern:
    ranks = np.arange(p)
    return Steps.of(step(ranks, (ranks + k) % p, nbytes / p) for k in range(1, p))
