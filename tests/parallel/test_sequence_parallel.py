"""Megatron-LM sequence parallelism: the same forward bytes as the all-reduces it replaces,
two extra all-gathers in the backward, sharded LayerNorm and dropout work."""

from __future__ import annotations

from collections import defaultdict

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_pass_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.program import CommOp

MODEL = ModelConfig("sp", hidden=1024, heads=16, layers=2, batch=2, seq=512)
T = 8
MESH = DeviceMesh(T, 1)


def traffic(phase, sp):
    """Bytes per collective kind, counted in all-reduce equivalents: an all-reduce moves
    2(p-1)/p of its buffer per rank, a reduce-scatter or all-gather (p-1)/p."""
    program = build_pass_program(MODEL, MESH, 1, phase, sequence_parallel=sp)
    moved: dict[str, float] = defaultdict(float)
    for op in program.comm_ops():
        moved[op.collective] += op.bytes * (2 if op.collective == "all_reduce" else 1) * (T - 1) / T
    return moved


def test_forward_moves_what_the_all_reduces_moved():
    plain, sp = traffic("fwd", False), traffic("fwd", True)
    assert set(plain) == {"all_reduce"} and set(sp) == {"reduce_scatter", "all_gather"}
    assert sum(sp.values()) == pytest.approx(sum(plain.values()), rel=1e-12)


def test_backward_adds_the_two_input_gathers_per_layer():
    """b·s·h bytes each, for QKV's and FC1's wgrad, in every layer."""
    plain, sp = traffic("bwd", False), traffic("bwd", True)
    extra = MODEL.layers * 2 * MODEL.batch * MODEL.seq * MODEL.hidden * 2 * (T - 1) / T
    assert sum(sp.values()) == pytest.approx(sum(plain.values()) + extra, rel=1e-12)


def test_layernorm_and_dropout_work_is_sharded_over_the_sequence():
    plain = build_pass_program(MODEL, MESH, 1, "fwd")
    sp = build_pass_program(MODEL, MESH, 1, "fwd", sequence_parallel=True)
    sharded = ("ln1", "ln2", "proj_bias_dropout_add", "fc2_bias_dropout_add")

    def moved(program, name):
        return sum(op.bytes_moved for op in program.compute_ops() if op.name.endswith(name))

    for name in sharded:
        assert moved(sp, name) == pytest.approx(moved(plain, name) / T, rel=1e-12), name
    gemm = [op.flops for op in plain.compute_ops() if op.kind == "gemm"]
    assert gemm == [op.flops for op in sp.compute_ops() if op.kind == "gemm"]


def test_sequence_parallelism_is_for_1d_tp_only():
    with pytest.raises(SimulationError) as caught:
        build_pass_program(MODEL, DeviceMesh(4, 2), 1, "fwd", sequence_parallel=True)
    assert caught.value.key == "sequence_parallel"


def test_every_collective_is_on_dimension_1():
    program = build_pass_program(MODEL, MESH, 1, "bwd", sequence_parallel=True)
    assert {op.dim for op in program.comm_ops()} == {1}
    assert all(isinstance(op, CommOp) for op in program.comm_ops())
