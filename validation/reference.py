"""A single-process transformer layer: the oracle the ATP layer is checked against.

Pre-LayerNorm GPT layer (paper Section 2.1, Figure 1), by default without dropout (so results
are exact; ``LayerConfig.dropout`` adds Megatron-LM's attention and hidden dropout):
``x + Proj(Attn(QKV(LN1(x))))`` then ``+ FC2(GeLU(FC1(LN2(.))))``. Weights are
``[in, out]`` (``Y = XW``). The QKV weight's 3h columns are laid out head-major,
``(head, {q, k, v}, head_dim)``, so any split of the columns into equal blocks gives each block
the complete Q, K and V of whole heads, which is what column-first sharding needs
(Megatron-LM lays its QKV weight out the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LayerConfig:
    """One transformer layer: *hidden* size, attention *heads*, *batch* x *seq* tokens, and
    the *dropout* probability of the attention probabilities and of both residual branches."""

    hidden: int
    heads: int
    batch: int
    seq: int
    ffn_mult: int = 4
    eps: float = 1e-5
    causal: bool = True
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hidden", "heads", "batch", "seq", "ffn_mult"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class RefLinear(nn.Module):
    """``Y = X W + b`` with W [*in_features*, *out_features*]."""

    def __init__(self, in_features: int, out_features: int, generator: torch.Generator):
        super().__init__()
        scale = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(
            torch.randn(in_features, out_features, generator=generator) * scale
        )
        self.bias = nn.Parameter(torch.randn(out_features, generator=generator) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


def _layer_norm(hidden: int, eps: float, generator: torch.Generator) -> nn.LayerNorm:
    norm = nn.LayerNorm(hidden, eps=eps)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden, generator=generator))
        norm.bias.copy_(0.1 * torch.randn(hidden, generator=generator))
    return norm


def attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   dropout: float = 0.0) -> torch.Tensor:  # fmt: skip
    """softmax(Q K^T / sqrt(d)) V (Eq. 1) on [batch, heads, seq, head_dim] tensors, by
    PyTorch's fused kernel: the oracle for the ATP kernel's unfused core (validation.ops)."""
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)


class ReferenceLayer(nn.Module):
    """The full (unsharded) layer in fp32 on the CPU, with parameters drawn from *seed*."""

    def __init__(self, config: LayerConfig, seed: int = 0):
        super().__init__()
        h, ffn = config.hidden, config.ffn_mult * config.hidden
        generator = torch.Generator().manual_seed(seed)
        self.config = config
        self.ln1 = _layer_norm(h, config.eps, generator)
        self.qkv = RefLinear(h, 3 * h, generator)
        self.proj = RefLinear(h, h, generator)
        self.ln2 = _layer_norm(h, config.eps, generator)
        self.fc1 = RefLinear(h, ffn, generator)
        self.fc2 = RefLinear(ffn, h, generator)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        a, d = self.config.heads, self.config.head_dim
        qkv = self.qkv(x).view(b, s, a, 3, d).permute(3, 0, 2, 1, 4)  # [3, b, a, s, d]
        dropout = self.config.dropout if self.training else 0.0
        context = attention_core(qkv[0], qkv[1], qkv[2], self.config.causal, dropout)
        return self.proj(context.transpose(1, 2).reshape(b, s, h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.config.dropout
        x = x + F.dropout(self.attention(self.ln1(x)), p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), p, self.training)
