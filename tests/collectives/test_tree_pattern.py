"""NCCL's double binary tree pattern (atpsim.collectives.tree), built on arrays, against the
schedule written out vertex by vertex and chunk by chunk as the module docstring states it."""

import numpy as np
import pytest

from atpsim.collectives.tree import tree_all_reduce, tree_chunks, tree_parents


def written_out(channels, nbytes):
    """Step lists of (src, dst, lane): vertex ``v`` at depth ``d`` of tree ``t`` (lane ``t``)
    sends chunk ``j`` up in step ``j + D - d`` and gets it back in ``D + C - 1 + j + d - 1``,
    every tree its own depth ``D``; lanes one after another within a step."""
    parents = [tree_parents(nodes, mirror) for nodes in channels for mirror in (False, True)]

    def depth(parent, v):
        return 0 if parent[v] < 0 else depth(parent, parent[v]) + 1

    depths = [{v: depth(p, v) for v in p} for p in parents]
    chunks = tree_chunks(nbytes / len(channels) / 2, max(max(d.values()) for d in depths))
    trees = []
    for parent, d_of in zip(parents, depths, strict=True):
        deepest = max(d_of.values())
        up = deepest + chunks - 1
        steps = [[] for _ in range(2 * up)]
        for v in sorted(d_of, key=lambda v: (d_of[v], v)):
            for j in range(chunks if d_of[v] else 0):
                steps[j + deepest - d_of[v]].append((v, parent[v]))
                steps[up + j + d_of[v] - 1].append((parent[v], v))
        trees.append(steps)
    n_steps = max(len(t) for t in trees)
    return [[(s, d, lane) for lane, t in enumerate(trees) if k < len(t) for s, d in sorted(t[k])]
            for k in range(n_steps)], chunks


def channels_of(n_nodes, per_node, n_channels, seed):
    rng = np.random.default_rng(seed)
    return tuple(tuple(tuple(int(r) for r in rng.permutation(range(k * per_node, (k + 1) * per_node)))
                       for k in range(n_nodes)) for _ in range(n_channels))


@pytest.mark.parametrize("n_nodes, per_node, n_channels", [(2, 1, 1), (1, 2, 1), (3, 2, 2),
                                                           (5, 3, 1), (7, 1, 3), (16, 8, 8)])
@pytest.mark.parametrize("nbytes", [1e3, 3e6, 5e8])
def test_tree_pattern_is_the_written_out_schedule(n_nodes, per_node, n_channels, nbytes):
    """Same transfers in every step (order within a lane aside), same bytes, and steps with
    the same transfers declared as one template (the steady stretch of the pipeline)."""
    channels = channels_of(n_nodes, per_node, n_channels, seed=n_nodes * 10 + per_node)
    steps = tree_all_reduce(channels, nbytes)
    expected, chunks = written_out(channels, nbytes)
    assert len(steps) == len(expected)
    for k, s in enumerate(steps):
        got = sorted(zip(s.src.tolist(), s.dst.tolist(), s.lanes.tolist(), strict=True))
        assert got == sorted(expected[k]), k
        assert np.all(s.nbytes == nbytes / n_channels / 2 / chunks)
    firsts = {}
    for k, index in enumerate(steps.order):
        firsts.setdefault(index, k)
        assert sorted(expected[k]) == sorted(expected[firsts[index]])
    assert len(steps.templates) == len({tuple(sorted(e)) for e in expected})
