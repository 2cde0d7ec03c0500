"""ATP's transformer layer on DeviceMesh(d1, d2) as a per-rank :class:`StepProgram`.

Sharding (paper Sections 3.1-3.2, Figures 5 and 6), per rank, T = tokens of one chunk:

* Activations ``X[b, s, h]`` are ``[Replicate, Shard(hidden)]``: each rank holds ``[T, h/d2]``.
* Column-first linears (QKV ``h -> 3h``, FC1 ``h -> 4h``), ``W: [Shard(1), Shard(0)]``, local
  ``[k/d2, n/d1]``: the forward GEMM leaves a partial sum over dimension 2, all-reduced there
  (``[T, n/d1]``: f1, f3). Backward: dgrad ``[T, n/d1] x [n/d1, k/d2]`` is partial over
  dimension 1 and all-reduced there (``[T, h/d2]``); wgrad ``[k/d2, T] x [T, n/d1]`` is local.
* Row-first linears (attention output ``h -> h``, FC2 ``4h -> h``), ``W: [Shard(0), Shard(1)]``,
  local ``[k/d1, n/d2]``, input ``[T, k/d1]``: the forward sum is partial over dimension 1
  (all-reduce of ``[T, h/d2]``: f2, f4); the dgrad all-reduces ``[T, k/d1]`` on dimension 2.
* The attention core is fully sharded: after f1 a rank holds Q, K, V of heads/d1 heads
  (replicated over dimension 2); the scatter keeps 1/d2 of them (a local slice), so the core
  runs on heads/(d1·d2) heads; the gather before the output linear is an all-gather on
  dimension 2 of ``[T, h/d1]``. Backward, the gather's gradient is a local slice and the
  scatter's is an all-gather on dimension 2 of the QKV-output gradient ``[T, 3h/d1]``.
* LayerNorm on ``[T, h/d2]`` needs the mean and variance over the whole hidden size: an
  all-reduce on dimension 2 of 2 fp32 values per token, forward and backward (latency, at scale).

With d2 = 1 this is Megatron-LM's layer: all-reduces of ``[T, h]`` after the attention output
and FC2 in the forward pass and after the QKV and FC1 dgrads in the backward pass.

The paper's text says f1/f3 all-reduce on the *first* mesh dimension in the forward pass; its
Eq. 2 (``3h/(d1·B2)``, ``4h/(d1·B2)``) and the sharding above put them on the second, which is
what this plan does. Eq. 2 also charges f1 and f3 the same ``[b·s, 3h/d1]``, ``[b·s, 4h/d1]``
on dimension 2 in both passes (``2·L·b·s·(7h/(d1·B2) + 2h/(d2·B1))``); here the backward
all-reduces are the dgrads' shapes instead (dimension 1: ``h/d2`` twice; dimension 2:
``h/d1 + 4h/d1``), plus the all-gathers and the LayerNorm statistics, which Eq. 2 omits. The
analytic mode uses Eq. 2 verbatim; the event simulation runs this program
(:func:`program_summary` gives its bytes per dimension and collective).

Chunk-based overlap (Section 4.1, Figure 8): the batch is split into *chunks*; the ops between
two collectives form a segment, and segments are issued segment by segment, chunk by chunk, so
the compute stream runs chunk i+1's segment while chunk i's collective runs. In the backward
pass (Section 4.2) each linear issues its dgrad, then the dgrad's all-reduce, then the wgrad,
which overlaps the all-reduce.

Memory-bound ops follow Megatron-LM's fused kernels (bytes read + written per element of the
tensor, B = dtype bytes, masks 1 byte): LayerNorm 2B (+B for the statistics pass when the
hidden is sharded), scale-mask-softmax 2B, dropout 2B+1, bias-GeLU 2B, bias-dropout-residual
3B+1; backward LayerNorm with the residual-gradient add 4B (+2B statistics pass), softmax 3B,
dropout 2B+1, GeLU 3B. Linear biases are added in GEMM epilogues (no separate op).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.ops import (
    LN_BWD_PASSES,
    LN_FWD_PASSES,
    Issuer,
    Item,
    LayerDims,
    attention_core_backward,
    attention_core_forward,
    chain_items,
    gemm_op,
    layernorm_items,
    memory_op,
    mesh_collective,
)
from atpsim.parallel.sequence import sp_backward_items, sp_forward_items
from atpsim.program import ComputeOp, StepProgram

#: Flag set when heads % (d1·d2) != 0: the attention core's work is split evenly anyway.
FLAG_UNEVEN_HEADS = "heads_not_divisible_by_mesh"


def layer_dims(model: ModelConfig, mesh: DeviceMesh, chunks: int) -> LayerDims:
    """Check that *model* splits over *mesh* and *chunks*, and return the per-rank sizes."""
    if chunks < 1 or model.batch % chunks:
        raise AtpsimError(f"chunks ({chunks}) must be >= 1 and divide the batch ({model.batch})")
    for dim, size in (("d1", mesh.d1), ("d2", mesh.d2)):
        if model.hidden % size:
            raise AtpsimError(
                f"model.hidden ({model.hidden}) is not divisible by {dim} = {size} of {mesh}"
            )
    share = (model.batch // chunks) * model.heads / mesh.size
    return LayerDims(
        tokens=model.batch // chunks * model.seq,
        seq=model.seq,
        hidden=model.hidden,
        ffn=model.ffn_mult * model.hidden,
        d1=mesh.d1,
        d2=mesh.d2,
        head_dim=model.hidden // model.heads,
        head_share=share,
        head_batches=math.ceil(share - 1e-9),
        dtype_bytes=model.dtype_bytes,
    )


def forward_items(d: LayerDims, layer: int) -> list[Item]:
    """One layer's forward ops for one chunk, in order (Figure 6)."""
    p, t, b = f"l{layer}.", d.tokens, d.dtype_bytes
    hd1, hd2, fd1 = d.hidden // d.d1, d.hidden // d.d2, d.ffn // d.d1
    return [
        *layernorm_items(f"{p}ln1", d, LN_FWD_PASSES),
        *chain_items(gemm_op(f"{p}qkv", t, 3 * hd1, hd2, d)),
        *mesh_collective(f"{p}f1", "all_reduce", 2, t * 3 * hd1 * b, d),
        *attention_core_forward(p, d),
        *mesh_collective(f"{p}attn_gather", "all_gather", 2, t * hd1 * b, d),
        *chain_items(gemm_op(f"{p}proj", t, hd2, hd1, d)),
        *mesh_collective(f"{p}f2", "all_reduce", 1, t * hd2 * b, d),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add", t * hd2, 3 * b + 1)),
        *layernorm_items(f"{p}ln2", d, LN_FWD_PASSES),
        *chain_items(gemm_op(f"{p}fc1", t, fd1, hd2, d)),
        *mesh_collective(f"{p}f3", "all_reduce", 2, t * fd1 * b, d),
        *chain_items(memory_op(f"{p}fc1_bias_gelu", t * fd1, 2 * b)),
        *chain_items(gemm_op(f"{p}fc2", t, hd2, fd1, d)),
        *mesh_collective(f"{p}f4", "all_reduce", 1, t * hd2 * b, d),
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add", t * hd2, 3 * b + 1)),
    ]


