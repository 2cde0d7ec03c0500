"""Hierarchical all-reduce: reduce-scatter inside each node, all-reduce across nodes, all-gather
inside each node (Horovod's and NCCL's "hierarchical" / 2D all-reduce; Jia et al. 2018).

A group of ``N`` nodes with ``m`` members each (local positions *nodes[j][i]*, the node order
and each node's order from :func:`~atpsim.collectives.channels.group_layout`):

1. ring reduce-scatter inside every node at once: ``m - 1`` steps of ``n / m``;
2. ``m`` ring all-reduces across the nodes at once, one per local index ``i`` over
   ``nodes[0][i], nodes[1][i], ...``, each on ``n / m``: ``2(N - 1)`` steps of ``n / (m N)``;
3. ring all-gather inside every node: ``m - 1`` steps of ``n / m``.

Closed form with no contention (intra-node hops alpha_1, B_1; inter-node alpha_2, B_2):
``2(m - 1)(alpha_1 + n / (m B_1)) + 2(N - 1)(alpha_2 + n / (m N B_2))``
(:func:`hierarchical_time_s`). Each phase is one template repeated.
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, step
from atpsim.errors import SimulationError


def check_nodes(nodes: tuple[tuple[int, ...], ...]) -> None:
    """Every node must hold the same number of group members."""
    sizes = {len(n) for n in nodes}
    if len(sizes) != 1:
        raise SimulationError(f"hierarchical all-reduce needs the same number of ranks on every"
                              f" node; got {sorted(len(n) for n in nodes)}")


def hierarchical_all_reduce(nodes: tuple[tuple[int, ...], ...], nbytes: float) -> Pattern:
    """The three phases over local positions *nodes* (module docstring)."""
    check_nodes(nodes)
    grid = np.asarray(nodes, dtype=np.int64)  # (N, m)
    n_nodes, m = grid.shape
    templates, order = [], []
    if m > 1:
        intra = step(grid.reshape(-1), np.roll(grid, -1, axis=1).reshape(-1), nbytes / m)
        templates.append(intra)
    if n_nodes > 1:
        inter = step(grid.reshape(-1), np.roll(grid, -1, axis=0).reshape(-1),
                     nbytes / m / n_nodes)
        templates.append(inter)
    if not templates:
        return Steps.of(())
    intra_id, inter_id = (0, len(templates) - 1)
    if m > 1:
        order += [intra_id] * (m - 1)
    if n_nodes > 1:
        order += [inter_id] * (2 * (n_nodes - 1))
    if m > 1:
        order += [intra_id] * (m - 1)
    return Steps(tuple(templates), tuple(order))


def hierarchical_time_s(n_nodes: int, m: int, nbytes: float, intra: tuple[float, float],
                        inter: tuple[float, float]) -> float:
    """The closed form (module docstring); *intra*, *inter* = (bandwidth_Bps, latency_s)."""
    (b1, a1), (b2, a2) = intra, inter
    inner = 2 * (m - 1) * (a1 + nbytes / m / b1) if m > 1 else 0.0
    outer = 2 * (n_nodes - 1) * (a2 + nbytes / m / n_nodes / b2) if n_nodes > 1 else 0.0
    return inner + outer
