"""Does more traffic ever help? A second collective on other GPUs beside a first one (issue 11).

Under max-min sharing it can, by at most the latency part of the first one's time, and the
engine is held to that bound. The mechanism, shown on the issue's own case below: two flows of
one ring step share a link; the second group slows a third flow by a microsecond, which delays
one of the two sharers' start (its receiver is still busy); the other sharer then runs alone
for that microsecond, and the delayed one still ends when the link's work does. Fair sharing
absorbs the delay and passes the head start on, step after step. A real link shares the same
way, so this is not fitted away. Pipelining latency with transmission (bytes move at once,
done a path latency after the last byte left) was tried and gives the same 1.605 ms: the
start offsets come from path latencies that differ, not from links idling during a latency.
With no link latency the ring steps stay in lock step and no random case shows a gain.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.engine.collective import run_collective
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import tree

OPS = ("all_gather", "reduce_scatter", "all_reduce")


def first_group_time(topology, op, groups, nbytes):
    """Time of ``groups[0]``'s ring collective with every group of *groups* running at once."""
    return run_collective(topology, op, "ring", groups, nbytes, engine="reference").group_time_s[0]


def test_the_issue_s_case_gains_three_microseconds_from_a_head_start():
    """torus(dims=(7,)), 1 GB/s, 1 us: the ring all-gather on [3, 5, 4, 6, 2] (1 MB, four steps
    of 200 kB; 3->5 and 4->6 share the link 4->5, so a step takes 400 us plus two hops) takes
    1.608 ms alone; the group [0, 1] slows 6->2 (it shares the link 0->1) by 1 us a step, and
    the ring ends at 1.605 ms."""
    topology = torus(dims=(7,), link_bandwidth_Bps="1 GB/s", link_latency_s="1 us")
    ring = [3, 5, 4, 6, 2]
    alone = first_group_time(topology, "all_gather", [ring], 1e6)
    beside = first_group_time(topology, "all_gather", [ring, [0, 1]], 1e6)
    assert alone == pytest.approx(4 * (400e-6 + 2e-6), rel=1e-12)
    assert beside == pytest.approx(alone - 3e-6, rel=1e-9)
    latency_free = torus(dims=(7,), link_bandwidth_Bps="1 GB/s", link_latency_s=0.0)
    assert first_group_time(latency_free, "all_gather", [ring, [0, 1]], 1e6) == pytest.approx(
        first_group_time(latency_free, "all_gather", [ring], 1e6), rel=1e-12)


@st.composite
def two_groups(draw, latency_s):
    """A ring torus of 5-9 GPUs or a two- or three-leaf tree with uneven link rates, and two
    disjoint groups of 2+ GPUs in random order; *latency_s*: strategy of the link latency."""
    latency = draw(latency_s)
    if draw(st.booleans()):
        n = draw(st.integers(5, 9))
        rate = draw(st.sampled_from([1e9, 10e9, 25e9]))
        make = lambda lat: torus(dims=(n,), link_bandwidth_Bps=rate, link_latency_s=lat)  # noqa: E731
    else:
        leaves, per_leaf = draw(st.integers(2, 3)), draw(st.integers(2, 4))
        rates = draw(st.lists(st.sampled_from([10e9, 25e9, 40e9, 100e9]), min_size=4, max_size=4))
        make = lambda lat: tree(leaves, per_leaf, rates, latency_s=lat)  # noqa: E731
    topology = make(latency)
    ranks = draw(st.permutations(list(range(topology.n_gpus))))
    size = draw(st.integers(2, len(ranks) - 2))
    other = draw(st.integers(2, len(ranks) - size))
    return make, latency, list(ranks[:size]), list(ranks[size:size + other])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(case=two_groups(st.just(0.0)), op=st.sampled_from(OPS),
       nbytes=st.sampled_from([1e3, 1e5, 1e6, 3e7]))
def test_without_latency_a_second_collective_never_helps_the_first(case, op, nbytes):
    make, _, first, second = case
    topology = make(0.0)
    alone = first_group_time(topology, op, [first], nbytes)
    assert first_group_time(topology, op, [first, second], nbytes) >= alone * (1 - 1e-9)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(case=two_groups(st.sampled_from([1e-7, 1e-6, 5e-6])), op=st.sampled_from(OPS),
       nbytes=st.sampled_from([1e3, 1e5, 1e6, 3e7]))
def test_a_second_collective_helps_the_first_by_less_than_its_latency(case, op, nbytes):
    """beside >= alone - (alone - alone without latency): the gain is bounded by the latency
    part of the first collective's time alone (the head starts come from latency offsets).
    500 examples meet cases with a gain: ``beside >= alone`` fails on some of them."""
    make, latency, first, second = case
    topology = make(latency)
    latency_part = (first_group_time(topology, op, [first], nbytes)
                    - first_group_time(make(0.0), op, [first], nbytes))
    alone = first_group_time(topology, op, [first], nbytes)
    beside = first_group_time(topology, op, [first, second], nbytes)
    assert beside >= alone - latency_part * (1 + 1e-9)
