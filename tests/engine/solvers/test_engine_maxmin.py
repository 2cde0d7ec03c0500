"""Max-min fair rates: golden cases and the defining properties on random incidences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.engine.solvers.maxmin import max_min_rates


def rates(routes, capacity):
    flows = np.array([f for f, r in enumerate(routes) for _ in r], dtype=np.int64)
    links = np.array([link for r in routes for link in r], dtype=np.int64)
    return max_min_rates(flows, links, len(routes), np.array(capacity, dtype=float))


def test_two_flows_on_one_link_each_get_half():
    assert rates([[0], [0]], [10.0]).tolist() == [5.0, 5.0]


def test_a_flow_limited_elsewhere_leaves_the_rest_to_the_other():
    """Flow 0 crosses link 0 (10) and link 1 (2); flow 1 only link 0: flow 0 is held to 2 by
    link 1, so flow 1 takes the remaining 8 of link 0."""
    assert rates([[0, 1], [0]], [10.0, 2.0]).tolist() == [2.0, 8.0]


def test_the_classic_line_network():
    """Links 0, 1 of capacity 1; flow 0 crosses both, flows 1 and 2 one each: all get 1/2."""
    assert rates([[0, 1], [0], [1]], [1.0, 1.0]).tolist() == pytest.approx([0.5, 0.5, 0.5])


routes_strategy = st.integers(1, 6).flatmap(
    lambda n_links: st.tuples(
        st.lists(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True), min_size=1, max_size=8),
        st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links),
    )
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(routes_strategy)
def test_max_min_is_feasible_and_every_flow_has_a_bottleneck(case):
    """Feasible (no link over capacity) and max-min: every flow crosses a saturated link on
    which no other flow gets more (Bertsekas and Gallager, Prop. 6.5.2)."""
    routes, capacity = case
    r = rates(routes, capacity)
    load = np.zeros(len(capacity))
    for f, route in enumerate(routes):
        load[route] += r[f]
    assert np.all(load <= np.array(capacity) * (1 + 1e-9))
    for f, route in enumerate(routes):
        assert any(
            load[link] >= capacity[link] * (1 - 1e-9)
            and all(r[g] <= r[f] * (1 + 1e-9) for g, other in enumerate(routes) if link in other)
            for link in route
        )
