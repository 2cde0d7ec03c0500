"""NCCL's tree all-reduce: a double binary tree across nodes, a chain inside each node.

NCCL (2.4+, ``src/graph/trees.cc``; Sanders, Speck and Traeff 2009) builds two binary trees over
the nodes such that a node interior in one is (mostly) a leaf in the other, and hangs each
node's GPUs below its head as a chain. Each tree carries half the buffer: a pipelined reduce up
the tree to its root, then a pipelined broadcast back down, in ``C`` chunks
(:func:`tree_chunks`: 1 MiB each as the chain broadcast's, but at most ``4(D + 1)`` so that a
deep tree's schedule stays small; the pipeline fill then costs at most a quarter of the
bandwidth time, an approximation on the slow side for the largest buffers). As rings, trees run one
pair per channel (NIC rail), the buffer split over the channels.

Here: tree 0 is the complete binary tree over the nodes in order (node ``k``'s parent is node
``(k - 1) // 2``), chains running down each node's members in group order; tree 1 is the same
over the nodes and members in reverse order (the mirror, as NCCL's second tree). Vertex ``v``
at depth ``d`` (root 0, deepest ``D``) sends chunk ``j`` to its parent in step
``j + D - d`` (reduce), and its parent sends chunk ``j`` down to it in step
``D + C - 1 + j + d - 1`` (broadcast): ``2(D + C - 1)`` steps, each tree in its own lane.

Closed form where no link carries two transfers at once (one channel, two nodes of one GPU:
the trees run in opposite directions): ``2(D + C - 1)(alpha + n / (2 C B))``
(:func:`tree_time_s`).
"""

from __future__ import annotations

import numpy as np

from atpsim.collectives.broadcast import chain_chunks
from atpsim.collectives.schedule import Pattern, Step, Steps, step


def tree_parents(nodes: tuple[tuple[int, ...], ...], mirror: bool = False) -> dict[int, int]:
    """Parent of each local position in tree 0 (or its *mirror*, tree 1); the root maps to -1."""
    order = [tuple(reversed(m)) for m in reversed(nodes)] if mirror else list(nodes)
    parent: dict[int, int] = {}
    for k, members in enumerate(order):
        up = order[(k - 1) // 2][0] if k > 0 else -1
        for i, rank in enumerate(members):
            parent[rank] = members[i - 1] if i > 0 else up
    return parent


def _depths(parent: dict[int, int]) -> dict[int, int]:
    depth: dict[int, int] = {}

    def of(v: int) -> int:
        if v not in depth:
            depth[v] = 0 if parent[v] < 0 else of(parent[v]) + 1
        return depth[v]

    for v in parent:
        of(v)
    return depth


def _tree_transfers(parent: dict[int, int], chunks: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The transfers of one tree (module docstring) as arrays (step, src, dst), ordered by
    step, then by vertex in :func:`_depths`' order; and the tree's step count."""
    depth = _depths(parent)
    deepest = max(depth.values())
    up_steps = deepest + chunks - 1
    v = np.array([x for x, d in depth.items() if d > 0], dtype=np.int64)
    d = np.array([depth[x] for x in v.tolist()], dtype=np.int64)
    above = np.array([parent[x] for x in v.tolist()], dtype=np.int64)
    j = np.arange(chunks, dtype=np.int64)
    up = (j[None, :] + (deepest - d)[:, None]).ravel()
    down = (up_steps + j[None, :] + (d - 1)[:, None]).ravel()
    steps = np.concatenate([up, down])
    src = np.concatenate([np.repeat(v, chunks), np.repeat(above, chunks)])
    dst = np.concatenate([np.repeat(above, chunks), np.repeat(v, chunks)])
    order = np.argsort(steps, kind="stable")
    return steps[order], src[order], dst[order], 2 * up_steps


def tree_chunks(half_bytes: float, depth: int) -> int:
    """Pipeline chunks of one tree's *half_bytes* (module docstring)."""
    return min(chain_chunks(half_bytes), 4 * (depth + 1))


def tree_all_reduce(channels: tuple[tuple[tuple[int, ...], ...], ...], nbytes: float) -> Pattern:
    """Both trees of every channel, ``n / (2 C)`` each, tree ``t`` of channel ``c`` in lane
    ``2c + t``; *channels[c]* is the local positions per node in channel ``c``'s order (its
    chains start at the member closest to the channel's NIC, as NCCL's trees do)."""
    if sum(len(m) for m in channels[0]) < 2:
        return Steps.of(())
    share = nbytes / len(channels)
    parents = [tree_parents(nodes, mirror) for nodes in channels for mirror in (False, True)]
    chunks = tree_chunks(share / 2, max(max(_depths(p).values()) for p in parents))
    trees = [_tree_transfers(p, chunks) for p in parents]
    step_of, src, dst, lane = (np.concatenate(x) for x in zip(*(
        (t[0], t[1], t[2], np.full(len(t[0]), i, dtype=np.int64)) for i, t in enumerate(trees)),
        strict=True))
    order = np.lexsort((lane, step_of))  # stable: within a lane, the tree's own order
    step_of, src, dst, lane = step_of[order], src[order], dst[order], lane[order]
    n_steps = max(t[3] for t in trees)
    bounds = np.searchsorted(step_of, np.arange(n_steps + 1))
    return _declared(src, dst, lane, bounds, share / 2 / chunks)


def _declared(src: np.ndarray, dst: np.ndarray, lane: np.ndarray, bounds: np.ndarray,
              nbytes: float) -> Steps:
    """Steps ``k`` = transfers ``bounds[k]:bounds[k + 1]``, each of *nbytes*; steps with the
    same transfers in the same order are declared as one template (the pipeline's steady
    stretch: every vertex sends a chunk)."""
    templates: dict[bytes, int] = {}
    made: list[Step] = []
    order = []
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        key = np.concatenate([src[lo:hi], dst[lo:hi], lane[lo:hi]]).tobytes()
        if key not in templates:
            templates[key] = len(made)
            made.append(step(src[lo:hi], dst[lo:hi], nbytes, lane[lo:hi]))
        order.append(templates[key])
    return Steps(tuple(made), tuple(order))


def tree_time_s(depth: int, chunks: int, nbytes: float, bandwidth_Bps: float,
                latency_s: float) -> float:
    """``2(D + C - 1)(alpha + n / (2 C B))``: the uncontended closed form (module docstring)."""
    return 2 * (depth + chunks - 1) * (latency_s + nbytes / 2 / chunks / bandwidth_Bps)
