"""A live episode that keeps growing (issue 28's SageMaker case in small): gradient buckets
issued faster than the network clears them, on the rails of a cluster whose NICs each serve
two GPUs, with pipeline sends joining them. Each bucket that arrives joins the one live
episode, so its loop grows dozens of times (the arrays that grow at their end,
atpsim/engine/solvers/growing.py, double their room several times) and its next completion
is kept between events (FlowNetwork.time_to_next_completion). The run must equal the plain
run (every flow of every call in one network, no shortcut) to 1e-9, and the engine with each
of its switches off."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.engine.joint import live, tasks
from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphBuilder
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.plain import run_plain
from atpsim.engine.solvers import loop_choice
from atpsim.engine.solvers.joint_loop import CompiledLoop
from atpsim.topology.spec import load_topology

BUCKETS = 24
#: Seconds between two buckets: well under a bucket's time alone, so they pile up.
BUCKET_GAP_S = 2e-5


@pytest.fixture(scope="module")
def case():
    """4 nodes of 8 GPUs, 4 NICs each (GPUs 2k and 2k + 1 share NIC k); BUCKETS reduce-scatters
    over the 8 rails (group i: GPU i of every node) and a chain of sends from node 0 to node 1
    on GPUs 0 and 1 (the NIC of rails 0 and 1)."""
    network = JointNetwork(load_topology({"builder": "ib-cluster", "nodes": 4, "gpus_per_node": 8,
                                          "nics_per_node": 4, "nic_bandwidth_Bps": 12.5e9}))  # fmt: skip
    rails = tuple(tuple(i + 8 * node for node in range(4)) for i in range(8))
    bucket = CallSpec("nccl", "reduce_scatter", "auto", rails, 4e6)
    send = CallSpec("event", "broadcast", "binomial", ((0, 8), (1, 9)), 2e6, 5e-6)
    b = GraphBuilder()
    for k in range(BUCKETS):
        b.comm(b.call(bucket), range(len(rails)), [b.delay(BUCKET_GAP_S * k)])
    previous: list[int] = [b.delay(3e-5)]
    for _ in range(6):
        previous = [b.comm(b.call(send), [0, 1], previous)]
    return b.build(), network


def _assert_same(got, want, rel: float) -> None:
    assert np.allclose(got.finish_s, want.finish_s, rtol=rel, atol=0)
    assert np.allclose(got.start_s, want.start_s, rtol=rel, atol=0)


def test_the_buckets_form_one_growing_live_episode(case):
    graph, network = case
    run = run_graph(graph, network)
    assert run.stats["live_replays"] >= 1
    assert run.stats["largest_episode"] >= BUCKETS  # every bucket (and sends) joined it
    assert run.end_s > BUCKETS * BUCKET_GAP_S  # the network, not the issue times, sets the end


def test_the_growing_live_episode_equals_the_plain_run(case):
    graph, network = case
    fast = run_graph(graph, network, links=True)
    plain = run_plain(graph, network)
    _assert_same(fast, plain, 1e-9)
    assert np.allclose(fast.link_bytes, plain.link_bytes, rtol=1e-9, atol=0)
    assert np.allclose(fast.link_busy_s, plain.link_busy_s, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("switch", ["memo", "symmetry", "split", "live"])
def test_each_switch_off_gives_the_same_run(case, switch):
    graph, network = case
    _assert_same(run_graph(graph, network, **{switch: False}), run_graph(graph, network), 1e-9)


def test_the_compiled_and_the_reference_loop_run_it_the_same(case):
    """Every task's times and every link's counts to the bit (atpsim/engine/solvers/
    joint_loop.py: the live episode's loop compiled, or the reference's; compiled, it runs
    on to each group's end in one call)."""
    graph, network = case
    compiled = run_graph(graph, network, links=True, compiled=True)
    reference = run_graph(graph, network, links=True, compiled=False)
    assert compiled.stats == reference.stats
    for got, want in ((compiled.start_s, reference.start_s), (compiled.finish_s, reference.finish_s),
                      (compiled.link_bytes, reference.link_bytes), (compiled.link_busy_s, reference.link_busy_s)):
        assert np.array_equal(got, want)  # fmt: skip


def test_dropping_the_loops_finished_nodes_changes_nothing(case, monkeypatch):
    """A compiled live loop drops its nodes done once they are most of its nodes
    (live.COMPACT_NODES, 65,536; here at every chance): the same run to the bit."""
    graph, network = case
    reference = run_graph(graph, network, links=True, compiled=False)
    monkeypatch.setattr(live, "COMPACT_NODES", 0)
    dropped = []
    original = CompiledLoop.compact
    monkeypatch.setattr(CompiledLoop, "compact", lambda self: dropped.append(original(self)) or dropped[-1])
    compacted = run_graph(graph, network, links=True, compiled=True)
    assert any(keep is not None for keep in dropped)
    for got, want in ((compacted.start_s, reference.start_s), (compacted.finish_s, reference.finish_s),
                      (compacted.link_bytes, reference.link_bytes), (compacted.link_busy_s, reference.link_busy_s)):
        assert np.array_equal(got, want)  # fmt: skip


@pytest.mark.parametrize("busy_events", [0, 5, 40, 200])
def test_going_over_to_compiled_loops_mid_run_changes_nothing(case, monkeypatch, busy_events):
    """By default a run's live loops are the reference's until the run has made
    loop_choice.BUSY_EVENTS rate solves, then compiled ones take them over where they stand
    (and merge with any reference one left): the same run to the bit wherever that happens."""
    graph, network = case
    reference = run_graph(graph, network, links=True, compiled=False)
    monkeypatch.setattr(loop_choice, "BUSY_EVENTS", busy_events)
    busy = run_graph(graph, network, links=True)
    for got, want in ((busy.start_s, reference.start_s), (busy.finish_s, reference.finish_s),
                      (busy.link_bytes, reference.link_bytes), (busy.link_busy_s, reference.link_busy_s)):
        assert np.array_equal(got, want)  # fmt: skip


@pytest.mark.parametrize("predict_after", [1, 7, 30])
def test_going_compiled_on_course_mid_run_changes_nothing(case, monkeypatch, predict_after):
    """A run judged busy by its course (loop_choice.PREDICT_AFTER solves, then the pace over
    the tasks left: here a graph told to be vast, so the first judgement goes compiled)
    goes over where it stands: the same run to the bit."""
    graph, network = case
    reference = run_graph(graph, network, links=True, compiled=False)
    went = []
    is_busy = loop_choice.Choice.is_busy

    def spied(choice: loop_choice.Choice) -> bool:
        went.append(is_busy(choice))
        return went[-1]

    monkeypatch.setattr(loop_choice, "BUSY_EVENTS", 10**6)
    monkeypatch.setattr(loop_choice, "PREDICT_AFTER", predict_after)
    monkeypatch.setattr(loop_choice.Choice, "is_busy", spied)
    monkeypatch.setattr(tasks.TaskClock, "progress", lambda clock: (clock.ended, 10**12))
    busy = run_graph(graph, network, links=True)
    assert went and not went[0] and went[-1]  # reference loops first, compiled from mid-run
    for got, want in ((busy.start_s, reference.start_s), (busy.finish_s, reference.finish_s),
                      (busy.link_bytes, reference.link_bytes), (busy.link_busy_s, reference.link_busy_s)):
        assert np.array_equal(got, want)  # fmt: skip
