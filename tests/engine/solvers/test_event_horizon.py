"""Runs under a horizon (atpsim.engine.solvers.event_loop.horizon): a run that ends by the
horizon is the plain run, bit for bit; one that stops early surely ends later (checked
against the plain run); a prefix of a periodic problem stops only while it is still the
whole run's beginning."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.collectives.registry import build_schedule
from atpsim.engine.problem import Problem
from atpsim.engine.reductions.periodic import Periodic
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers import event_loop
from atpsim.engine.solvers.event_loop import PastHorizon, horizon
from atpsim.engine.solvers.flow_kernel import compiled_kernel
from tests.engine.conftest import tree
from tests.engine.solvers.test_engine_event_loop import cases, run_by

pytestmark = pytest.mark.skipif(compiled_kernel() is None, reason="numba is not installed")


def run_under(limit_s, case):
    topo, routes, pairs, nbytes, deps = case
    with horizon(limit_s):
        return run_by("kernel", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(case=cases(), fraction=st.floats(0.0, 1.2))
def test_a_run_stops_only_when_it_ends_after_the_horizon(case, fraction):
    """At the horizon or past it: the same run to the last bit; below it by more than the
    rounding margin: stopped; anywhere: stopped only where the plain run ends later."""
    plain = run_under(math.inf, case)
    end = float(plain.finish_s.max())
    try:
        cut = run_under(fraction * end, case)
    except PastHorizon:
        assert end > fraction * end
        return
    assert fraction * end * (1 + event_loop.HORIZON_RTOL) >= end
    for name in ("start_s", "finish_s", "delivered", "link_bytes"):
        assert np.array_equal(getattr(cut, name), getattr(plain, name)), name


def test_the_links_bytes_to_come_stop_a_run_at_its_first_event():
    """All-to-all over a two-leaf tree: the uplinks' bytes alone take longer than the
    horizon, so the run stops before any flow moves."""
    topo = tree(2, 4, [100e9, 40e9, 25e9, 70e9])
    schedule = build_schedule("all_to_all", "pairwise", [list(range(8))], 1e7)
    routes = pair_routes(topo, schedule.steps)
    flows = [(s.src, s.dst, s.nbytes) for s in schedule.steps]
    src, dst, nbytes = (np.concatenate(x) for x in zip(*flows, strict=True))
    pairs = routes.index(src, dst)
    deps = (np.zeros(len(src) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    plain = run_by("kernel", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)
    end = float(plain.finish_s.max())
    with pytest.raises(PastHorizon, match="after 0 events"), horizon(0.9 * end):
        run_by("kernel", routes, topo.links.bandwidth_Bps, pairs, nbytes, deps)


@pytest.mark.parametrize("fraction", [0.2, 0.6, 0.95, 1.0, 1.5])
def test_a_periodic_problem_under_a_horizon(fraction, monkeypatch):
    """Two rings of 30 over a shared uplink, 58 alike steps run as growing prefixes: each
    prefix may stop only before a flow of its last step finishes; the answer, where one
    comes, is the plain one, and a stop means the whole run ends after the horizon."""
    monkeypatch.setattr(event_loop, "KERNEL_MIN_FLOWS", 0)
    topo = tree(2, 30, [100e9, 40e9, 25e9, 70e9])
    groups = [list(range(0, 60, 2)), list(range(1, 60, 2))]
    schedule = build_schedule("all_reduce", "ring", groups, 3e6)
    problem = Problem.of(schedule.steps, pair_routes(topo, schedule.steps), topo.links)
    plain = Periodic().solve(problem)
    end = float(plain.done_s.max())
    try:
        with horizon(fraction * end):
            cut = Periodic().solve(problem)
    except PastHorizon:
        assert end > fraction * end
        return
    assert fraction >= 1.0
    assert np.array_equal(cut.done_s, plain.done_s)
