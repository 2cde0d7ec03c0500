"""The path label of every route through the engine, and step templates that the schedule
declares: a run uses the periodic reduction because a ring says its steps repeat, not because
its arrays happen to be the same objects."""

import numpy as np
import pytest

from atpsim.collectives.registry import build_schedule, pattern
from atpsim.collectives.schedule import Step, Steps
from atpsim.engine.collective import run_collective
from atpsim.engine.pipeline import solve
from atpsim.engine.problem import Problem
from atpsim.engine.routes import pair_routes
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.builders.torus import torus
from atpsim.topology.spec import load_topology
from tests.engine.conftest import star, tree, two_switches

N = 3e6
ODD_EVEN_64 = [list(range(0, 64, 2)), list(range(1, 64, 2))]
ODD_EVEN_60 = [list(range(0, 60, 2)), list(range(1, 60, 2))]


@pytest.mark.parametrize("topology,algorithm,groups,path", [
    (star(8, slow=(3, 10e9)), "ring", [list(range(8))], "longest-path"),
    (star(8), "ring", [list(range(8))], "symmetry+longest-path"),
    (two_switches(2), "ring", [[0, 2], [1, 3]], "symmetry+event"),
    (torus(dims=(8, 8)), "ring", ODD_EVEN_64, "symmetry+periodic+event"),
    (tree(2, 30, [100e9, 40e9, 25e9, 70e9]), "bidirectional-ring", ODD_EVEN_60, "periodic+event"),
    (tree(2, 30, [100e9, 40e9, 25e9, 70e9]), "ring", ODD_EVEN_60, "event"),
    (load_topology("torus:4x4"), "ring", DeviceMesh(4, 4).groups(1), "replicated+symmetry+longest-path"),
    (star(8), "ring", [[3, 2, 0], [6, 4, 5, 1, 7]], "longest-path|symmetry+longest-path"),
])
def test_the_path_names_the_reductions_and_the_solver(topology, algorithm, groups, path):
    """Each route of the auto engine, and the answer equals the reference run's."""
    fast = run_collective(topology, "all_reduce", algorithm, groups, N)
    plain = run_collective(topology, "all_reduce", algorithm, groups, N, engine="reference")
    assert (fast.path, plain.path) == (path, "reference")
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9)


def test_nothing_to_move_and_the_longest_path_engine():
    topo = star(4)
    assert run_collective(topo, "all_reduce", "ring", [[0], [1]], N).path == "none"
    assert run_collective(topo, "all_reduce", "ring", [[0, 1, 2, 3]], 0).path == "none"
    alone = run_collective(topo, "all_reduce", "ring", [[0, 1, 2, 3]], N, engine="longest-path")
    assert alone.path == "symmetry+longest-path"


def test_a_ring_declares_one_template_repeated():
    ring = pattern("all_reduce", "ring", 8, N)
    assert len(ring) == 14 and len(ring.templates) == 1 and ring.repeated
    rabenseifner = pattern("all_reduce", "rabenseifner", 8, N)
    assert len(rabenseifner.templates) == len(rabenseifner) and not rabenseifner.repeated
    schedule = build_schedule("all_reduce", "ring", DeviceMesh(4, 2).groups(1), N)
    assert schedule.steps.repeated and len(schedule.steps.templates) == 1


def _copied(s: Step) -> Step:
    return Step(s.src.copy(), s.dst.copy(), s.nbytes.copy(), s.group.copy(),
                None if s.lane is None else s.lane.copy())


def _problem(topology, steps):
    return Problem.of(steps, pair_routes(topology, steps), topology.links)


def test_undeclared_equal_steps_run_plainly_and_exactly():
    """The contended bidirectional rings of the two-leaf tree: declared, a prefix is extended;
    the same steps as equal copies declared apart run step by step; both give the reference
    answer, and the plain run equals it to the last bit."""
    topo = tree(2, 30, [100e9, 40e9, 25e9, 70e9])
    schedule = build_schedule("all_reduce", "bidirectional-ring", ODD_EVEN_60, N)
    declared = solve(_problem(topo, schedule.steps))
    undeclared = solve(_problem(topo, Steps.of(_copied(s) for s in schedule.steps)))
    reference = run_collective(topo, "all_reduce", "bidirectional-ring", ODD_EVEN_60, N,
                               engine="reference")
    assert declared.path == "periodic+event" and undeclared.path == "event"
    ranks = np.concatenate([np.array(g) for g in ODD_EVEN_60])
    assert undeclared.done_s[ranks] == pytest.approx(declared.done_s[ranks], rel=1e-9)
    assert max(undeclared.done_s) == reference.time_s


def test_a_declaration_does_not_need_shared_arrays():
    """One template built from fresh arrays, declared to run 62 times, is extended like the
    ring's own schedule (symmetry, then the periodic prefix)."""
    topo = torus(dims=(8, 8))
    schedule = build_schedule("all_reduce", "ring", ODD_EVEN_64, N)
    template = _copied(schedule.steps[0])
    steps = Steps((template,), (0,) * len(schedule.steps))
    solution = solve(_problem(topo, steps))
    assert solution.path == "symmetry+periodic+event"
    reference = run_collective(topo, "all_reduce", "ring", ODD_EVEN_64, N, engine="reference")
    assert float(np.nanmax(solution.done_s)) == pytest.approx(reference.time_s, rel=1e-9)
