"""A live episode that has finished (its loop done, every member ended by now) is retired: its
loop's arrays are freed and only its link counts kept (atpsim/engine/joint/live.py,
LiveEpisode.retire; CompiledLoop.close). Nothing can meet it again, so the run must be the
same to the bit as one that keeps every loop, link counts included, and a closed loop must
refuse anything but its counts."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphBuilder
from atpsim.engine.joint.live import LiveEpisode
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.plain import run_plain
from atpsim.engine.solvers.joint_loop import CompiledLoop
from atpsim.topology.spec import load_topology

ROUNDS = 5
#: Seconds between two rounds: far more than a round's three sends take together.
ROUND_GAP_S = 1e-2


@pytest.fixture(scope="module")
def case():
    """2 nodes of 2 GPUs; each round three sends from GPU 0 to GPU 2 (one link path), 5 us
    apart: the second meets the first (solved ahead), the third both (a live episode), which
    finishes well before the next round begins."""
    network = JointNetwork(load_topology({"builder": "ib-cluster", "nodes": 2, "gpus_per_node": 2,
                                          "nic_bandwidth_Bps": 12.5e9}))  # fmt: skip
    send = CallSpec("event", "broadcast", "binomial", ((0, 2),), 4e6, 5e-6)
    b = GraphBuilder()
    for r in range(ROUNDS):
        for k in range(3):
            b.comm(b.call(send), [0], [b.delay(ROUND_GAP_S * r + 5e-6 * k)])
    return b.build(), network


def _runs(graph, network, monkeypatch, compiled: bool):
    retired: list[LiveEpisode] = []
    original = LiveEpisode.retire

    def spied(episode: LiveEpisode) -> None:
        original(episode)
        retired.append(episode)

    with monkeypatch.context() as patch:
        patch.setattr(LiveEpisode, "retire", spied)
        freed = run_graph(graph, network, links=True, compiled=compiled)
    with monkeypatch.context() as patch:
        patch.setattr(LiveEpisode, "retire", lambda episode: None)
        kept = run_graph(graph, network, links=True, compiled=compiled)
    return freed, kept, retired


@pytest.mark.parametrize("compiled", [True, False])
def test_retiring_finished_live_episodes_changes_nothing(case, monkeypatch, compiled):
    graph, network = case
    freed, kept, retired = _runs(graph, network, monkeypatch, compiled)
    assert freed.stats["live_replays"] >= ROUNDS
    assert len(retired) >= ROUNDS - 1  # every round's episode but the last (no submit after it)
    for got, want in ((freed.start_s, kept.start_s), (freed.finish_s, kept.finish_s),
                      (freed.link_bytes, kept.link_bytes), (freed.link_busy_s, kept.link_busy_s)):
        assert np.array_equal(got, want)  # fmt: skip
    plain = run_plain(graph, network)
    assert np.allclose(freed.finish_s, plain.finish_s, rtol=1e-9, atol=0)
    if compiled:
        assert all(isinstance(e.loop, CompiledLoop) and not hasattr(e.loop, "nf") for e in retired)


def test_a_closed_loop_keeps_its_counts_and_refuses_the_rest(case, monkeypatch):
    graph, network = case
    _, _, retired = _runs(graph, network, monkeypatch, True)
    loop = retired[0].loop
    assert isinstance(loop, CompiledLoop)
    links, link_bytes, busy = loop.sparse_link_counts()
    assert len(links) and np.all(link_bytes > 0) and np.all(busy > 0)
    assert np.allclose(link_bytes, 3 * 4e6)  # its three sends' bytes on each link of the path
    assert loop.n_done == len(loop) > 0
    with pytest.raises(AttributeError):
        loop.next_time()
    with pytest.raises(AssertionError):
        retired[0].retire()  # once
