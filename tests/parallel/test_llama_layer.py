"""Llama-style layers on ATP meshes and Megatron-LM's 1D TP (issue 24): the GQA and SwiGLU
GEMM shapes and collectives, KV heads over the TP ranks, FP8 linears, parameters and
activation memory by hand count; GPT's layer unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.atp import (
    build_pass_program,
    build_step_program,
    params_per_rank,
    program_summary,
)
from atpsim.parallel.job_memory import job_memory_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import build_sagemaker_program
from atpsim.parallel.summa import build_summa_program
from atpsim.program import CommOp, ComputeOp

#: h = 1024, 16 heads of 64, 4 KV heads (kv = 256, QKV out 1536), SwiGLU of 2816, untied,
#: 8 layers, batch 2, s = 512, bf16 (B = 2 bytes).
LLAMA = ModelConfig("small-llama", hidden=1024, heads=16, layers=8, batch=2, seq=512,
                    dtype="bf16", kv_heads=4, ffn_hidden=2816, ffn="swiglu",
                    tie_embeddings=False)  # fmt: skip
T = 2 * 512


def _op(program, name: str):
    return next(t.op for t in program.tasks if t.op.name == name)


def test_qkv_and_mlp_shapes_and_their_collectives_on_a_2x2_mesh():
    """DeviceMesh(2, 2), one layer, one chunk (T = 1024 tokens): QKV [T, h/d2] x [h/d2,
    (h + 2·kv)/d1] = [1024, 512] x [512, 768], its partial sum all-reduced on dimension 2
    (T·768·2 bytes); FC1 to 2·ffn/d1 = 2816 (gate and up), all-reduced alike; SwiGLU reads
    [T, 2816] and writes [T, 1408] (3·2 bytes per output element); FC2 [T, 1408] x [1408, 512];
    the scatter's backward all-gathers the QKV-output gradient [T, 768] on dimension 2."""
    program = build_step_program(replace(LLAMA, layers=1), DeviceMesh(2, 2), 1)
    qkv, fc1, fc2 = _op(program, "l0.qkv"), _op(program, "l0.fc1"), _op(program, "l0.fc2")
    assert (qkv.m, qkv.n, qkv.k) == (T, 768, 512)
    assert (fc1.m, fc1.n, fc1.k) == (T, 2816, 512)
    assert (fc2.m, fc2.n, fc2.k) == (T, 512, 1408)
    assert _op(program, "l0.f1") == CommOp("l0.f1", "all_reduce", 2, T * 768 * 2)
    assert _op(program, "l0.f3") == CommOp("l0.f3", "all_reduce", 2, T * 2816 * 2)
    assert _op(program, "l0.attn_scatter_bwd") == CommOp("l0.attn_scatter_bwd", "all_gather", 2, T * 768 * 2)
    swiglu = _op(program, "l0.fc1_swiglu")
    assert swiglu == ComputeOp("l0.fc1_swiglu", "memory", bytes_moved=T * 1408 * 3 * 2)
    assert _op(program, "l0.fc1_swiglu_bwd").bytes_moved == T * 1408 * 5 * 2
    assert _op(program, "l0.fc1_dgrad").k == 2816 and _op(program, "l0.qkv_wgrad").n == 768


@pytest.mark.parametrize("mesh", [DeviceMesh(1, 1), DeviceMesh(4, 1), DeviceMesh(2, 2), DeviceMesh(1, 4)])
@pytest.mark.parametrize("chunks", [1, 2])
def test_gemm_flops_over_the_ranks_are_the_models(mesh, chunks):
    """Every mesh whose size divides the 4 KV heads runs the model's 6·b·s·W + 12·b·s²·h."""
    program = build_step_program(LLAMA, mesh, chunks)
    total = program_summary(program, ranks=mesh.size)["gemm_flops_total"]
    assert total == pytest.approx(LLAMA.step_flops(), rel=1e-12)


def test_sequence_parallel_1d_layer_has_the_same_flops_and_gqa_shapes():
    """Megatron-LM's 1D TP with sequence parallelism, (4, 1): QKV [T, h] x [h, 1536/4], FC1
    to 2·2816/4, and the same FLOPs over the ranks."""
    mesh, model = DeviceMesh(4, 1), replace(LLAMA, layers=1)
    passes = [build_pass_program(model, mesh, 1, phase, sequence_parallel=True) for phase in ("fwd", "bwd")]
    qkv, fc1 = _op(passes[0], "l0.qkv"), _op(passes[0], "l0.fc1")
    assert (qkv.n, qkv.k, fc1.n) == (384, 1024, 1408)
    total = sum(program_summary(p, ranks=4)["gemm_flops_total"] for p in passes)
    assert total == pytest.approx(model.layer_flops(), rel=1e-12)


@pytest.mark.parametrize("mesh", [DeviceMesh(8, 1), DeviceMesh(4, 2), DeviceMesh(1, 8)])
def test_a_tp_size_that_does_not_divide_kv_heads_is_refused_by_name(mesh):
    with pytest.raises(SimulationError, match="kv_heads") as refused:
        build_step_program(LLAMA, mesh, 1)
    assert refused.value.key == "tp"


def test_without_grouping_an_uneven_head_split_is_still_only_flagged():
    """MHA (kv_heads = heads) keeps today's rule: 16 heads on 32 ranks run, flagged."""
    program = build_step_program(replace(LLAMA, kv_heads=None, layers=1), DeviceMesh(32, 1), 1)
    assert program.flags == ("heads_not_divisible_by_mesh",)


