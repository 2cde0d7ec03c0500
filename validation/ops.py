"""The ATP layer's non-GEMM ops as the kernel runs them, one function per op of atpsim's program.

atpsim's layer program (:mod:`atpsim.parallel.atp`) has two batched GEMMs in the attention
core and memory-bound ops around every GEMM: LayerNorm (statistics and apply when the hidden
size is sharded), scale-mask-softmax, attention dropout, bias-GeLU and bias-dropout-residual.
The paper's implementations used no optimized kernels (Section 5.1), so the kernel runs the
attention core unfused, as atpsim models it, not as one ``scaled_dot_product_attention``:

* :func:`attention_scores`: ``Q K^T`` as one batched GEMM whose epilogue adds the causal mask
  and scales by ``1/sqrt(d)`` (``torch.baddbmm``, as Megatron-LM computes its scores), so the
  softmax is the only pass over the scores before the second GEMM;
* :func:`attention_softmax` and :func:`dropout` (atpsim's ``attn_softmax``, ``attn_dropout``);
* :func:`bias_gelu` (``fc1_bias_gelu``) and :func:`bias_dropout_add` (``proj_`` and
  ``fc2_bias_dropout_add``): the linears before them skip their own bias add, as Megatron-LM's
  ``skip_bias_add``, so the bias is part of the op atpsim names after it, and so is its
  gradient (the sum over tokens) in the backward pass;
* :func:`layernorm_statistics` and :func:`layernorm_apply`: a LayerNorm whose hidden size is
  split over mesh dimension 2 (atpsim's ``ln*_stats`` and ``ln*_apply``); unsplit,
  :func:`layernorm` (``F.layer_norm``, atpsim's ``ln*``).

:mod:`validation.bench.memory_ops` times these same functions, so the fitted profile describes
the code whose layers are the check points. Dropout with ``p = 0`` returns its input untouched
(the numerics check); the benchmarks use Megatron-LM's default 0.1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def causal_mask(seq: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``[seq, seq]``: 0 where a query may attend (key <= query), ``-inf`` above the diagonal."""
    mask = torch.full((seq, seq), float("-inf"), device=device, dtype=dtype)
    return torch.triu(mask, diagonal=1)


def attention_scores(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``Q K^T / sqrt(d) + mask`` for ``[batch, seq, d]`` Q and K: one batched GEMM with the
    scale and the additive mask in its epilogue (none: no mask)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    if mask is None:
        return torch.bmm(q, k.transpose(1, 2)).mul_(scale)
    return torch.baddbmm(mask, q, k.transpose(1, 2), alpha=scale)


def attention_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys (the last dimension) of the scaled, masked scores."""
    return torch.softmax(scores, dim=-1)


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Zero each element with probability *p* and scale the rest by 1/(1 - p); *x* itself
    when *p* is 0."""
    return F.dropout(x, p)


def bias_gelu(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GeLU (erf form) of the FC1 output plus its bias."""
    return F.gelu(y + bias)


def bias_dropout_add(
    y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, p: float
) -> torch.Tensor:
    """``residual + dropout(y + bias)``: a row-first linear's bias, dropout and the residual."""
    return residual + F.dropout(y + bias, p)


def layernorm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    """LayerNorm over the whole (unsplit) last dimension: one fused pass."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def layernorm_statistics(x: torch.Tensor) -> torch.Tensor:
    """``[2, ...]``: the sum and the sum of squares of *x* over its last (sharded) dimension;
    all-reduced over the shards, they give the whole mean and variance. (Two sums over
    ``x`` and ``x·x``: on a CPU core about 20 times faster than ``torch.var_mean``.)"""
    return torch.stack([x.sum(-1), (x * x).sum(-1)])


def layernorm_apply(x: torch.Tensor, stats: torch.Tensor, hidden: int, eps: float,
                    weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Normalize the shard *x* with the whole hidden size's summed *stats*, then scale and
    shift: two passes over *x* (``x·rstd - mean·rstd``, then ``·weight + bias``)."""
    mean = stats[0] / hidden
    rstd = torch.rsqrt(stats[1] / hidden - mean * mean + eps)
    normed = torch.addcmul((-mean * rstd).unsqueeze(-1), x, rstd.unsqueeze(-1))
    return torch.addcmul(bias, normed, weight)
