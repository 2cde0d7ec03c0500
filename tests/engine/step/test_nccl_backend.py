"""The step simulator's default collective backend, ``nccl``: NCCL's run on the machines NCCL
runs on, bare links on the paper's theory fabrics, and the per-call cost charged once."""

import dataclasses

import pytest

from atpsim.compute.hardware import load_profile
from atpsim.compute.models import model_preset
from atpsim.engine.backends import charges_call_cost, get_backend
from atpsim.engine.nccl import run_nccl
from atpsim.engine.step.run import DEFAULT_BACKEND, simulate_des_step
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology

M2_SMALL = dataclasses.replace(model_preset("M2"), layers=2)


def test_the_step_runs_collectives_as_nccl_does_by_default():
    assert DEFAULT_BACKEND == "nccl"


@pytest.mark.parametrize("spec,groups", [
    ("dgx-a100", [list(range(8))]),
    ("ib-cluster:2x8", [list(range(i, 16, 8)) for i in range(8)]),
    ("ic1", [[0, 1, 2, 3], [4, 5, 6, 7]]),
])
def test_on_a_machine_nccl_runs_on_the_backend_is_nccl_s_tuner(spec, groups):
    topology = load_topology(spec)
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        times = get_backend("nccl")(topology, op, "ring", groups, 8e6)
        assert times == run_nccl(topology, op, "ring", groups, 8e6).group_time_s
        # an algorithm NCCL does not run for the op becomes its tuner's choice
        other = get_backend("nccl")(topology, op, "rabenseifner-not-here", groups, 8e6)
        assert other == run_nccl(topology, op, "auto", groups, 8e6).group_time_s
    assert charges_call_cost("nccl", topology) and not charges_call_cost("event", topology)


@pytest.mark.parametrize("spec", ["ic5", "torus:4x4", "nvlink-network-switch:16"])
def test_on_a_theory_fabric_the_backend_is_the_bare_link_engine(spec):
    """The NVLink-Network switch and tori run no NCCL protocol: the plain event backend's
    times, rings for an algorithm the registry lacks, and the profile's call cost charged."""
    topology = load_topology(spec)
    groups = [list(range(0, 16, 2)), list(range(1, 16, 2))]
    for algorithm in ("ring", "rabenseifner"):
        assert get_backend("nccl")(topology, "all_reduce", algorithm, groups, 1e6) == \
            get_backend("event")(topology, "all_reduce", algorithm, groups, 1e6)
    assert get_backend("nccl")(topology, "all_gather", "auto", groups, 1e6) == \
        get_backend("event")(topology, "all_gather", "ring", groups, 1e6)
    assert not charges_call_cost("nccl", topology)
    profile = load_profile("a100-sxm4-80gb-paper-stack")
    mesh = DeviceMesh(4, 4)
    nccl = simulate_des_step(topology, profile, M2_SMALL, mesh, 1, "auto")
    event = simulate_des_step(topology, profile, M2_SMALL, mesh, 1, "ring", backend="event")
    assert nccl.step_time_s == event.step_time_s


def test_the_profile_call_cost_is_charged_only_where_nccl_does_not_charge_its_own():
    """On IC3 (a paper machine: the profile has a 0.1 ms call cost) the NCCL step's
    communication is NCCL's calls alone: the event step with the profile's cost set to 0 on
    the same machine adds nothing of its own, and the event step with it adds 0.1 ms a call."""
    topology = load_topology("ic3")
    profile = load_profile("a100-sxm4-80gb-paper-stack")
    assert profile.collective_overhead_s > 0
    free = dataclasses.replace(profile, collective_overhead_s=0.0)
    mesh = DeviceMesh(8, 1)
    with_cost = simulate_des_step(topology, profile, M2_SMALL, mesh, 1, "ring", backend="nccl")
    without = simulate_des_step(topology, free, M2_SMALL, mesh, 1, "ring", backend="nccl")
    assert with_cost.comm_time_s == without.comm_time_s
    event = simulate_des_step(topology, profile, M2_SMALL, mesh, 1, "ring", backend="event")
    event_free = simulate_des_step(topology, free, M2_SMALL, mesh, 1, "ring", backend="event")
    calls = (event.comm_time_s - event_free.comm_time_s) / profile.collective_overhead_s
    assert calls == pytest.approx(round(calls)) and round(calls) > 0