def _linear_bwd(
    name: str, conjugate: str, m: int, k: int, n: int, dim: int, d: LayerDims
) -> list[Item]:
    """dgrad ``[m, n] x [n, k]``, the all-reduce *conjugate* of its ``[m, k]`` output on mesh
    dimension *dim*, then wgrad ``[k, m] x [m, n]`` (Section 4.2)."""
    return [
        (gemm_op(f"{name}_dgrad", m, k, n, d), "dgrad"),
        *mesh_collective(conjugate, "all_reduce", dim, m * k * d.dtype_bytes, d),
        (gemm_op(f"{name}_wgrad", k, n, m, d), "wgrad"),
    ]


def backward_items(d: LayerDims, layer: int) -> list[Item]:
    """One layer's backward ops for one chunk, in order (the forward reversed)."""
    p, t, b = f"l{layer}.", d.tokens, d.dtype_bytes
    hd1, hd2, fd1 = d.hidden // d.d1, d.hidden // d.d2, d.ffn // d.d1
    return [
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add_bwd", t * hd2, 2 * b + 1)),
        *_linear_bwd(f"{p}fc2", f"{p}f4_bwd", t, fd1, hd2, 2, d),
        *chain_items(memory_op(f"{p}fc1_bias_gelu_bwd", t * fd1, 3 * b)),
        *_linear_bwd(f"{p}fc1", f"{p}f3_bwd", t, hd2, fd1, 1, d),
        *layernorm_items(f"{p}ln2_bwd", d, LN_BWD_PASSES),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add_bwd", t * hd2, 2 * b + 1)),
        *_linear_bwd(f"{p}proj", f"{p}f2_bwd", t, hd1, hd2, 2, d),
        *attention_core_backward(p, d),
        *mesh_collective(f"{p}attn_scatter_bwd", "all_gather", 2, t * 3 * hd1 * b, d),
        *_linear_bwd(f"{p}qkv", f"{p}f1_bwd", t, hd2, 3 * hd1, 1, d),
        *layernorm_items(f"{p}ln1_bwd", d, LN_BWD_PASSES),
    ]


def build_step_program(
    model: ModelConfig, mesh: DeviceMesh, chunks: int = 1, *, optimizer_step: bool = False
) -> StepProgram:
    """Forward and backward of *model*'s ``layers`` transformer layers on *mesh*, the batch
    split into *chunks*, as one rank's program (every rank runs the same, SPMD). With
    *optimizer_step*, the Adam update of each layer's parameters follows (memory-bound)."""
    dims = layer_dims(model, mesh, chunks)
    issuer = Issuer(chunks)
    _issue_pass(issuer, dims, model.layers, "fwd")
    _issue_pass(issuer, dims, model.layers, "bwd")
    if optimizer_step:
        issuer.finish([_adam_op(model, mesh, layer) for layer in range(model.layers)])
    return StepProgram(tasks=tuple(issuer.tasks), flags=_flags(model, mesh))


