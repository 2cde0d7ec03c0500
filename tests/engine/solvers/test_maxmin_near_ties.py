"""Max-min fairness on links of *nearly* equal capacity (issue 11, section 5): the freezing
tolerance that lets equal links freeze in one round must not merge links that differ by more
than rounding, or a flow is frozen below what its own bottleneck allows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.engine.solvers.maxmin import max_min_rates


def rates(routes, capacity):
    flows = np.array([f for f, r in enumerate(routes) for _ in r], dtype=np.int64)
    links = np.array([link for r in routes for link in r], dtype=np.int64)
    return max_min_rates(flows, links, len(routes), np.array(capacity, dtype=float))


@pytest.mark.parametrize("gap", [1e-9, 1e-7, 1e-5, 1e-3])
def test_separate_links_a_hair_apart_give_each_flow_its_own_link(gap):
    """One flow per link: each flow's rate is its own link's capacity, exactly."""
    capacity = [25e9, 25e9 * (1 + gap), 25e9 * (1 + 2 * gap)]
    assert rates([[0], [1], [2]], capacity) == pytest.approx(capacity, rel=1e-13, abs=0)


@pytest.mark.parametrize("gap", [1e-9, 1e-6, 1e-3])
def test_a_shared_flow_is_held_by_the_tighter_of_two_near_equal_links(gap):
    """Flow 0 crosses links 0 and 1 (capacity c and c(1+gap)); flows 1 and 2 one link each.
    Link 0 is the tighter: flows 0 and 1 get c/2; flow 2 gets the rest of link 1,
    c(1+gap) - c/2 = c(1/2 + gap)."""
    c = 10e9
    got = rates([[0, 1], [0], [1]], [c, c * (1 + gap)])
    assert got == pytest.approx([c / 2, c / 2, c * (0.5 + gap)], rel=1e-13, abs=0)


near_equal = st.tuples(
    st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=5, unique=True), min_size=1, max_size=8),
    st.lists(st.integers(0, 3), min_size=5, max_size=5),
    st.sampled_from([1e-10, 1e-8, 1e-6, 1e-4]),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(near_equal)
def test_every_flow_has_a_saturated_bottleneck_where_it_is_largest(case):
    """Links of capacity 25e9 (1 + k gap), k in 0..3: max-min fair means feasible and every
    flow crosses a saturated link on which no flow gets more (Bertsekas and Gallager, Prop.
    6.5.2), checked to 1e-12 relative, far tighter than the gaps."""
    routes, steps, gap = case
    capacity = np.array([25e9 * (1 + k * gap) for k in steps])
    got = rates(routes, capacity)
    load = np.zeros(len(capacity))
    for flow, route in enumerate(routes):
        load[route] += got[flow]
    assert np.all(load <= capacity * (1 + 1e-12))
    for flow, route in enumerate(routes):
        bottlenecks = [
            link for link in route
            if load[link] >= capacity[link] * (1 - 1e-12)
            and all(got[other] <= got[flow] * (1 + 1e-12) for other, r in enumerate(routes) if link in r)
        ]  # fmt: skip
        assert bottlenecks, (flow, route, got.tolist())
