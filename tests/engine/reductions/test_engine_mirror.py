"""The mirror reduction (one flow per orbit of the ranks' reversal, lanes swapped in pairs,
atpsim.engine.reductions.mirror) held to the plain run of every flow."""

import numpy as np
import pytest

from atpsim.collectives.nccl import plan_algorithm
from atpsim.collectives.registry import build_schedule
from atpsim.collectives.schedule import map_pattern
from atpsim.collectives.tree import tree_all_reduce
from atpsim.engine.collective import run_collective
from atpsim.engine.pipeline import solve
from atpsim.engine.problem import Problem
from atpsim.engine.reductions.mirror import find_mirror
from atpsim.engine.routes import pair_routes
from atpsim.engine.solvers.event import EventDriven
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology
from tests.engine.conftest import star, tree


def same(fast, plain):
    assert fast.group_time_s == pytest.approx(plain.group_time_s, rel=1e-9, abs=1e-15)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-9, abs=1e-3)
    assert fast.bytes_delivered == pytest.approx(plain.bytes_delivered, rel=1e-9)
    assert fast.n_flows == plain.n_flows


@pytest.mark.parametrize("spec, mesh, dim, mirrored", [
    ("ib-cluster:4x8", None, 0, True), ("ib-cluster:6x8", None, 0, True),
    ("ib-cluster:8x8", (2, 32), 2, True), ("ib-cluster:8x4,nics_per_node=4", None, 0, False)])
@pytest.mark.parametrize("nbytes", [1e5, 3e7])
def test_nccl_trees_equal_the_plain_run(spec, mesh, dim, mirrored, nbytes):
    """NCCL's double binary tree is its own mirror image with tree 0 and tree 1 of the
    channels swapped: half the flows run, and every group's finish, every link's bytes and
    the bytes delivered are the plain run's. On 8 nodes of 4 GPUs the fat tree's up/down
    routes are not mirror images of each other, and the reduction is refused."""
    topology = load_topology(spec)
    groups = DeviceMesh(*mesh).groups(dim) if mesh else [list(range(topology.n_gpus))]
    name = plan_algorithm(topology, "all_reduce", "tree", groups).schedule
    fast = run_collective(topology, "all_reduce", name, groups, nbytes)
    plain = run_collective(topology, "all_reduce", name, groups, nbytes, engine="reference")
    assert ("mirror+" in fast.path) == mirrored
    same(fast, plain)


def tree_problem(topology, channels, groups, nbytes=3e6):
    steps = map_pattern(tree_all_reduce(channels, nbytes), np.array(groups))
    return Problem.of(steps, pair_routes(topology, steps), topology.links)


def nccl_channels(n_nodes, per_node):
    """NCCL's channel orders (atpsim.collectives.channels): channel ``c`` enters each node at
    member ``c``, visits the others in order and leaves at member ``c ^ 1``."""
    def order(c, node):
        rest = [i for i in range(per_node) if i not in (c, c ^ 1)]
        return tuple(node * per_node + i for i in [c, *rest, c ^ 1])

    return tuple(tuple(order(c, k) for k in range(n_nodes)) for c in range(per_node))


def test_the_quotient_halves_the_flows_and_keeps_the_answer():
    """Three nodes of four GPUs on one switch, a tree per channel as NCCL lays them: the
    lanes pair up (tree 0 of channel c with tree 1 of channel 3 - (c ^ 1)), no lane stays
    put, half the transfers of every step run, and the solution spread back is the plain
    run's."""
    topology = star(12)
    problem = tree_problem(topology, nccl_channels(3, 4), [list(range(12))])
    mirror = find_mirror(problem)
    assert mirror is not None
    assert mirror.lanes.tolist() == [5, 4, 7, 6, 1, 0, 3, 2]
    small = mirror.shrink(problem)
    assert [2 * len(s) for s in small.steps] == [len(s) for s in problem.steps]
    fast = mirror.expand(EventDriven().solve(small))
    plain = EventDriven().solve(problem)
    assert fast.done_s == pytest.approx(plain.done_s, rel=1e-12)
    assert fast.link_bytes == pytest.approx(plain.link_bytes, rel=1e-12)
    assert solve(problem).path == "mirror+event"


def test_no_mirror_where_links_differ_or_a_lane_maps_to_itself():
    """Uneven links break the link map; a single-lane ring (its lane its own image) and an
    odd number of ranks (the middle one fixed) are refused."""
    channels = nccl_channels(2, 4)
    assert find_mirror(tree_problem(tree(2, 4, [100e9]), channels, [list(range(8))])) is not None
    assert find_mirror(tree_problem(tree(2, 4, [100e9, 40e9, 25e9]), channels,
                                    [list(range(8))])) is None
    ring = build_schedule("all_reduce", "ring", [list(range(6))], 1e6)
    topology = star(6)
    assert find_mirror(Problem.of(ring.steps, pair_routes(topology, ring.steps),
                                  topology.links)) is None
    assert find_mirror(tree_problem(star(9), nccl_channels(3, 3)[:2], [list(range(9))])) is None
