"""The joint network: calls in flight share links by max-min; every shortcut equals the plain
run (one network of every flow) to 1e-9; where nothing overlaps, a call's time is its own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.engine.joint import totals
from atpsim.engine.joint.calls import CallSpec
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import GraphBuilder
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.plain import run_plain
from atpsim.engine.solvers.maxmin import max_min_rates, weighted_max_min_rates
from atpsim.topology.spec import load_topology

IB_BPS = 25e9  # the ib-cluster builder's HDR NIC port, per direction


@pytest.fixture(scope="module")
def cluster():
    return JointNetwork(load_topology("ib-cluster:4x8"))


def graph_of(*tasks):
    """A graph of comm tasks (spec, groups, start delay) each after its own delay."""
    b = GraphBuilder()
    ids = []
    for spec, groups, at in tasks:
        ids.append(b.comm(b.call(spec), groups, [b.delay(at)]))
    return b.build(), ids


def test_weighted_sharing_is_max_min_with_unit_weights_and_charges_wire_bytes():
    flows, links = np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1])
    plain = max_min_rates(flows, links, 3, np.array([10.0, 4.0]))
    assert np.array_equal(weighted_max_min_rates(flows, links, np.ones(4), 3, np.array([10.0, 4.0])), plain)
    # link 0: flow 0 at weight 2 and flow 1 at weight 1 share 12 B/s: each gets 4 (2*4 + 4 = 12)
    rates = weighted_max_min_rates(np.array([0, 1]), np.array([0, 0]), np.array([2.0, 1.0]), 2,
                                   np.array([12.0]))  # fmt: skip
    assert rates == pytest.approx([4.0, 4.0])


def test_two_collectives_sharing_links_each_take_longer_and_conserve_bytes(cluster):
    """An all-reduce and an all-gather on the same two GPUs of two nodes, started together:
    both cross GPU 0's and GPU 8's NICs, so each takes longer than alone; the bytes every link
    carries are what the two carry alone, added."""
    reduce = CallSpec("event", "all_reduce", "ring", ((0, 8),), 64e6)
    gather = CallSpec("event", "all_gather", "ring", ((0, 8),), 64e6)
    graph, (a, g) = graph_of((reduce, [0], 0.0), (gather, [0], 0.0))
    together = run_graph(graph, cluster, links=True)
    alone_a = run_graph(graph_of((reduce, [0], 0.0))[0], cluster, links=True)
    alone_g = run_graph(graph_of((gather, [0], 0.0))[0], cluster, links=True)
    assert together.finish_s[a] > alone_a.end_s * 1.2
    assert together.finish_s[g] > alone_g.end_s * 1.2
    assert np.allclose(together.link_bytes, alone_a.link_bytes + alone_g.link_bytes, rtol=1e-12)
    plain = run_plain(graph, cluster)
    assert np.allclose(plain.link_bytes, together.link_bytes, rtol=1e-12)
    assert np.allclose(plain.finish_s, together.finish_s, rtol=1e-9)


def test_a_bucket_all_reduce_and_a_pipeline_send_on_one_nic_share_it_max_min(cluster):
    """A data-parallel bucket all-reduce of N = 50 MB between GPU 0 (node 0) and GPU 8 (node 1)
    and a pipeline send of S = N/2 from GPU 0 to GPU 8, both on bare links and started
    together. Both cross GPU 0's NIC port and GPU 8's (25 GB/s each way, the bottleneck; PCIe
    is 31.5 GB/s); lat = the route's latency.

    The 2-rank ring all-reduce is 2 steps of N/2 each way. Step 1: the ring's 0->8 flow and
    the send share the 0->8 path at B/2 each and both end at lat + (N/2)/(B/2) = lat + N/B;
    the 8->0 flow ends at lat + N/(2B). Step 2 waits for both ends (the rendezvous), then runs
    alone: the all-reduce ends at 2 lat + N/B + N/(2B), N/(2B) = 1 ms later than alone
    (2 lat + N/B); the send ends at lat + N/B, N/(2B) = 1 ms later than alone (lat + N/(2B)).
    """
    n_bytes = 50e6
    reduce = CallSpec("event", "all_reduce", "ring", ((0, 8),), n_bytes)
    send = CallSpec("event", "broadcast", "binomial", ((0, 8),), n_bytes / 2)
    graph, (a, s) = graph_of((reduce, [0], 0.0), (send, [0], 0.0))
    latency = cluster.plan(send).alone_s[0] - (n_bytes / 2) / IB_BPS
    both = run_graph(graph, cluster)
    assert both.finish_s[a] == pytest.approx(2 * latency + n_bytes / IB_BPS + n_bytes / (2 * IB_BPS), rel=1e-12)
    assert both.finish_s[s] == pytest.approx(latency + n_bytes / IB_BPS, rel=1e-12)
    assert cluster.plan(reduce).alone_s[0] == pytest.approx(2 * latency + n_bytes / IB_BPS, rel=1e-12)
    assert np.allclose(run_plain(graph, cluster).finish_s, both.finish_s, rtol=1e-12)


def test_with_no_overlap_each_call_takes_its_own_time_exactly(cluster):
    """Calls one after another (each starts after the previous ends): every end is the start
    plus the call's own time, bit for bit, and the plain run agrees to 1e-12."""
    reduce = CallSpec("nccl", "all_reduce", "auto", ((0, 8, 16, 24), (1, 9, 17, 25)), 25 * 2**20)
    send = CallSpec("event", "broadcast", "binomial", ((0, 9), (1, 8)), 8e6, 1e-5)
    b = GraphBuilder()
    first = b.comm(b.call(reduce), [0, 1], [b.delay(0.25)])
    second = b.comm(b.call(send), [0, 1], [first])
    third = b.comm(b.call(reduce), [0, 1], [b.delay(1e-3, [second])])
    graph = b.build()
    timeline = run_graph(graph, cluster)
    alone_r, alone_s = cluster.plan(reduce).alone_s.max(), cluster.plan(send).alone_s.max()
    assert timeline.finish_s[first] == 0.25 + alone_r
    assert timeline.finish_s[second] == timeline.finish_s[first] + alone_s
    assert timeline.finish_s[third] == (timeline.finish_s[second] + 1e-3) + alone_r
    assert timeline.stats["episodes_solved"] == 0
    assert np.allclose(run_plain(graph, cluster).finish_s, timeline.finish_s, rtol=1e-12)


