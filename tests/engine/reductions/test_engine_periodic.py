"""The periodic reduction (a prefix of a schedule declared as one step repeated, extended once
the run repeats; atpsim.engine.reductions.periodic) held to the reference run."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import atpsim.engine.reductions.periodic as periodic
from atpsim.collectives.registry import build_schedule
from atpsim.engine import collective
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import find
from atpsim.engine.problem import Problem
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers.event import dependencies, flatten, prefix_of
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import star, tree
from tests.engine.reductions.test_engine_symmetry import same
from tests.engine.test_engine_properties import cases


@settings(max_examples=80, deadline=None, derandomize=True)
@given(cases())
def test_short_prefixes_extend_exactly(case):
    """With 4-step prefixes and 2 periods enough, the extension meets many runs that have
    not settled: it must either see no steady state or extend it exactly."""
    topo, op, alg, groups, nbytes = case
    saved = periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS
    periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS = 4, 2
    try:
        fast = collective._run(topo, op, alg, tuple(map(tuple, groups)), nbytes * 1.01,
                               find("engine", "auto"), None)
    finally:
        periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS = saved
    plain = run_collective(topo, op, alg, groups, nbytes * 1.01, engine="reference")
    same(fast, plain)


def test_a_steady_state_is_found_and_its_window_reported():
    """Flow i of step k starts at k + i/10 and takes 1 s, except step 0 (0.05 s longer):
    steps 1.. repeat every step, 1 s apart."""
    start = np.arange(12)[:, None] + np.array([0.0, 0.1, 0.2])
    finish = start + 1.0
    finish[0] += 0.05
    state = periodic.find_steady_state(start, finish)
    assert state is not None and state.period == 1 and state.first == 1
    assert state.delta_s == pytest.approx(1.0)


@st.composite
def long_rings(draw):
    """Two or three rings of 8 to 14 GPUs over a random tree or a torus (14 to 26 alike
    steps), with random link speeds on the tree, so that links are shared unevenly."""
    if draw(st.booleans()):
        speeds = draw(st.lists(st.sampled_from([25e9, 40e9, 50e9, 100e9]), min_size=1, max_size=5))
        topo = tree(draw(st.integers(2, 4)), 10, speeds, latency_s=draw(st.sampled_from([1e-7, 1e-6])))
    else:
        topo = torus(dims=(6, 6))
    ranks = draw(st.permutations(range(topo.n_gpus)))
    sizes = draw(st.lists(st.integers(8, 14), min_size=2, max_size=3).filter(lambda s: sum(s) <= topo.n_gpus))
    groups, at = [], 0
    for size in sizes:
        groups.append(sorted(ranks[at:at + size]) if draw(st.booleans()) else list(ranks[at:at + size]))
        at += size
    algorithm = draw(st.sampled_from(["ring", "bidirectional-ring"]))
    op = draw(st.sampled_from(["all_reduce", "all_gather"]))
    return topo, op, algorithm, groups, draw(st.sampled_from([1e4, 1e6, 3e7]))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(long_rings())
def test_extended_prefixes_of_long_rings_equal_the_reference_run(case):
    topo, op, alg, groups, nbytes = case
    saved = periodic.FIRST_PREFIX_STEPS
    periodic.FIRST_PREFIX_STEPS = 8
    try:
        fast = run_collective(topo, op, alg, groups, nbytes)
    finally:
        periodic.FIRST_PREFIX_STEPS = saved
    same(fast, run_collective(topo, op, alg, groups, nbytes, engine="reference"))


@pytest.mark.parametrize("algorithm", ["ring", "bidirectional-ring", "rabenseifner"])
@pytest.mark.parametrize("n_steps", [1, 3, 7])
def test_a_prefix_cut_from_the_whole_run_is_the_prefix(algorithm, n_steps):
    """The rendezvous rule only looks back, so the prefix's flows and dependencies are the
    first rows of the whole schedule's (what PrefixRuns relies on)."""
    topo = star(8)
    schedule = build_schedule("all_reduce", algorithm, [[0, 2, 4, 6], [1, 3, 5, 7]], 1e6)
    problem = Problem.of(schedule.steps, pair_routes(topo, schedule.steps), topo.links)
    flows = flatten(problem.steps)
    short = problem.prefix(n_steps)
    cut, deps = prefix_of(flows, dependencies(problem, flows), sum(len(s) for s in short.steps))
    alone = flatten(short.steps)
    for name in ("src", "dst", "nbytes", "lane", "step"):
        assert np.array_equal(getattr(cut, name), getattr(alone, name))
    expected = dependencies(short, alone)
    assert np.array_equal(deps[0], expected[0]) and np.array_equal(deps[1], expected[1])
