"""Memory-bound ops by class: the class of each op of the layer program, the profile's
per-class efficiency (a backward-compatible extension), and the per-class bandwidth fit."""

import pytest
import yaml

from atpsim.calibrate.fit.memory import fit_memory_bandwidth
from atpsim.calibrate.measurements.samples import MemoryOpSample
from atpsim.compute.hardware import load_profile, profile_from_dict, profile_to_dict
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import MEMORY_OP_CLASSES, compute_time_s, memory_op_class
from atpsim.errors import AtpsimError
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh


@pytest.mark.parametrize(
    "name, expected",
    [
        ("l0.ln1", "layernorm"),
        ("l3.ln2_bwd_stats", "layernorm_bwd"),
        ("attn_softmax", "softmax"),
        ("l0.attn_softmax_bwd", "softmax_bwd"),
        ("l0.attn_dropout_bwd", "dropout_bwd"),
        ("l0.fc1_bias_gelu", "gelu"),
        ("l0.proj_bias_dropout_add_bwd", "bias_dropout_add_bwd"),
        ("l0.adam", "optimizer"),
        ("l0.something_else", "elementwise"),
    ],
)
def test_memory_op_class(name, expected):
    assert memory_op_class(name) == expected


def test_every_memory_op_of_the_program_has_a_named_class():
    model = ModelConfig("t", 64, 4, layers=2, batch=4, seq=16, dtype="fp32")
    for mesh in (DeviceMesh(4, 1), DeviceMesh(2, 2)):
        program = build_step_program(model, mesh, 2, optimizer_step=True)
        for op in program.compute_ops():
            if op.kind == "memory":
                assert memory_op_class(op.name).removesuffix("_bwd") in MEMORY_OP_CLASSES


def test_a_profile_without_classes_times_every_op_as_before():
    """a100-sxm4-80gb has no per-class key: a softmax backward uses memory_efficiency 0.8
    (2.039e12 · 0.8 B/s after the 4 us launch), and the profile's YAML mapping does not grow the key."""
    profile = load_profile("a100-sxm4-80gb")
    assert profile.memory_efficiency_for("softmax_bwd") == profile.memory_efficiency
    assert "memory_efficiency_by_class" not in profile_to_dict(profile)
    program = build_step_program(
        ModelConfig("t", 64, 4, layers=1, batch=4, seq=16, dtype="fp16"), DeviceMesh(1, 1)
    )
    op = next(op for op in program.compute_ops() if op.name == "l0.attn_softmax_bwd")
    expected = profile.launch_overhead_s + op.bytes_moved / (2.039e12 * 0.8)
    assert compute_time_s(op, profile, "fp16") == pytest.approx(expected)


def test_class_efficiency_falls_back_to_the_forward_class_then_the_default():
    data = profile_to_dict(load_profile("a100-sxm4-80gb"))
    data["memory_efficiency_by_class"] = {"gelu": 0.5, "gelu_bwd": 0.25, "softmax": 0.4}
    profile = profile_from_dict(yaml.safe_load(yaml.safe_dump(data)))
    assert profile.memory_efficiency_for("gelu_bwd") == 0.25
    assert profile.memory_efficiency_for("softmax_bwd") == 0.4
    assert profile.memory_efficiency_for("layernorm") == 0.8
    assert profile_from_dict(profile_to_dict(profile)) == profile


def test_class_efficiency_must_be_a_fraction():
    data = profile_to_dict(load_profile("a100-sxm4-80gb"))
    data["memory_efficiency_by_class"] = {"gelu": 1.5}
    with pytest.raises(AtpsimError, match=r"memory_efficiency_by_class\.gelu"):
        profile_from_dict(data)


def test_fit_recovers_each_class_bandwidth():
    """Overhead 10 us; softmax ops stream at 2 GB/s, GeLU backward ops at 0.5 GB/s: 1 MB of
    softmax takes 10 us + 500 us, 1 MB of GeLU backward 10 us + 2000 us. Each class's
    B = sum(bytes) / sum(t - o) is exact; all ops together: 4 MB / (500 + 1000 + 2000) us
    = 1.143 GB/s."""
    o = 10e-6
    samples = [
        MemoryOpSample("attn_softmax", 1e6, o + 1e6 / 2e9),
        MemoryOpSample("attn_softmax", 2e6, o + 2e6 / 2e9),
        MemoryOpSample("fc1_bias_gelu_bwd", 1e6, o + 1e6 / 0.5e9),
    ]
    fit = fit_memory_bandwidth(samples, o)
    assert dict(fit.class_bandwidth_Bps) == pytest.approx({"softmax": 2e9, "gelu_bwd": 0.5e9})
    assert fit.bandwidth_Bps == pytest.approx(4e6 / 3500e-6)
    assert fit.rms_rel_error() == pytest.approx(0.0, abs=1e-12)


def test_a_class_no_slower_than_the_overhead_has_no_bandwidth():
    fit = fit_memory_bandwidth(
        [MemoryOpSample("attn_softmax", 1e6, 1e-3), MemoryOpSample("attn_dropout", 1e6, 5e-6)],
        10e-6,
    )
    assert [c for c, _ in fit.class_bandwidth_Bps] == ["softmax"]
