"""The symmetry reduction (one flow per orbit of a rank shift, atpsim.engine.reductions.symmetry)
held to the reference run."""

import pytest

from atpsim.collectives.registry import build_schedule
from atpsim.engine.collective import run_collective
from atpsim.engine.problem import Problem
from atpsim.engine.reductions.symmetry import find_symmetry
from atpsim.engine.routes import pair_routes
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.torus import torus
from tests.engine.conftest import star, tree


def same(fast, plain):
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9, abs=1e-15)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-9, abs=1e-3)
    assert fast.bytes_delivered == pytest.approx(plain.bytes_delivered, rel=1e-9)
    assert fast.n_flows == plain.n_flows


def symmetry_of(topo, op, algorithm, groups, nbytes=1e6):
    schedule = build_schedule(op, algorithm, groups, nbytes)
    routes = pair_routes(topo, schedule.steps)
    return find_symmetry(Problem.of(schedule.steps, routes, topo.links))


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
def test_contended_torus_runs_equal_the_reference_run(algorithm, mesh, dim):
    """Rings of 32 take 62 steps: the periodic extension runs past its first 48-step prefix."""
    topo = torus(dims=(8, 8))
    groups = DeviceMesh(*mesh).groups(dim)
    fast = run_collective(topo, "all_reduce", algorithm, groups, 3e6)
    plain = run_collective(topo, "all_reduce", algorithm, groups, 3e6, engine="reference")
    assert fast.path.startswith("symmetry+") or fast.path.startswith("replicated+symmetry+")
    same(fast, plain)


def test_a_contended_tree_without_symmetry_equals_the_reference_run():
    """Odd and even GPUs of a two-leaf tree with uneven links: two rings of 30 share the
    uplinks; no shift maps the run onto itself, so every flow runs: 58 alike steps, no steady
    state in the first 48, so the prefix grows to the whole schedule."""
    topo = tree(2, 30, [100e9, 40e9, 25e9, 70e9])
    groups = [list(range(0, 60, 2)), list(range(1, 60, 2))]
    assert symmetry_of(topo, "all_reduce", "ring", groups) is None
    fast = run_collective(topo, "all_reduce", "ring", groups, 3e6)
    plain = run_collective(topo, "all_reduce", "ring", groups, 3e6, engine="reference")
    assert fast.path == "event"
    same(fast, plain)
