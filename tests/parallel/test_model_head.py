"""The embedding and LM head programs: vocabulary-parallel GEMMs of the right size, the
collectives Megatron-LM's vocab-parallel layers issue, FLOPs as Megatron counts them."""

from __future__ import annotations

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.parallel.head import build_head_program, head_flops, head_params_per_rank
from atpsim.parallel.mesh import DeviceMesh

MODEL = ModelConfig("h", hidden=1024, heads=16, layers=2, batch=2, seq=512)
V = 32768


@pytest.mark.parametrize("mesh", [DeviceMesh(8, 1), DeviceMesh(4, 2), DeviceMesh(1, 8)])
def test_head_gemms_sum_to_six_bshv_over_the_ranks(mesh):
    fwd = build_head_program(V, MODEL, mesh, "head", "fwd")
    bwd = build_head_program(V, MODEL, mesh, "head", "bwd")
    per_rank = sum(op.flops for op in fwd.compute_ops() + bwd.compute_ops() if op.kind == "gemm")
    assert per_rank * mesh.size == pytest.approx(head_flops(V, MODEL), rel=1e-12)
    assert head_flops(V, MODEL) == 6 * 2 * 512 * 1024 * V


def test_1d_tp_issues_megatrons_vocab_parallel_collectives():
    mesh = DeviceMesh(8, 1)
    names = lambda part, phase: [op.name for op in build_head_program(V, MODEL, mesh, part, phase).comm_ops()]  # noqa: E731
    assert names("embedding", "fwd") == ["embedding_sum"]
    assert names("embedding", "bwd") == []
    assert names("head", "fwd") == ["loss_stats"]
    assert names("head", "bwd") == ["logits_dgrad_sum"]


def test_a_2d_mesh_also_reduces_over_dimension_2():
    mesh = DeviceMesh(4, 2)
    fwd = build_head_program(V, MODEL, mesh, "head", "fwd")
    assert [(op.name, op.dim) for op in fwd.comm_ops()] == [("head_gather", 2), ("loss_stats", 1), ("loss_stats_d2", 2)]


def test_parameters_of_a_vocabulary_shard():
    assert head_params_per_rank(V, MODEL, DeviceMesh(4, 2)) == V * 1024 / 8
