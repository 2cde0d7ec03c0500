"""ATP's transformer layer on DeviceMesh(d1, d2) as a per-rank :class:`StepProgram`.

Sharding (paper Sections 3.1-3.2, Figures 5 and 6), per rank, T = tokens of one chunk (with
context parallelism the rank's ``s/cp`` tokens of each sequence, the attention core a ring:
:mod:`atpsim.parallel.context`):

* Activations ``X[b, s, h]`` are ``[Replicate, Shard(hidden)]``: each rank holds ``[T, h/d2]``.
* Column-first linears (QKV ``h -> 3h``, FC1 ``h -> 4h``; with grouped-query attention QKV is
  ``h -> h + 2·kv``, ``kv = kv_heads·head_dim``, and a SwiGLU FC1 is ``h -> 2·ffn``, gate and
  up fused and split alike), ``W: [Shard(1), Shard(0)]``, local
  ``[k/d2, n/d1]``: the forward GEMM leaves a partial sum over dimension 2, all-reduced there
  (``[T, n/d1]``: f1, f3). Backward: dgrad ``[T, n/d1] x [n/d1, k/d2]`` is partial over
  dimension 1 and all-reduced there (``[T, h/d2]``); wgrad ``[k/d2, T] x [T, n/d1]`` is local.
* Row-first linears (attention output ``h -> h``, FC2 ``ffn -> h``), ``W: [Shard(0), Shard(1)]``,
  local ``[k/d1, n/d2]``, input ``[T, k/d1]``: the forward sum is partial over dimension 1
  (all-reduce of ``[T, h/d2]``: f2, f4); the dgrad all-reduces ``[T, k/d1]`` on dimension 2.
* The attention core is fully sharded: after f1 a rank holds Q, K, V of heads/d1 heads
  (replicated over dimension 2); the scatter keeps 1/d2 of them (a local slice), so the core
  runs on heads/(d1·d2) heads; the gather before the output linear is an all-gather on
  dimension 2 of ``[T, h/d1]``. Backward, the gather's gradient is a local slice and the
  scatter's is an all-gather on dimension 2 of the QKV-output gradient ``[T, 3h/d1]``.
  Grouped-query attention: a rank's query heads and their KV heads go together, so the KV
  heads split over the d1·d2 ranks as the query heads do (Megatron-LM likewise requires
  ``num_query_groups`` divisible by the TP size): a mesh of a size that does not divide
  ``kv_heads`` is refused (key ``tp``); the attention core's work is the query heads', as
  without grouping.
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
dropout 2B+1, GeLU 3B (SwiGLU: 3B forward, 5B backward, :func:`~atpsim.parallel.ops.
mlp_activation_items`). Linear biases are added in GEMM epilogues (no separate op). In FP8
training the linears' GEMMs (forward, dgrad, wgrad) run in FP8
(:func:`~atpsim.parallel.ops.linear_op`); the attention core and everything else in bf16.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError, SimulationError
from atpsim.parallel.context import attention_backward, attention_forward, check_context
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import (
    ExpertDims,
    expert_dims,
    expert_params_per_rank,
    moe_backward_items,
    moe_forward_items,
    router_params_per_rank,
)
from atpsim.parallel.ops import (
    LN_BWD_PASSES,
    LN_FWD_PASSES,
    Issuer,
    Item,
    LayerDims,
    chain_items,
    layernorm_items,
    linear_op,
    memory_op,
    mesh_collective,
    mlp_activation_items,
)
from atpsim.parallel.sequence import sp_backward_items, sp_forward_items
from atpsim.program import ComputeOp, StepProgram

#: Flag set when heads % (d1·d2) != 0: the attention core's work is split evenly anyway.
FLAG_UNEVEN_HEADS = "heads_not_divisible_by_mesh"


def layer_dims(model: ModelConfig, mesh: DeviceMesh, chunks: int, cp: int = 1) -> LayerDims:
    """Check that *model* splits over *mesh* and *chunks* (and its sequence over *cp*
    context-parallel ranks: :func:`~atpsim.parallel.context.check_context`), and return the
    per-rank sizes (a rank's ``s/cp`` tokens of each sequence)."""
    check_context(model.seq, cp)
    if chunks < 1 or model.batch % chunks:
        raise AtpsimError(f"chunks ({chunks}) must be >= 1 and divide the batch ({model.batch})")
    for dim, size in (("d1", mesh.d1), ("d2", mesh.d2)):
        if model.hidden % size:
            raise AtpsimError(
                f"model.hidden ({model.hidden}) is not divisible by {dim} = {size} of {mesh}"
            )
    check_kv_heads(model, mesh)
    if model.ffn_size % mesh.d1:
        raise SimulationError(f"model.ffn_hidden ({model.ffn_size}) is not divisible by d1 = "
                              f"{mesh.d1} of {mesh}", key="tp")  # fmt: skip
    share = (model.batch // chunks) * model.heads / mesh.size
    return LayerDims(
        tokens=model.batch // chunks * (model.seq // cp),
        seq=model.seq // cp,
        hidden=model.hidden,
        ffn=model.ffn_size,
        d1=mesh.d1,
        d2=mesh.d2,
        head_dim=model.head_dim,
        head_share=share,
        head_batches=math.ceil(share - 1e-9),
        dtype_bytes=model.dtype_bytes,
        qkv_out=model.qkv_out,
        gated=model.gated,
        linear_dtype=model.linear_dtype,
        cp=cp,
    )


def kv_heads_split(model: ModelConfig, size: int) -> bool:
    """Whether *model*'s KV heads split over *size* TP ranks: always without grouped-query
    attention (an uneven split of the heads is flagged, :data:`FLAG_UNEVEN_HEADS`), else
    when *size* divides ``kv_heads`` (module docstring)."""
    return model.n_kv_heads == model.heads or model.n_kv_heads % size == 0


def check_kv_heads(model: ModelConfig, mesh: DeviceMesh) -> None:
    """Refuse (key ``tp``) a mesh whose size does not divide the KV heads of a model with
    grouped-query attention."""
    if not kv_heads_split(model, mesh.size):
        raise SimulationError(f"model.kv_heads ({model.n_kv_heads}) does not split over the "
                              f"{mesh.size} ranks of {mesh}: grouped-query attention needs a TP "
                              "size that divides kv_heads (as Megatron-LM's num_query_groups)",
                              key="tp")  # fmt: skip


def forward_items(d: LayerDims, layer: int, moe: ExpertDims | None = None) -> list[Item]:
    """One layer's forward ops for one chunk, in order (Figure 6); with *moe*, the MLP is a
    mixture of experts (:func:`~atpsim.parallel.moe.moe_forward_items`)."""
    p, t, b = f"l{layer}.", d.tokens, d.dtype_bytes
    hd1, hd2, fd1 = d.hidden // d.d1, d.hidden // d.d2, d.ffn // d.d1
    qd1, f1d1 = d.qkv_out // d.d1, d.fc1_out // d.d1
    mlp = moe_forward_items(d, moe, p) if moe is not None else [
        *chain_items(linear_op(f"{p}fc1", t, f1d1, hd2, d)),
        *mesh_collective(f"{p}f3", "all_reduce", 2, t * f1d1 * b, d),
        *mlp_activation_items(f"{p}fc1", t * fd1, d, backward=False),
        *chain_items(linear_op(f"{p}fc2", t, hd2, fd1, d)),
        *mesh_collective(f"{p}f4", "all_reduce", 1, t * hd2 * b, d),
    ]
    return [
        *layernorm_items(f"{p}ln1", d, LN_FWD_PASSES),
        *chain_items(linear_op(f"{p}qkv", t, qd1, hd2, d)),
        *mesh_collective(f"{p}f1", "all_reduce", 2, t * qd1 * b, d),
        *attention_forward(p, d),
        *mesh_collective(f"{p}attn_gather", "all_gather", 2, t * hd1 * b, d),
        *chain_items(linear_op(f"{p}proj", t, hd2, hd1, d)),
        *mesh_collective(f"{p}f2", "all_reduce", 1, t * hd2 * b, d),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add", t * hd2, 3 * b + 1)),
        *layernorm_items(f"{p}ln2", d, LN_FWD_PASSES),
        *mlp,
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add", t * hd2, 3 * b + 1)),
    ]


def _linear_bwd(
    name: str, conjugate: str, m: int, k: int, n: int, dim: int, d: LayerDims
) -> list[Item]:
    """dgrad ``[m, n] x [n, k]``, the all-reduce *conjugate* of its ``[m, k]`` output on mesh
    dimension *dim*, then wgrad ``[k, m] x [m, n]`` (Section 4.2)."""
    return [
        (linear_op(f"{name}_dgrad", m, k, n, d), "dgrad"),
        *mesh_collective(conjugate, "all_reduce", dim, m * k * d.dtype_bytes, d),
        (linear_op(f"{name}_wgrad", k, n, m, d), "wgrad"),
    ]


def backward_items(d: LayerDims, layer: int, moe: ExpertDims | None = None) -> list[Item]:
    """One layer's backward ops for one chunk, in order (the forward reversed)."""
    p, t, b = f"l{layer}.", d.tokens, d.dtype_bytes
    hd1, hd2, fd1 = d.hidden // d.d1, d.hidden // d.d2, d.ffn // d.d1
    qd1, f1d1 = d.qkv_out // d.d1, d.fc1_out // d.d1
    mlp = moe_backward_items(d, moe, p) if moe is not None else [
        *_linear_bwd(f"{p}fc2", f"{p}f4_bwd", t, fd1, hd2, 2, d),
        *mlp_activation_items(f"{p}fc1", t * fd1, d, backward=True),
        *_linear_bwd(f"{p}fc1", f"{p}f3_bwd", t, hd2, f1d1, 1, d),
    ]
    return [
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add_bwd", t * hd2, 2 * b + 1)),
        *mlp,
        *layernorm_items(f"{p}ln2_bwd", d, LN_BWD_PASSES),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add_bwd", t * hd2, 2 * b + 1)),
        *_linear_bwd(f"{p}proj", f"{p}f2_bwd", t, hd1, hd2, 2, d),
        *attention_backward(p, d),
        *mesh_collective(f"{p}attn_scatter_bwd", "all_gather", 2, t * qd1 * b, d),
        *_linear_bwd(f"{p}qkv", f"{p}f1_bwd", t, hd2, qd1, 1, d),
        *layernorm_items(f"{p}ln1_bwd", d, LN_BWD_PASSES),
    ]


def build_step_program(
    model: ModelConfig, mesh: DeviceMesh, chunks: int = 1, *, optimizer_step: bool = False
) -> StepProgram:
    """Forward and backward of *model*'s ``layers`` transformer layers on *mesh*, the batch
    split into *chunks*, as one rank's program (every rank runs the same, SPMD). With
    *optimizer_step*, the Adam update of each layer's parameters follows (memory-bound)."""
    dims = layer_dims(model, mesh, chunks)
    experts = expert_dims(model, dims, 1)
    issuer = Issuer(chunks)
    _issue_pass(issuer, dims, model.layers, "fwd", experts=experts)
    _issue_pass(issuer, dims, model.layers, "bwd", experts=experts)
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
    ep: int = 1,
    cp: int = 1,
) -> StepProgram:
    """One pass of :func:`build_step_program` alone: the forward (``"fwd"``) or the backward
    (``"bwd"``) of *model*'s layers, as a pipeline stage runs it for one micro-batch
    (``model.batch`` samples). The two passes' tasks are exactly those of the whole program;
    *sequence_parallel* runs Megatron-LM's sequence parallelism (:mod:`atpsim.parallel.sequence`);
    *ep* splits a mixture of experts' experts over that many replicas
    (:mod:`atpsim.parallel.moe`: its all-to-alls are comm ops on :data:`~atpsim.parallel.moe.EP_DIM`);
    *cp* splits each sequence over that many context-parallel ranks, the attention a ring
    (:mod:`atpsim.parallel.context`: its sends are comm ops on :data:`~atpsim.parallel.context.CP_DIM`)."""
    dims = layer_dims(model, mesh, chunks, cp)
    experts = expert_dims(model, dims, ep, sequence_parallel)
    issuer = Issuer(chunks)
    _issue_pass(issuer, dims, model.layers, phase, sequence_parallel, experts)
    return StepProgram(tasks=tuple(issuer.tasks), flags=_flags(model, mesh))


def _issue_pass(issuer: Issuer, dims: LayerDims, layers: int, phase: Literal["fwd", "bwd"],
                sequence_parallel: bool = False, experts: ExpertDims | None = None) -> None:
    """Issue the forward of layers 0, 1, ... or the backward of the last layer first; the
    MoE layers' MLPs are *experts*'."""
    forward, backward = forward_items, backward_items
    if sequence_parallel:
        forward, backward = sp_forward_items, sp_backward_items

    def moe(layer: int) -> ExpertDims | None:
        return experts if experts is not None and experts.holds(layer) else None

    if phase == "fwd":
        issuer.issue([i for layer in range(layers) for i in forward(dims, layer, moe(layer))], "fwd")
    else:
        issuer.issue([i for layer in reversed(range(layers)) for i in backward(dims, layer, moe(layer))], "bwd")


def _flags(model: ModelConfig, mesh: DeviceMesh) -> tuple[str, ...]:
    return (FLAG_UNEVEN_HEADS,) if model.heads % mesh.size else ()


def params_per_rank(model: ModelConfig, mesh: DeviceMesh, ep: int = 1) -> float:
    """Parameters one rank holds for all of *model*'s layers: the linear weights
    (:meth:`~atpsim.compute.models.ModelConfig.layer_weights`, ``4h² + 2·h·ffn`` for GPT's
    layer; ``h·(h + 2·kv) + h² + 3·h·ffn`` for grouped-query attention and SwiGLU) over
    ``d1·d2``; the column-first biases (QKV ``h + 2·kv``, FC1 ``ffn``, ``2·ffn`` gated) split
    over dimension 1; the row-first biases (attention output, FC2: ``h`` each) and the two
    LayerNorms' gain and bias (``4h``) split over dimension 2. An MoE layer holds the router
    and its ``E/ep`` experts in place of the MLP (:func:`~atpsim.parallel.moe.
    expert_params_per_rank`, :func:`~atpsim.parallel.moe.router_params_per_rank`)."""
    h, d1, d2 = model.hidden, mesh.d1, mesh.d2
    weights = model.layer_weights() / (d1 * d2)
    biases = (model.qkv_out + model.fc1_out) / d1 + 2 * h / d2
    layernorms = 4 * h / d2
    if not model.is_moe:
        return model.layers * (weights + biases + layernorms)
    moe = model.moe_layers
    attention = (h * model.qkv_out + h * h) / (d1 * d2) + model.qkv_out / d1 + h / d2 + layernorms
    return ((model.layers - moe) * (weights + biases + layernorms) + moe * attention
            + router_params_per_rank(model, d2) + expert_params_per_rank(model, d1, d2, ep))  # fmt: skip


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