def test_shift_symmetry_and_memo_equal_the_plain_run(cluster):
    """Four replicas' ring all-reduce over their GPU 0s, and each replica's GPU 0 sending to
    the next replica's GPU 1 while it runs: one rank shift maps the episode onto itself, so one
    flow per orbit is simulated; the same episode again hits the memo. Both equal the plain
    run, and the shortcuts off give the same answer."""
    reduce = CallSpec("nccl", "all_reduce", "auto", ((0, 8, 16, 24),), 25 * 2**20)
    send = CallSpec("event", "broadcast", "binomial", tuple((8 * r, 8 * ((r + 1) % 4) + 1) for r in range(4)),
                    50e6, 1e-5)  # fmt: skip
    b = GraphBuilder()
    a1 = b.comm(b.call(reduce), [0])
    s1 = b.comm(b.call(send), range(4), [b.delay(5e-4)])
    a2 = b.comm(b.call(reduce), [0], [a1, s1])
    s2 = b.comm(b.call(send), range(4), [b.delay(5e-4, [a1, s1])])
    graph = b.build()
    fast = run_graph(graph, cluster)
    assert fast.stats["episodes_symmetric"] == 1 and fast.stats["episode_memo_hits"] == 1
    plain = run_plain(graph, cluster)
    assert np.allclose(plain.finish_s, fast.finish_s, rtol=1e-9)
    bare = run_graph(graph, cluster, memo=False, symmetry=False, split=False)
    assert np.allclose(bare.finish_s, fast.finish_s, rtol=1e-9)
    assert fast.finish_s[a2] - fast.finish_s[s1] == pytest.approx(fast.finish_s[a1], rel=1e-9)
    assert fast.finish_s[s2] > fast.finish_s[s1]


CALLS = [
    CallSpec("nccl", "all_reduce", "auto", ((0, 8, 16, 24), (1, 9, 17, 25)), 4e6),
    CallSpec("nccl", "all_gather", "auto", ((0, 1, 2, 3, 4, 5, 6, 7),), 2e6),
    CallSpec("event", "broadcast", "binomial", ((0, 9), (8, 17)), 3e6, 5e-6),
    CallSpec("event", "reduce_scatter", "ring", ((16, 24), (1, 25)), 6e6),
]


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, len(CALLS) - 1), st.floats(0.0, 1e-3)), min_size=2, max_size=5))
def test_the_shortcuts_equal_the_plain_run_on_random_overlaps(cluster, tasks):
    """Calls on GPUs that share NICs, PCIe and NVLink, each started after its own delay and
    after the previous task of the same call: the engine with its shortcuts ends every task
    when the plain run does (1e-9), and moves the same bytes over every link."""
    b = GraphBuilder()
    last: dict[int, int] = {}
    for index, at in tasks:
        spec = CALLS[index]
        deps = [b.delay(at)] + ([last[index]] if index in last else [])
        last[index] = b.comm(b.call(spec), range(len(spec.groups)), deps)
    graph = b.build()
    fast = run_graph(graph, cluster, links=True)
    plain = run_plain(graph, cluster)
    assert np.allclose(fast.finish_s, plain.finish_s, rtol=1e-9, atol=0)
    assert np.allclose(fast.link_bytes, plain.link_bytes, rtol=1e-9)
    assert np.allclose(fast.link_busy_s, plain.link_busy_s, rtol=1e-9, atol=1e-15)


