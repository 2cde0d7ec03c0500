"""A step on one network: on the committed scenarios no two calls meet, so the des results
stay the list schedule's bit for bit, and the step forced through the joint engine agrees;
where a straggler makes groups of one call start apart, the step runs on the joint engine,
whose shortcuts equal its plain run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import atpsim.engine.step.joint_step as joint_step_module
from atpsim.api import expand_sweep, load_scenario, simulate_point
from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.plain import run_plain
from atpsim.engine.step.joint_step import list_is_exact, step_graph
from atpsim.engine.step.run import _comm_timer, compute_timer, simulate_program, step_calls
from atpsim.engine.step.scheduler import simulate_step
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
STEP_SCENARIOS = ("quickstart", "fig10", "fig11", "fig12", "table3", "scaling")


def representative(name: str, count: int = 2):
    """The first *count* des points of the scenario among its smallest device counts (every
    topology, mesh shape and scheme the scenario sweeps is in some scenario's small points)."""
    points = [p for p in expand_sweep(load_scenario(SCENARIOS / f"{name}.yaml")) if p.mode == "des"]
    points.sort(key=lambda p: p.n_devices)
    return points[:count]


@pytest.mark.parametrize("name", STEP_SCENARIOS)
def test_committed_scenario_points_are_the_list_schedule_and_the_joint_run_agrees(name, monkeypatch):
    """Each point's des columns with the joint check (which finds no call meeting another)
    against the same point forced through the joint engine: every time column to 1e-12."""
    for point in representative(name):
        listed = simulate_point(point)
        monkeypatch.setattr(joint_step_module, "list_is_exact", lambda *a, **k: False)
        forced = simulate_point(point)
        monkeypatch.undo()
        for column, value in listed.items():
            if column.endswith("_s") and isinstance(value, float):
                assert forced[column] == pytest.approx(value, rel=1e-12, abs=1e-15), (name, column)


MODEL = ModelConfig("m", hidden=2048, heads=16, layers=2, batch=4, seq=512)


def straggler_step():
    """ATP (2, 4) on an 8-GPU PCIe tree with rank 5 computing 1.5x slower: its dimension-1
    group starts each call later than the other groups, which run on shared PCIe switches."""
    topology = load_topology("pcie-tree:8")
    from atpsim.api.point import hardware_profile

    profile = hardware_profile("a100-sxm4-80gb")
    mesh = DeviceMesh(2, 4)
    program = build_step_program(MODEL, mesh, 2)
    scale = np.ones(8)
    scale[5] = 1.5
    return topology, profile, mesh, program, scale


def test_a_straggler_makes_groups_start_apart_and_the_step_runs_on_the_joint_engine():
    topology, profile, mesh, program, scale = straggler_step()
    compute = compute_timer(profile, MODEL.dtype)
    listed = simulate_step(program, 8, compute, _comm_timer(topology, mesh, "ring"), scale)
    calls = step_calls(mesh, "ring")
    network = JointNetwork(topology)
    assert not list_is_exact(listed, calls, network)
    result = simulate_program(topology, profile, MODEL, program, mesh, "ring", rank_scale=scale)
    assert result.timeline.step_time_s != listed.step_time_s
    graph, node = step_graph(program, 8, compute, calls, scale)
    fast, plain = run_graph(graph, network), run_plain(graph, network)
    assert np.allclose(fast.finish_s, plain.finish_s, rtol=1e-9, atol=0)
    assert np.allclose(result.timeline.finish_s, fast.finish_s[node], rtol=0, atol=0)
