"""Device memory per rank of an ATP layer stack: weights, gradients, optimizer state and the
activations kept for the backward pass, against the profile's capacity.

Parameters per rank follow the sharding of :mod:`atpsim.parallel.atp`
(:func:`~atpsim.parallel.atp.params_per_rank`).

Bytes per parameter (Rajbhandari et al., ZeRO, SC 2020 — the paper's ref [21], Section 3.1):
mixed-precision Adam keeps fp16/bf16 weights and gradients (2 + 2 bytes) and fp32 master
weights, momentum and variance (K = 12 bytes): 16 bytes per parameter. In fp32 training the
weights are the master copy: 4 + 4 + 8 bytes.

Activations kept for backward per layer (Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", 2022, Section 4, for tensor parallelism t:
``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` bytes in fp16; this module derives the same terms for the 2D
sharding and any dtype, B bytes per element, T = b·s tokens):

* hidden-sharded ``[T, h/d2]``: the inputs of both LayerNorms, of QKV and of FC1 (4B), two
  dropout masks (1 byte each);
* Q, K, V of this rank's heads ``[T, h/(d1·d2)]`` (3B; with grouped-query attention
  ``[T, (h + 2·kv)/(d1·d2)]``, ``kv = kv_heads·head_dim``); the gathered attention output, the
  output linear's input ``[T, h/d1]`` (B); the GeLU input and output ``[T, ffn/d1]`` (2B;
  SwiGLU keeps its gate and up input ``[T, 2·ffn/d1]`` and its output: 3B);
* per (sample, head) pair of this rank: softmax output and dropout output ``[s, s]`` (2B)
  and the dropout mask (1 byte);
* LayerNorm mean and reciprocal std per token (2 x 2 fp32).

With d2 = 1, d1 = t, fp16 and ffn = 4h this is exactly Korthikanti's expression. Chunking
does not change what is kept (every chunk's activations live until its backward); it shrinks
the transient working set, estimated as the largest op's inputs + outputs of one chunk plus
the largest collective buffer. The embedding, the LM head, the CUDA context and allocator
fragmentation are not counted. In FP8 training activations are counted in bf16 (Transformer
Engine's FP8 copies of the linears' inputs, which it may keep instead, are not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import ModelConfig
from atpsim.parallel.atp import build_step_program, layer_dims, params_per_rank
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.ops import LayerDims
from atpsim.parallel.schemes import TPPlan, scheme_of

#: LayerNorm statistics kept per token: mean and 1/std in fp32, for each of the 2 LayerNorms.
LN_SAVED_BYTES_PER_TOKEN = 2 * 2 * 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one rank needs; *fits* compares the total with the device capacity."""

    params_per_rank: float
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    transient_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.transient_bytes
        )

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def optimizer_bytes_per_param(dtype_bytes: int) -> int:
    """Adam state per parameter (ZeRO Section 3.1): fp32 master + momentum + variance (12) in
    mixed precision; momentum + variance (8) when training in fp32."""
    return 8 if dtype_bytes >= 4 else 12


def activation_terms(dims: LayerDims) -> dict[str, float]:
    """Bytes one layer keeps for backward on one rank for one chunk, by what they are (the
    terms of the module docstring): ``hidden_sharded`` (LayerNorm, QKV and FC1 inputs and the
    two dropout masks, ``[T, h/d2]``), ``qkv``, ``gathered``, ``mlp``, ``attention`` (the
    attention core's softmax and dropout, the term selective recomputation drops) and
    ``ln_stats``."""
    t, b = dims.tokens, dims.dtype_bytes
    return {
        "hidden_sharded": t * dims.hidden / dims.d2 * (4 * b + 2),
        "qkv": b * t * dims.qkv_out / (dims.d1 * dims.d2),
        "gathered": b * t * dims.hidden / dims.d1,
        "mlp": b * t * (dims.fc1_out + dims.ffn) / dims.d1,
        "attention": (2 * b + 1) * dims.head_batches * dims.seq * dims.seq,
        "ln_stats": LN_SAVED_BYTES_PER_TOKEN * t,
    }


def activation_bytes_per_layer(dims: LayerDims, chunks: int) -> float:
    """Bytes one layer keeps for backward on one rank, all *chunks* of the batch together."""
    terms = activation_terms(dims)
    return chunks * (terms["hidden_sharded"] + terms["qkv"] + terms["gathered"] + terms["mlp"]
                     + terms["attention"] + terms["ln_stats"])  # fmt: skip


def transient_bytes(model: ModelConfig, mesh: DeviceMesh, chunks: int) -> float:
    """Largest working set of one chunk: the biggest op's inputs + outputs (a GEMM's A, B, C,
    a memory-bound op's reads and writes) plus the biggest collective buffer."""
    program = build_step_program(replace(model, layers=1), mesh, chunks)
    biggest_op = max(op.bytes_moved for op in program.compute_ops())
    biggest_comm = max((op.bytes for op in program.comm_ops()), default=0.0)
    return biggest_op + biggest_comm


def memory_per_rank(
    model: ModelConfig, tp: TPPlan, chunks: int, profile: HardwareProfile,
) -> MemoryEstimate:
    """Memory one rank needs to train *model* on *tp* with the batch in *chunks*.

    *tp* is ATP's mesh, or the plan of another scheme as its
    :class:`~atpsim.parallel.schemes.MemoryView` sees it: a SUMMA grid as one layer of it,
    ``DeviceMesh(q, q)``; a SageMaker group of ``t`` ranks as its weights on DeviceMesh(t, 1)
    and the activations of the rank's own ``batch / t`` samples on one GPU."""
    view = scheme_of(tp).memory_view(model, tp)
    return _estimate(model, view.weights_mesh, view.activation_model, view.activation_mesh,
                     chunks, profile)  # fmt: skip


def _estimate(model: ModelConfig, mesh: DeviceMesh, activation_model: ModelConfig,
              activation_mesh: DeviceMesh, chunks: int, profile: HardwareProfile
              ) -> MemoryEstimate:
    """Weights, gradients and optimizer state of *model* on *mesh*; activations and the
    transient working set of *activation_model* on *activation_mesh*."""
    dims = layer_dims(activation_model, activation_mesh, chunks)
    params = params_per_rank(model, mesh)
    return MemoryEstimate(
        params_per_rank=params,
        weights_bytes=params * model.weight_bytes_per_param,
        gradients_bytes=params * model.dtype_bytes,
        optimizer_bytes=params * optimizer_bytes_per_param(model.dtype_bytes),
        activations_bytes=model.layers * activation_bytes_per_layer(dims, chunks),
        transient_bytes=transient_bytes(activation_model, activation_mesh, chunks),
        capacity_bytes=profile.memory_capacity_bytes,
    )
