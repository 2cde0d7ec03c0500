"""Send/receive around a ring: each rank of a group sends its whole buffer to the next and
receives the previous one's, all at once (one step of ``n`` bytes per rank).

nccl-tests' ``sendrecv_perf`` (each rank sends to ``rank + 1`` and receives from
``rank - 1``; bus bandwidth = algorithm bandwidth), and what ring attention issues at each step
of context parallelism (Megatron-Core / Transformer Engine: ``batch_isend_irecv`` of the K, V
block to the next context-parallel rank, :mod:`atpsim.parallel.context`). *nbytes* is each
rank's buffer; the closed form is one transfer, ``alpha + n / B``
(:func:`atpsim.collectives.closed_form.collective_time_s`).
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, step


def ring_sendrecv(p: int, nbytes: float) -> Pattern:
    if p < 2:
        return Steps.of(())
    ranks = np.arange(p)
    return Steps.of([step(ranks, (ranks + 1) % p, nbytes)])
