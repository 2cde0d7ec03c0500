"""HardwareProfile.layer_overhead_s: optional (0), non-negative, written back only when set, and
added once per layer to the event simulation's step and compute time and to the analytic
compute time (the paper-stack profile's fitted parameter, atpsim.calibrate.paper)."""

import dataclasses

import pytest

from atpsim.api import serial_compute_time_s
from atpsim.compute.hardware import load_profile, profile_from_dict, profile_to_dict
from atpsim.compute.models import ModelConfig
from atpsim.engine.step.run import simulate_des_step
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology

#: A small 3-layer model, so the overhead is counted per layer and not per step.
MODEL = ModelConfig("t", 256, 4, layers=3, batch=2, seq=64, dtype="fp16")
OVERHEAD_S = 1.5e-3


def test_spec_profiles_have_none_and_do_not_write_the_key():
    profile = load_profile("a100-sxm4-80gb")
    assert profile.layer_overhead_s == 0.0
    assert "layer_overhead_s" not in profile_to_dict(profile)


def test_a_set_overhead_reads_back_and_a_negative_one_is_refused():
    data = profile_to_dict(load_profile("a100-sxm4-80gb"))
    data["layer_overhead_s"] = "2e-3"
    profile = profile_from_dict(data)
    assert profile.layer_overhead_s == 2e-3
    assert profile_from_dict(profile_to_dict(profile)) == profile
    data["layer_overhead_s"] = -1e-3
    with pytest.raises(AtpsimError, match="layer_overhead_s"):
        profile_from_dict(data)


def test_des_step_and_compute_time_grow_by_layers_times_the_overhead():
    """3 layers x 1.5 ms = 4.5 ms more step and compute time; communication is unchanged."""
    topology = load_topology("nvswitch:4")
    base = load_profile("a100-sxm4-80gb")
    slow = dataclasses.replace(base, layer_overhead_s=OVERHEAD_S)
    mesh = DeviceMesh(2, 2)
    before = simulate_des_step(topology, base, MODEL, mesh, 1, "ring")
    after = simulate_des_step(topology, slow, MODEL, mesh, 1, "ring")
    assert after.step_time_s - before.step_time_s == pytest.approx(3 * OVERHEAD_S)
    assert after.compute_time_s - before.compute_time_s == pytest.approx(3 * OVERHEAD_S)
    assert after.comm_time_s == before.comm_time_s


def test_analytic_compute_time_grows_by_layers_times_the_overhead():
    base = load_profile("a100-sxm4-80gb")
    slow = dataclasses.replace(base, layer_overhead_s=OVERHEAD_S)
    mesh = DeviceMesh(2, 2)
    difference = serial_compute_time_s(MODEL, mesh, 1, slow) - serial_compute_time_s(
        MODEL, mesh, 1, base
    )
    assert difference == pytest.approx(3 * OVERHEAD_S)