def test_link_disjoint_rails_are_simulated_once_and_equal_the_plain_run(cluster):
    """Two NIC rails (GPU 0 and GPU 1 of each node), each with its ring all-reduce and a
    pipeline send while it runs, on a fat tree whose spine routes are not shift invariant:
    the episode splits into two link-disjoint parts that are the same problem, one is
    simulated, and every time equals the plain run."""
    from atpsim.engine.joint.episodes import Cohort, solve_episode

    reduce = CallSpec("nccl", "all_reduce", "ring", ((0, 8, 16, 24), (1, 9, 17, 25)), 25 * 2**20)
    send = CallSpec("event", "broadcast", "binomial", ((8, 16), (9, 17)), 50e6, 1e-5)
    members = [Cohort(cluster.plan(reduce), (0, 1), 0.0), Cohort(cluster.plan(send), (0, 1), 4e-4)]
    split = solve_episode(cluster, members, symmetry=False)
    whole = solve_episode(cluster, members, symmetry=False, split=False)
    assert split.path == "parts+joint" and whole.path == "joint"
    assert split.parts == (2, 1) and whole.parts == (1, 1)
    for a, b in zip(split.finish_s, whole.finish_s, strict=True):
        assert np.allclose(a, b, rtol=1e-12)
    assert np.allclose(split.link_bytes, whole.link_bytes) and np.allclose(split.link_busy_s, whole.link_busy_s)
    b = GraphBuilder()
    first = b.comm(b.call(reduce), [0, 1])
    second = b.comm(b.call(send), [0, 1], [b.delay(4e-4)])
    graph = b.build()
    assert np.allclose(run_graph(graph, cluster).finish_s[[first, second]],
                       run_plain(graph, cluster).finish_s[[first, second]], rtol=1e-9)


def test_calls_that_keep_meeting_run_live_and_equal_the_plain_run(cluster):
    """A two-rail all-reduce issued as one task per rail (one cohort whose groups end apart)
    and sends that keep arriving while it runs: the second arrival makes the episode live
    (simulated forward with the step, a call replayed to now where it ran alone); every task
    ends when the plain run ends it, each rail's task at its own rail's end."""
    reduce = CallSpec("nccl", "all_reduce", "auto", ((0, 8, 16, 24), (1, 9, 17, 25)), 32e6)
    sends = [CallSpec("event", "broadcast", "binomial", ((8 * r, 8 * r + 8),), 4e6 * (r + 1), 5e-6) for r in range(3)]
    b = GraphBuilder()
    rails = [b.comm(b.call(reduce), [g]) for g in (0, 1)]
    b.delay(1e-5, [rails[1]])  # starts when rail 1 ends, not when the whole call does
    tasks = [b.comm(b.call(spec), [0], [b.delay(2e-4 * (r + 1))]) for r, spec in enumerate(sends)]
    tasks.append(b.comm(b.call(sends[0]), [0], [tasks[0]]))
    graph = b.build()
    fast, plain = run_graph(graph, cluster), run_plain(graph, cluster)
    assert fast.stats["live_replays"] >= 1
    assert np.allclose(fast.finish_s, plain.finish_s, rtol=1e-9, atol=0)
    assert fast.finish_s[rails[0]] != fast.finish_s[rails[1]]  # rail 0 carries the sends
    ahead = run_graph(graph, cluster, live=False)
    assert np.allclose(ahead.finish_s, plain.finish_s, rtol=1e-9, atol=0)


def test_an_iteration_whose_live_episode_meets_a_replayed_one_equals_the_plain_run():
    """TP 8 over two 4-GPU nodes on a 4:1 fat tree: a call meets a live episode and an episode
    solved ahead listed before it, which is replayed to now; the live one must be brought to
    now first (it was absorbed while behind, an AssertionError, found by
    scenarios/joint-network.yaml)."""
    from atpsim.api import ModelConfig, compare_plain

    topology = {"builder": "ib-cluster", "nodes": 16, "gpus_per_node": 4, "oversubscription": 4}
    model = ModelConfig("tiny", hidden=4096, heads=32, layers=2, batch=1, seq=2048)
    run = compare_plain(topology, model, tp=(8, 1), pp=2, dp=4, global_batch=8,
                        sequence_parallel=True, recompute="selective", zero=1, vocab=51200)  # fmt: skip
    assert run.agree


