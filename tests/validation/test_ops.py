"""The layer's non-GEMM ops (validation.ops): the unfused attention core equals PyTorch's fused
one, the sharded LayerNorm equals F.layer_norm, dropout is the identity at p = 0 and drops
about p of the elements otherwise."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from validation.ops import (
    attention_scores,
    attention_softmax,
    bias_dropout_add,
    causal_mask,
    dropout,
    layernorm,
    layernorm_apply,
    layernorm_statistics,
)
from validation.reference import LayerConfig


@pytest.mark.parametrize("causal", [True, False])
def test_unfused_attention_equals_scaled_dot_product_attention(causal: bool) -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(6, 16, 8, generator=generator) for _ in range(3))
    mask = causal_mask(16, q.device, q.dtype) if causal else None
    context = torch.bmm(dropout(attention_softmax(attention_scores(q, k, mask)), 0.0), v)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(context, expected, rtol=1e-5, atol=1e-6)


def test_causal_mask_hides_later_keys() -> None:
    mask = causal_mask(3, torch.device("cpu"), torch.float32)
    assert mask.tolist() == [[0, -float("inf"), -float("inf")], [0, 0, -float("inf")], [0, 0, 0]]


def test_sharded_layernorm_of_summed_statistics_equals_layer_norm() -> None:
    """Two shards of 8 features: their statistics summed give the 16-feature LayerNorm."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(5, 16, generator=generator) * 3 + 1
    weight, bias = torch.randn(16, generator=generator), torch.randn(16, generator=generator)
    shards = x.split(8, dim=-1)
    stats = sum(layernorm_statistics(s) for s in shards)
    out = [
        layernorm_apply(s, stats, 16, 1e-5, w, b)
        for s, w, b in zip(shards, weight.split(8), bias.split(8), strict=True)
    ]
    expected = layernorm(x, weight, bias, 1e-5)
    torch.testing.assert_close(torch.cat(out, dim=-1), expected, rtol=1e-5, atol=1e-5)


def test_dropout_is_the_identity_at_zero_and_drops_otherwise() -> None:
    y, bias, residual = torch.ones(1000, 100), torch.zeros(100), torch.zeros(1000, 100)
    assert torch.equal(bias_dropout_add(y, bias, residual, 0.0), y)
    torch.manual_seed(0)
    dropped = (bias_dropout_add(y, bias, residual, 0.1) == 0).float().mean().item()
    assert dropped == pytest.approx(0.1, abs=0.01)


def test_layer_config_rejects_a_dropout_outside_0_1() -> None:
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        LayerConfig(hidden=32, heads=4, batch=2, seq=8, dropout=1.0)