def build_pass_program(
    model: ModelConfig,
    mesh: DeviceMesh,
    chunks: int,
    phase: Literal["fwd", "bwd"],
    *,
    sequence_parallel: bool = False,
) -> StepProgram:
    """One pass of :func:`build_step_program` alone: the forward (``"fwd"``) or the backward
    (``"bwd"``) of *model*'s layers, as a pipeline stage runs it for one micro-batch
    (``model.batch`` samples). The two passes' tasks are exactly those of the whole program;
    *sequence_parallel* runs Megatron-LM's sequence parallelism (:mod:`atpsim.parallel.sequence`)."""
    issuer = Issuer(chunks)
    _issue_pass(issuer, layer_dims(model, mesh, chunks), model.layers, phase, sequence_parallel)
    return StepProgram(tasks=tuple(issuer.tasks), flags=_flags(model, mesh))


def _issue_pass(issuer: Issuer, dims: LayerDims, layers: int, phase: Literal["fwd", "bwd"],
                sequence_parallel: bool = False) -> None:
    """Issue the forward of layers 0, 1, ... or the backward of the last layer first."""
    forward, backward = forward_items, backward_items
    if sequence_parallel:
        forward, backward = sp_forward_items, sp_backward_items
    if phase == "fwd":
        issuer.issue([i for layer in range(layers) for i in forward(dims, layer)], "fwd")
    else:
        issuer.issue([i for layer in reversed(range(layers)) for i in backward(dims, layer)], "bwd")


def _flags(model: ModelConfig, mesh: DeviceMesh) -> tuple[str, ...]:
    return (FLAG_UNEVEN_HEADS,) if model.heads % mesh.size else ()


def params_per_rank(model: ModelConfig, mesh: DeviceMesh) -> float:
    """Parameters one rank holds for all of *model*'s layers: the linear weights
    ``(4h² + 2·h·ffn) / (d1·d2)``; the column-first biases (QKV ``3h``, FC1 ``ffn``) split over
    dimension 1; the row-first biases (attention output, FC2: ``h`` each) and the two
    LayerNorms' gain and bias (``4h``) split over dimension 2."""
    h, ffn, d1, d2 = model.hidden, model.ffn_mult * model.hidden, mesh.d1, mesh.d2
    weights = (4 * h * h + 2 * h * ffn) / (d1 * d2)
    biases = (3 * h + ffn) / d1 + 2 * h / d2
    layernorms = 4 * h / d2
    return model.layers * (weights + biases + layernorms)


def adam_bytes_per_param(dtype_bytes: int) -> int:
    """Bytes an Adam update moves per parameter: it reads the gradient, the fp32 master
    weight, momentum and variance and writes the three fp32 states and the low-precision
    weight (24 + 2·B); in fp32 the weight is the master copy (read g, w, m, v; write w, m, v)."""
    return 28 if dtype_bytes >= 4 else 24 + 2 * dtype_bytes


def _adam_op(model: ModelConfig, mesh: DeviceMesh, layer: int) -> ComputeOp:
    params = params_per_rank(replace(model, layers=1), mesh)
    return memory_op(f"l{layer}.adam", params, adam_bytes_per_param(model.dtype_bytes))


def program_summary(program: StepProgram, ranks: int = 1) -> dict:
    """Totals of *program* per rank: GEMM FLOPs, memory-op bytes, and collective bytes and
    counts per mesh dimension and collective (``comm_bytes[dim][collective]``); with *ranks*,
    also the GEMM FLOPs summed over that many ranks."""
    gemm_flops = sum(op.flops for op in program.compute_ops() if op.kind == "gemm")
    comm_bytes: dict[int, dict[str, float]] = {1: {}, 2: {}}
    comm_count: dict[int, dict[str, int]] = {1: {}, 2: {}}
    for op in program.comm_ops():
        by_bytes, by_count = comm_bytes.setdefault(op.dim, {}), comm_count.setdefault(op.dim, {})
        by_bytes[op.collective] = by_bytes.get(op.collective, 0.0) + op.bytes
        by_count[op.collective] = by_count.get(op.collective, 0) + 1
    return {
        "tasks": len(program.tasks),
        "compute_ops": len(program.compute_ops()),
        "comm_ops": len(program.comm_ops()),
        "gemm_flops_per_rank": gemm_flops,
        "gemm_flops_total": gemm_flops * ranks,
        "memory_op_bytes_per_rank": sum(
            op.bytes_moved for op in program.compute_ops() if op.kind == "memory"
        ),
        "comm_bytes": comm_bytes,
        "comm_count": comm_count,
        "flags": list(program.flags),
    }