def test_fp8_runs_the_linears_gemms_in_fp8_and_the_attention_core_in_bf16():
    """Transformer Engine: forward, dgrad and wgrad of QKV, proj, FC1 and FC2 in FP8; the
    attention core's batched GEMMs keep the model's compute dtype (None)."""
    program = build_step_program(replace(LLAMA, layers=1, dtype="fp8"), DeviceMesh(2, 2), 1)
    gemms = {op.name.split(".")[1]: op.dtype for op in program.compute_ops() if op.kind == "gemm"}
    linears = {n for n in gemms if n.split("_")[0] in ("qkv", "proj", "fc1", "fc2")}
    assert len(linears) == 12 and {gemms[n] for n in linears} == {"fp8"}
    assert {gemms[n] for n in gemms if n.startswith("attn")} == {None}
    bf16 = build_step_program(replace(LLAMA, layers=1), DeviceMesh(2, 2), 1)
    assert {op.dtype for op in bf16.compute_ops()} == {None}


def test_gpt_defaults_build_the_same_program_as_the_shapes_spelled_out():
    """gpt3-1.3b with kv_heads = heads and ffn_hidden = 4h given is the same task list, op for
    op (the defaults change nothing)."""
    gpt = replace(model_preset("gpt3-1.3b"), layers=2)
    spelled = replace(gpt, kv_heads=gpt.heads, ffn_hidden=4 * gpt.hidden)
    for mesh in (DeviceMesh(4, 1), DeviceMesh(2, 2)):
        assert build_step_program(gpt, mesh, 1).tasks == build_step_program(spelled, mesh, 1).tasks


def test_parameters_per_rank_by_hand():
    """(4, 1): linears h·1536 + h² + h·5632 + 2816·h = 11,272,192 over 4 = 2,818,048; biases
    (1536 + 5632)/4 + 2h = 3840; LayerNorms 4h = 4096: 2,825,984 a layer. The GPT layer of
    the same h is (12h² = 12,582,912)/4 + 7h/4 + 2h + 4h."""
    mesh = DeviceMesh(4, 1)
    assert params_per_rank(replace(LLAMA, layers=1), mesh) == 2_825_984
    gpt = replace(LLAMA, kv_heads=None, ffn_hidden=None, ffn="gelu", layers=1)
    assert params_per_rank(gpt, mesh) == 12 * 1024**2 / 4 + 7 * 1024 / 4 + 2 * 1024 + 4 * 1024


def test_job_memory_by_hand():
    """TP (4, 1), PP 2, DP 4, micro-batch 2 (8 of them), ZeRO-1, no recomputation, no SP.
    Parameters: 4 layers x 2,825,984 = 11,303,936. Activations of a layer and micro-batch
    (T = 1024): LayerNorm/QKV/FC1 inputs and dropout masks T·h·10 = 10,485,760; Q, K, V
    2·T·1536/4 = 786,432; attention output 2·T·h/4 = 524,288; SwiGLU input and output
    2·T·(5632 + 2816)/4 = 4,325,376; softmax and dropout of 8 (sample, head) pairs
    5·8·512² = 10,485,760; LayerNorm statistics 16·T: 26,624,000; 8 layers in flight."""
    got = job_memory_per_rank(LLAMA, ParallelLayout(DeviceMesh(4, 1), pp=2, dp=4), micro_batch=2,
                              n_microbatches=8, zero=1, recompute="none")  # fmt: skip
    assert got.params_per_rank == 11_303_936
    assert got.weights_bytes == got.gradients_bytes == 2 * 11_303_936
    assert got.optimizer_bytes == 12 * 11_303_936 / 4
    assert got.activations_bytes == 8 * 26_624_000


def test_fp8_weights_are_bf16_plus_an_fp8_copy():
    layout = ParallelLayout(DeviceMesh(4, 1), pp=2, dp=4)
    args = {"micro_batch": 2, "n_microbatches": 8, "zero": 1, "recompute": "none"}
    bf16 = job_memory_per_rank(LLAMA, layout, **args)
    fp8 = job_memory_per_rank(replace(LLAMA, dtype="fp8"), layout, **args)
    assert fp8.weights_bytes == 3 * bf16.params_per_rank
    assert (fp8.gradients_bytes, fp8.optimizer_bytes, fp8.activations_bytes) == (
        bf16.gradients_bytes, bf16.optimizer_bytes, bf16.activations_bytes)  # fmt: skip


@pytest.mark.parametrize("pp", [1, 2])
def test_an_untied_head_adds_its_vocab_shard_where_the_first_stage_is_the_last(pp):
    """V = 32,000 over 4 ranks: the embedding's V·h/4 = 8,192,000 on the first stage; untied,
    the output matrix's another 8,192,000 there when one stage is both ends (tied, one shared
    matrix); with two stages it is the last stage's."""
    layout = ParallelLayout(DeviceMesh(4, 1), pp=pp, dp=1)
    args = {"micro_batch": 2, "n_microbatches": 2, "vocab": 32000}
    untied = job_memory_per_rank(LLAMA, layout, **args).params_per_rank
    tied = job_memory_per_rank(replace(LLAMA, tie_embeddings=True), layout, **args).params_per_rank
    assert untied - tied == (8_192_000 if pp == 1 else 0)


def test_schemes_of_gpt_layers_only_refuse_llama_layers_by_key():
    with pytest.raises(SimulationError) as summa:
        build_summa_program(replace(LLAMA, layers=1), 2)
    assert summa.value.key == "model.kv_heads"
    with pytest.raises(SimulationError) as sagemaker:
        build_sagemaker_program(replace(LLAMA, layers=1, kv_heads=None), 2)
    assert sagemaker.value.key == "model.ffn"
    gelu = replace(LLAMA, layers=1, kv_heads=None, ffn="gelu")
    assert build_sagemaker_program(gelu, 2).tasks
    with pytest.raises(SimulationError) as fp8:
        build_summa_program(replace(gelu, dtype="fp8"), 2)
    assert fp8.value.key == "model.dtype"