@pytest.mark.parametrize("batch", [1, 1 << 18])
def test_link_totals_are_the_episodes_counts_added_in_order(cluster, monkeypatch, batch):
    """Five all-reduces one after another (each alone: its counts come from its shape, once),
    then an all-reduce and an all-gather together (one episode): the links' bytes and busy
    time are the episodes' counts added in episode order, bit for bit (a link no episode loads
    stays 0), however many entries are buffered before they are added (*batch*)."""
    monkeypatch.setattr(totals, "_TOTALS_BATCH", batch)
    reduce = CallSpec("event", "all_reduce", "ring", ((0, 8),), 64e6)
    gather = CallSpec("event", "all_gather", "ring", ((0, 8),), 64e6)
    b = GraphBuilder()
    call = b.call(reduce)
    last = b.delay(0.0)
    for _ in range(5):
        last = b.comm(call, [0], [last])
    b.comm(call, [0], [last])
    b.comm(b.call(gather), [0], [last])
    run = run_graph(b.build(), cluster, links=True)
    alone = run_graph(graph_of((reduce, [0], 0.0))[0], cluster, links=True)
    together = run_graph(graph_of((reduce, [0], 0.0), (gather, [0], 0.0))[0], cluster, links=True)
    for name in ("link_bytes", "link_busy_s"):
        expected = np.zeros(cluster.n_links)
        for _ in range(5):
            expected += getattr(alone, name)
        expected += getattr(together, name)
        assert np.array_equal(getattr(run, name), expected), name
    assert (run.link_bytes > 0).sum() == (alone.link_bytes > 0).sum() > 0


def test_a_calls_lower_bound_is_its_busiest_ports_least_time_and_below_its_time(cluster):
    """A ring all-reduce of 64 MB over GPUs 0 and 8 (two nodes, bare links): each GPU sends
    2(n-1)/n x 64 MB = 64 MB. No sharing gets it out faster than all of its own links'
    bandwidth together (the port bound), nor through its node's NIC faster than the NIC's
    25 GB/s (the link bound: here the longer); the call alone takes a little longer still
    (its steps' latency), and a group of one rank is bounded by 0."""
    reduce = CallSpec("event", "all_reduce", "ring", ((0, 8),), 64e6)
    plan = cluster.plan(reduce)
    topology = plan.timed_on
    out_Bps = sum(bw for src, bw in zip(topology.links.src, topology.links.bandwidth_Bps, strict=True)
                  if src == topology.node_index[topology.gpu_nodes[0]])  # fmt: skip
    assert 64e6 / out_Bps < 64e6 / IB_BPS
    assert plan.lower_bound_s == pytest.approx(plan.fixed_s + 64e6 / IB_BPS, rel=1e-12)
    assert 0.98 * float(plan.alone_s.max()) < plan.lower_bound_s < float(plan.alone_s.max())
    assert cluster.plan(CallSpec("event", "all_reduce", "ring", ((0,), (8,)), 64e6)).lower_bound_s == 0.0


@pytest.mark.parametrize("symmetry", [True, False])
def test_an_episode_met_again_at_other_starts_reuses_its_parts_and_gives_what_a_fresh_network_does(symmetry):
    """solve_episode keeps an episode's start-independent parts (union, symmetry, quotient)
    per its members' calls and groups: the same members at other offsets reuse them, and
    every answer is the one a network that never saw them gives, bit for bit."""
    from atpsim.engine.joint.episodes import Cohort, solve_episode

    topology = load_topology("ib-cluster:4x8")
    reduce = CallSpec("nccl", "all_reduce", "ring", ((0, 8, 16, 24), (1, 9, 17, 25)), 25 * 2**20)
    send = CallSpec("event", "broadcast", "binomial", ((8, 16), (9, 17)), 50e6, 1e-5)
    warm = JointNetwork(topology)
    for start, offset in ((0.0, 4e-4), (1.5e-3, 2e-4), (7.25e-3, 4e-4)):
        members = [Cohort(warm.plan(reduce), (0, 1), start), Cohort(warm.plan(send), (0, 1), start + offset)]
        got = solve_episode(warm, members, symmetry=symmetry)
        fresh = JointNetwork(topology)
        want = solve_episode(fresh, [Cohort(fresh.plan(reduce), (0, 1), start),
                                     Cohort(fresh.plan(send), (0, 1), start + offset)], symmetry=symmetry)
        assert got.path == want.path and got.rate_solves == want.rate_solves
        assert all(np.array_equal(a, b) for a, b in zip(got.finish_s, want.finish_s, strict=True))
        assert np.array_equal(got.link_bytes, want.link_bytes) and np.array_equal(got.link_busy_s, want.link_busy_s)
    assert len(warm.episode_parts) == 1  # one kind of episode, met three times
