"""NCCL's planning is data (atpsim.collectives.nccl): a plan is handed to the engine as it is and
registers nothing, and it stands for the name the engine's memo keys and schedules carry."""

import pickle

import pytest

from atpsim.collectives.channels import channel_ring_pattern, group_layout, ring_orders
from atpsim.collectives.nccl import NcclPlanner, plan_algorithm
from atpsim.collectives.planned import PlannedPattern
from atpsim.collectives.registry import algorithm_names, build_schedule, check_algorithm
from atpsim.engine.collective import run_collective
from atpsim.errors import SimulationError
from atpsim.topology.spec import load_topology

SPEC = "ib-cluster:2x8,nics_per_node=4"


def flat(steps):
    return [(s.src.tolist(), s.dst.tolist(), s.nbytes.tolist()) for s in steps]


def test_channel_rings_are_a_planned_pattern_and_register_nothing():
    """Four NICs per node: four channel rings, each a ring of the 16 ranks; the plan is the
    ``ring@<digest>`` name, which the registry neither lists nor takes as a bare string."""
    topology = load_topology(SPEC)
    groups = [list(range(16))]
    plan = plan_algorithm(topology, "all_reduce", "ring", groups)
    assert isinstance(plan.schedule, PlannedPattern) and plan.schedule.startswith("ring@")
    assert plan.channels == 4 == len(ring_orders(group_layout(topology, groups[0])))
    assert flat(plan.schedule.pattern(16, 1e6)) == \
        flat(channel_ring_pattern("all_reduce", plan.orders, 1e6))
    assert plan.schedule not in algorithm_names("all_reduce")
    with pytest.raises(SimulationError, match="unknown algorithm"):
        check_algorithm("all_reduce", str(plan.schedule))
    with pytest.raises(SimulationError, match="unknown algorithm"):
        check_algorithm("all_gather", plan.schedule)


def test_the_same_plan_twice_is_one_name_and_runs_as_the_engine_memo_keeps_it():
    topology = load_topology(SPEC)
    groups = [list(range(16))]
    first = plan_algorithm(topology, "all_reduce", "tree", groups).schedule
    again = plan_algorithm(topology, "all_reduce", "tree", groups).schedule
    assert first == again and hash(first) == hash(again) and first is not again
    assert run_collective(topology, "all_reduce", first, groups, 1e6) is \
        run_collective(topology, "all_reduce", again, groups, 1e6)
    assert build_schedule("all_reduce", first, groups, 1e6).algorithm == str(first)


def test_a_plan_survives_pickling():
    topology = load_topology(SPEC)
    planned = plan_algorithm(topology, "all_reduce", "hierarchical", [list(range(16))]).schedule
    copy = pickle.loads(pickle.dumps(planned))
    assert copy == planned and copy.op == "all_reduce"
    assert flat(copy.pattern(16, 1e6)) == flat(planned.pattern(16, 1e6))


def test_candidates_are_every_algorithm_with_every_protocol():
    topology = load_topology(SPEC)
    candidates = NcclPlanner(topology, "all_reduce", [list(range(16))]).candidates("auto")
    assert [(c.algorithm, c.protocol) for c in candidates] == [
        (a, p) for a in ("ring", "tree") for p in ("LL", "LL128", "Simple")]
