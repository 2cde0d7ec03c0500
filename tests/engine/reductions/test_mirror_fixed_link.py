"""The mirror reduction (atpsim.engine.reductions.mirror) must refuse a run whose reversal maps
some used link onto itself: the quotient simulates one flow per orbit, so a link that is its
own mirror image would carry only the first half's flows (half its bytes, half its load).

Guards issue 25's mutation 2 (``find_mirror`` accepting ``tau[l] == l`` for a used link ``l``),
which no committed topology exercised: on a fat tree no used link is its own image."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from atpsim.collectives.schedule import map_pattern
from atpsim.collectives.tree import tree_all_reduce
from atpsim.engine.pipeline import solve
from atpsim.engine.problem import Problem
from atpsim.engine.reductions.mirror import find_mirror
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers.event import EventDriven
from atpsim.topology.graph import Topology

NBYTES = 3e6
BANDWIDTH_BPS = 100e9
LATENCY_S = 1e-6


def crossed() -> Topology:
    """Two switches A and B joined by one cable; GPUs 0 and 3 on A, GPUs 1 and 2 on B. The
    ranks' reversal (0 <-> 3, 1 <-> 2) keeps each GPU on its switch, so it maps the cable
    A -> B onto itself (and B -> A onto itself)."""
    g = nx.Graph()
    for switch in "AB":
        g.add_node(switch, kind="switch")
    g.add_edge("A", "B", kind="custom", bandwidth_Bps=BANDWIDTH_BPS, latency_s=LATENCY_S)
    for rank, switch in enumerate("ABBA"):
        g.add_node(f"g{rank}", kind="gpu", rank=rank)
        g.add_edge(
            f"g{rank}", switch, kind="custom", bandwidth_Bps=BANDWIDTH_BPS, latency_s=LATENCY_S
        )
    return Topology("crossed", g)


def nccl_channels_2x2():
    """NCCL's two channels over two nodes of two GPUs (node 0 = GPUs 0, 1; node 1 = 2, 3):
    channel ``c`` enters each node at member ``c`` and leaves at member ``c ^ 1``."""
    return tuple(tuple((2 * node + c, 2 * node + (c ^ 1)) for node in range(2)) for c in range(2))


@pytest.fixture(scope="module")
def problem():
    topology = crossed()
    steps = map_pattern(tree_all_reduce(nccl_channels_2x2(), NBYTES), np.array([[0, 1, 2, 3]]))
    return topology, Problem.of(steps, pair_routes(topology, steps), topology.links)


def test_a_run_with_a_link_that_is_its_own_mirror_image_is_not_mirrored(problem):
    _, p = problem
    assert find_mirror(p) is None
    assert "mirror" not in solve(p).path


def test_the_cable_carries_every_byte_of_the_all_reduce_each_way(problem):
    """Every tree edge joins GPUs on different switches (the in-node pairs 0-1 and 2-3 and the
    cross-node pairs 0-2 and 1-3 all cross A-B), so every transfer crosses the cable. The 4
    trees (2 channels x 2 trees) carry 3 MB / 4 = 0.75 MB each, up their 3 edges and down
    again: 4 x 3 x 2 x 0.75 MB = 18 MB, half each way: 9 MB on A -> B and on B -> A. Each GPU's
    cable carries what the GPU sends (or receives): 18 MB / 4 GPUs = 4.5 MB each way."""
    topology, p = problem
    fast, plain = solve(p), EventDriven().solve(p)
    for u, v in (("A", "B"), ("B", "A")):
        assert fast.link_bytes[topology.link_id(u, v)] == pytest.approx(9e6, rel=1e-12)
    for rank, switch in enumerate("ABBA"):
        for u, v in ((f"g{rank}", switch), (switch, f"g{rank}")):
            assert fast.link_bytes[topology.link_id(u, v)] == pytest.approx(4.5e6, rel=1e-12)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-12)
    assert fast.done_s == pytest.approx(plain.done_s, rel=1e-12)
