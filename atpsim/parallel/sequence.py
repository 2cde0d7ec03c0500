"""Megatron-LM sequence parallelism on 1D tensor parallelism (DeviceMesh(t, 1)).

Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
Section 4.2.2: the LayerNorms and the dropout-adds, which 1D TP runs on every rank over the
whole ``[T, h]``, run on ``T / t`` tokens each; the all-reduce after each row-parallel linear
becomes a reduce-scatter along the sequence, and an all-gather brings the sequence back before
each column-parallel linear. A reduce-scatter and an all-gather of a buffer move what its
all-reduce moves, so the forward's traffic is unchanged. In the backward the conjugates
swap (the gradient is all-gathered before the row-parallel dgrads, reduce-scattered after the
column-parallel ones), and the sharded LayerNorm output each column-parallel wgrad needs is
all-gathered again (it is kept sharded to save memory, Section 4.2.2): two all-gathers more.

ATP's dimension 2 has no analogue here: on a 2D mesh the LayerNorm input is already split
over d2 along the hidden dimension, and splitting it along the sequence as well would need
the attention's all-gather on dimension 2 to carry the sequence too; not modelled.
"""

from __future__ import annotations

from dataclasses import replace

from atpsim.errors import SimulationError
from atpsim.parallel.context import attention_backward, attention_forward
from atpsim.parallel.moe import ExpertDims, moe_backward_items, moe_forward_items
from atpsim.parallel.ops import (
    LN_BWD_PASSES,
    LN_FWD_PASSES,
    Item,
    LayerDims,
    chain_items,
    layernorm_items,
    linear_op,
    memory_op,
    mesh_collective,
    mlp_activation_items,
)


def sequence_dims(d: LayerDims) -> LayerDims:
    """This rank's share of the tokens for the sequence-parallel ops (checked: 1D TP, and the
    tokens split evenly)."""
    if d.d2 != 1:
        raise SimulationError("sequence parallelism is for 1D TP (DeviceMesh(t, 1)), not a 2D mesh",
                              key="sequence_parallel")  # fmt: skip
    if d.tokens % d.d1:
        raise SimulationError(f"{d.tokens} tokens do not split over {d.d1} ranks",
                              key="sequence_parallel")  # fmt: skip
    return replace(d, tokens=d.tokens // d.d1)


def sp_forward_items(d: LayerDims, layer: int, moe: ExpertDims | None = None) -> list[Item]:
    """One layer's forward with sequence parallelism, for one chunk, in order; with *moe*, the
    MLP is a mixture of experts fed the rank's own ``T/t`` tokens
    (:func:`~atpsim.parallel.moe.moe_forward_items`)."""
    p, t, b, s = f"l{layer}.", d.tokens, d.dtype_bytes, sequence_dims(d)
    h1, f1 = d.hidden // d.d1, d.ffn // d.d1
    q1, g1 = d.qkv_out // d.d1, d.fc1_out // d.d1
    full = t * d.hidden * b
    mlp = moe_forward_items(d, moe, p) if moe is not None else [
        *mesh_collective(f"{p}sp_gather2", "all_gather", 1, full, d),
        *chain_items(linear_op(f"{p}fc1", t, g1, d.hidden, d)),
        *mlp_activation_items(f"{p}fc1", t * f1, d, backward=False),
        *chain_items(linear_op(f"{p}fc2", t, d.hidden, f1, d)),
        *mesh_collective(f"{p}f4", "reduce_scatter", 1, full, d),
    ]
    return [
        *layernorm_items(f"{p}ln1", s, LN_FWD_PASSES),
        *mesh_collective(f"{p}sp_gather1", "all_gather", 1, full, d),
        *chain_items(linear_op(f"{p}qkv", t, q1, d.hidden, d)),
        *attention_forward(p, d),
        *chain_items(linear_op(f"{p}proj", t, d.hidden, h1, d)),
        *mesh_collective(f"{p}f2", "reduce_scatter", 1, full, d),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add", s.tokens * d.hidden, 3 * b + 1)),
        *layernorm_items(f"{p}ln2", s, LN_FWD_PASSES),
        *mlp,
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add", s.tokens * d.hidden, 3 * b + 1)),
    ]


def _column_bwd(name: str, conjugate: str, m: int, k: int, n: int, d: LayerDims) -> list[Item]:
    """A column-parallel linear's backward: the all-gather of the sharded input the wgrad
    needs, dgrad, its reduce-scatter, then wgrad. (Megatron-LM overlaps that all-gather with
    the dgrad; here the dgrad waits for it, so this is an upper bound.)"""
    full = m * k * d.dtype_bytes
    return [
        *mesh_collective(f"{name}_input_gather", "all_gather", 1, full, d),
        (linear_op(f"{name}_dgrad", m, k, n, d), "dgrad"),
        *mesh_collective(conjugate, "reduce_scatter", 1, full, d),
        (linear_op(f"{name}_wgrad", k, n, m, d), "wgrad"),
    ]


def _row_bwd(name: str, conjugate: str, m: int, k: int, n: int, d: LayerDims) -> list[Item]:
    """A row-parallel linear's backward: all-gather the sequence-sharded gradient, dgrad, wgrad."""
    return [
        *mesh_collective(conjugate, "all_gather", 1, m * n * d.dtype_bytes, d),
        (linear_op(f"{name}_dgrad", m, k, n, d), "dgrad"),
        (linear_op(f"{name}_wgrad", k, n, m, d), "wgrad"),
    ]


def sp_backward_items(d: LayerDims, layer: int, moe: ExpertDims | None = None) -> list[Item]:
    """One layer's backward with sequence parallelism, for one chunk, in order."""
    p, t, b, s = f"l{layer}.", d.tokens, d.dtype_bytes, sequence_dims(d)
    h1, f1 = d.hidden // d.d1, d.ffn // d.d1
    q1, g1 = d.qkv_out // d.d1, d.fc1_out // d.d1
    mlp = moe_backward_items(d, moe, p) if moe is not None else [
        *_row_bwd(f"{p}fc2", f"{p}f4_bwd", t, f1, d.hidden, d),
        *mlp_activation_items(f"{p}fc1", t * f1, d, backward=True),
        *_column_bwd(f"{p}fc1", f"{p}sp_gather2_bwd", t, d.hidden, g1, d),
    ]
    return [
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add_bwd", s.tokens * d.hidden, 2 * b + 1)),
        *mlp,
        *layernorm_items(f"{p}ln2_bwd", s, LN_BWD_PASSES),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add_bwd", s.tokens * d.hidden, 2 * b + 1)),
        *_row_bwd(f"{p}proj", f"{p}f2_bwd", t, h1, d.hidden, d),
        *attention_backward(p, d),
        *_column_bwd(f"{p}qkv", f"{p}sp_gather1_bwd", t, d.hidden, q1, d),
        *layernorm_items(f"{p}ln1_bwd", s, LN_BWD_PASSES),
    ]
