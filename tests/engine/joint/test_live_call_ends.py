"""A live episode records each collective cohort's end as the LATEST of its groups' ends
(atpsim.engine.joint.live.LiveEpisode.harvest): the (start, end, links) a run reports per
cohort (``GraphTimeline.calls``, read by the trace's link counters) must be the same whether
the episode ran live or was solved ahead, and a two-rail call ends when its slower rail does.

Guards issue 25's mutation 1 (``np.max`` -> ``np.min`` of the groups' ends), which left every
task's finish right and only the per-call end wrong."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphBuilder
from atpsim.engine.joint.network import JointNetwork
from atpsim.topology.spec import load_topology


@pytest.fixture(scope="module")
def runs():
    """A two-rail all-reduce issued as one task per rail (one cohort of two groups whose ends
    differ: rail 0, GPUs 0, 8, 16, 24, shares its NIC ports with the sends between those GPUs,
    rail 1 does not) and three sends that arrive while it runs, making the episode live; the
    same graph run live and solved ahead."""
    cluster = JointNetwork(load_topology("ib-cluster:4x8"))
    reduce = CallSpec("nccl", "all_reduce", "auto", ((0, 8, 16, 24), (1, 9, 17, 25)), 32e6)
    sends = [CallSpec("event", "broadcast", "binomial", ((8 * r, 8 * r + 8),), 4e6 * (r + 1), 5e-6)
             for r in range(3)]  # fmt: skip
    b = GraphBuilder()
    rails = [b.comm(b.call(reduce), [g]) for g in (0, 1)]
    b.delay(1e-5, [rails[1]])
    tasks = [b.comm(b.call(spec), [0], [b.delay(2e-4 * (r + 1))]) for r, spec in enumerate(sends)]
    tasks.append(b.comm(b.call(sends[0]), [0], [tasks[0]]))
    graph = b.build()
    live = run_graph(graph, cluster, links=True)
    ahead = run_graph(graph, cluster, live=False, links=True)
    return live, ahead, rails


def test_the_episode_ran_live_and_its_rails_end_apart(runs):
    live, _, rails = runs
    assert live.stats["live_replays"] >= 1
    assert live.finish_s[rails[0]] != live.finish_s[rails[1]]


def test_a_cohorts_end_is_the_last_of_its_groups_ends(runs):
    """The all-reduce's cohort is the one starting at t = 0 (the sends start at 2e-4 s and
    later); its end is its slower rail's finish, not the faster one's."""
    live, _, rails = runs
    (call,) = [c for c in live.calls if c[0] == 0.0]
    assert call[1] == max(live.finish_s[rails[0]], live.finish_s[rails[1]])
    assert call[1] > min(live.finish_s[rails[0]], live.finish_s[rails[1]])


def test_every_cohorts_start_and_end_equal_the_episode_solved_ahead(runs):
    live, ahead, _ = runs
    assert len(live.calls) == len(ahead.calls) == 5
    for (s1, e1, l1), (s2, e2, l2) in zip(live.calls, ahead.calls, strict=True):
        assert s1 == pytest.approx(s2, rel=1e-12, abs=0)
        assert e1 == pytest.approx(e2, rel=1e-9, abs=0)
        assert np.array_equal(np.sort(l1), np.sort(l2))
