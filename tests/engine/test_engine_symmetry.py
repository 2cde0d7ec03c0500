"""The shortcuts of the auto engine for contended runs, held to the plain event engine:
one flow per orbit of a rank shift (atpsim.engine.symmetry) and the periodic extension of a
prefix of alike steps (atpsim.engine.periodic)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import atpsim.engine.periodic as periodic
from atpsim.collectives.registry import build_schedule
from atpsim.engine.routes import pair_routes
from atpsim.engine.runner import run_collective
from atpsim.engine.symmetry import find_symmetry
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import star, tree
from tests.engine.test_engine_properties import cases


def same(fast, plain):
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9, abs=1e-15)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-9, abs=1e-3)
    assert fast.bytes_delivered == pytest.approx(plain.bytes_delivered, rel=1e-9)
    assert fast.n_flows == plain.n_flows


def symmetry_of(topo, op, algorithm, groups, nbytes=1e6):
    schedule = build_schedule(op, algorithm, groups, nbytes)
    routes = pair_routes(topo, schedule.steps)
    return find_symmetry(schedule.steps, routes, topo.links.bandwidth_Bps, topo.links.latency_s)


def test_interleaved_groups_on_a_torus_repeat_every_row():
    """Dimension 1 of DeviceMesh(16, 4) on an 8 x 8 torus: group j holds GPUs j, j+4, ...;
    a shift by one torus row (8 GPUs, two ring positions) maps every ring onto itself, and a
    shift by 4 GPUs does not (a hop that changes row is one link longer)."""
    sym = symmetry_of(torus(dims=(8, 8)), "all_reduce", "ring", DeviceMesh(16, 4).groups(1))
    assert sym is not None and sym.shift == 8 and sym.order == 8


def test_one_ring_on_a_switch_is_one_flow_per_step():
    sym = symmetry_of(star(6), "all_reduce", "bidirectional-ring", [list(range(6))])
    assert sym is not None and sym.shift == 1


def test_no_symmetry_when_bandwidths_differ():
    assert symmetry_of(star(6, slow=(2, 10e9)), "all_reduce", "bidirectional-ring", [list(range(6))]) is None


@pytest.mark.parametrize("algorithm", ["ring", "bidirectional-ring", "rabenseifner"])
@pytest.mark.parametrize("mesh,dim", [((32, 2), 1), ((16, 4), 1), ((8, 8), 2), ((4, 16), 2)])
def test_contended_torus_runs_equal_the_event_engine(algorithm, mesh, dim):
    """Rings of 32 take 62 steps: the periodic extension runs past its first 48-step prefix."""
    topo = torus(dims=(8, 8))
    groups = DeviceMesh(*mesh).groups(dim)
    fast = run_collective(topo, "all_reduce", algorithm, groups, 3e6)
    plain = run_collective(topo, "all_reduce", algorithm, groups, 3e6, engine="event")
    same(fast, plain)


def test_a_contended_tree_without_symmetry_equals_the_event_engine():
    """Odd and even GPUs of a two-leaf tree with uneven links: two rings of 30 share the
    uplinks; no shift maps the run onto itself, so the plain flows run, 58 alike steps."""
    topo = tree(2, 30, [100e9, 40e9, 25e9, 70e9])
    groups = [list(range(0, 60, 2)), list(range(1, 60, 2))]
    assert symmetry_of(topo, "all_reduce", "ring", groups) is None
    fast = run_collective(topo, "all_reduce", "ring", groups, 3e6)
    plain = run_collective(topo, "all_reduce", "ring", groups, 3e6, engine="event")
    assert fast.engine == "event"
    same(fast, plain)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(cases())
def test_short_prefixes_extend_exactly(case):
    """With 4-step prefixes and 2 periods enough, the extension meets many runs that have
    not settled: it must either see no steady state or extend it exactly."""
    topo, op, alg, groups, nbytes = case
    saved = periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS
    periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS = 4, 2
    try:
        from atpsim.engine import runner

        fast = runner._run(topo, op, alg, tuple(map(tuple, groups)), nbytes * 1.01, "auto")
    finally:
        periodic.FIRST_PREFIX_STEPS, periodic.MIN_PERIODS = saved
    plain = run_collective(topo, op, alg, groups, nbytes * 1.01, engine="event")
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
def test_extended_prefixes_of_long_rings_equal_the_event_engine(case):
    topo, op, alg, groups, nbytes = case
    saved = periodic.FIRST_PREFIX_STEPS
    periodic.FIRST_PREFIX_STEPS = 8
    try:
        fast = run_collective(topo, op, alg, groups, nbytes)
    finally:
        periodic.FIRST_PREFIX_STEPS = saved
    same(fast, run_collective(topo, op, alg, groups, nbytes, engine="event"))
