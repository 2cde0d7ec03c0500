"""The ATP transformer layer (paper Figure 6) with chunk-based overlap (Section 4.1, Figure 8).

Input and output ``[b, s, h]`` are ``[Replicate, Shard(2)]``: each rank holds ``[b, s, h/d2]``.

* LayerNorm on that hidden shard: per-token sum and sum of squares all-reduced over
  dimension 2 (one tiny all-reduce of 2·b·s values; forward and backward); with d2 = 1 the
  whole hidden size is local and ``F.layer_norm`` does it in one pass.
* QKV: column-first (f1), giving the Q, K, V of heads/d1 heads replicated over dimension 2.
* Attention core fully sharded: "scatter" keeps this rank's heads/(d1·d2) heads (no
  communication; its backward all-gathers the QKV gradient over dimension 2), and "gather"
  all-gathers the heads' outputs over dimension 2 before the output linear (its backward
  slices). The core is unfused, as atpsim models it (:mod:`validation.ops`): a batched GEMM
  for the scores (scale and causal mask in its epilogue), softmax, dropout, a batched GEMM
  for the context.
* Output linear: row-first (f2), then bias-dropout-residual; FC1: column-first (f3), then
  bias-GeLU; FC2: row-first (f4), then bias-dropout-residual. The three linears skip their own
  bias add, which is part of the op after them, as in atpsim's program.

Chunks: the batch is split into *chunks* equal parts; each chunk's forward is a generator that
yields at every collective it launches, and :func:`interleave` runs the chunks round-robin, so
chunk i's collective is in flight while chunk i+1 computes. In the backward pass every linear
overlaps its dgrad all-reduce with its wgrad GEMM (:mod:`validation.linear`). Dropout
(``config.dropout``, attention probabilities and both residual branches) is 0 by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn
from torch.distributed.tensor import Placement, Replicate, Shard

from validation.comm import F1, F2, F3, F4, Conjugate, Pending, gather, reduce_statistics, scatter
from validation.linear import COLUMN_FIRST, ROW_FIRST, ATPLinear, Steps, shard
from validation.mesh import ATPMesh
from validation.ops import (
    attention_scores,
    attention_softmax,
    bias_dropout_add,
    bias_gelu,
    causal_mask,
    dropout,
    layernorm,
    layernorm_apply,
    layernorm_statistics,
)
from validation.reference import LayerConfig, ReferenceLayer

ACTIVATION_SPEC = (Replicate(), Shard(2))
#: The conjugate operator of each linear (Figure 6). Override to try another assignment.
OPERATORS: Mapping[str, Conjugate] = {"qkv": F1, "proj": F2, "fc1": F3, "fc2": F4}


def interleave(chunks: Sequence[Steps]) -> list[torch.Tensor]:
    """Run the chunks' step generators round-robin: each runs until it has launched a
    collective, then the next one computes while that collective is in flight. All ranks run
    the same order, so every group sees its collectives in the same order."""
    results: list[torch.Tensor | None] = [None] * len(chunks)
    waiting = [Pending() for _ in chunks]
    live = list(range(len(chunks)))
    while live:
        for c in list(live):
            waiting[c].wait()
            try:
                waiting[c] = next(chunks[c])
            except StopIteration as stop:
                results[c] = stop.value
                live.remove(c)
    return [r for r in results if r is not None]


class ShardedLayerNorm(nn.Module):
    """LayerNorm over a hidden dimension split across mesh dimension 2."""

    def __init__(self, hidden: int, mesh: ATPMesh, eps: float, dtype: torch.dtype | None = None):
        super().__init__()
        local = hidden // mesh.size(2)
        self.mesh, self.hidden, self.eps = mesh, hidden, eps
        self.weight = nn.Parameter(torch.ones(local, dtype=dtype, device=mesh.device()))
        self.bias = nn.Parameter(torch.zeros(local, dtype=dtype, device=mesh.device()))
        self.specs: dict[str, tuple[Placement, ...]] = {"weight": (Replicate(), Shard(0))}
        self.specs["bias"] = (Replicate(), Shard(0))

    @torch.no_grad()
    def load_full_(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        self.weight.copy_(shard(weight, self.mesh, self.specs["weight"]))
        self.bias.copy_(shard(bias, self.mesh, self.specs["bias"]))

    def steps(self, x: torch.Tensor) -> Steps:
        """Statistics, their all-reduce on dimension 2 (yielded while in flight), apply; one
        ``F.layer_norm`` when the hidden size is not split."""
        if self.mesh.size(2) == 1:
            return layernorm(x, self.weight, self.bias, self.eps)
        pending = Pending()
        stats = reduce_statistics(layernorm_statistics(x), self.mesh.group(2), pending)
        yield pending
        return layernorm_apply(x, stats, self.hidden, self.eps, self.weight, self.bias)


def _bias(linear: ATPLinear) -> torch.Tensor:
    if linear.bias is None:
        raise ValueError("the layer's linears have biases")
    return linear.bias


class ATPTransformerLayer(nn.Module):
    """One transformer layer of *config* on *mesh*, its batch processed in *chunks* parts."""

    def __init__(self, config: LayerConfig, mesh: ATPMesh, chunks: int = 1, *,
                 dtype: torch.dtype | None = None,
                 operators: Mapping[str, Conjugate] = OPERATORS):  # fmt: skip
        super().__init__()
        ranks, h, ffn = mesh.d1 * mesh.d2, config.hidden, config.ffn_mult * config.hidden
        if config.heads % ranks:
            raise ValueError(f"heads ({config.heads}) must be divisible by d1*d2 ({ranks})")
        if chunks < 1 or config.batch % chunks:
            raise ValueError(f"chunks ({chunks}) must divide the batch ({config.batch})")
        self.config, self.mesh, self.chunks = config, mesh, chunks
        self.ln1 = ShardedLayerNorm(h, mesh, config.eps, dtype)
        self.qkv = ATPLinear(h, 3 * h, mesh, COLUMN_FIRST, conjugate=operators["qkv"], dtype=dtype)
        self.proj = ATPLinear(h, h, mesh, ROW_FIRST, conjugate=operators["proj"], dtype=dtype,
                              skip_bias_add=True)  # fmt: skip
        self.ln2 = ShardedLayerNorm(h, mesh, config.eps, dtype)
        self.fc1 = ATPLinear(h, ffn, mesh, COLUMN_FIRST, conjugate=operators["fc1"], dtype=dtype,
                             skip_bias_add=True)  # fmt: skip
        self.fc2 = ATPLinear(ffn, h, mesh, ROW_FIRST, conjugate=operators["fc2"], dtype=dtype,
                             skip_bias_add=True)  # fmt: skip
        self.mask = causal_mask(config.seq, mesh.device(), dtype or torch.get_default_dtype())

    def parameter_specs(self) -> dict[str, tuple[Placement, ...]]:
        """The placement of every parameter, by its name in ``named_parameters()``."""
        return {
            f"{name}.{param}": spec
            for name, module in self.named_children()
            for param, spec in module.specs.items()  # type: ignore[union-attr,operator]
        }

    def load_reference_(self, reference: ReferenceLayer) -> None:
        """Copy this rank's shards of every parameter of *reference*."""
        for name, module in self.named_children():
            source = getattr(reference, name)
            module.load_full_(source.weight.detach(), source.bias.detach())  # type: ignore[operator]

    def attention_steps(self, x: torch.Tensor) -> Steps:
        """QKV, scatter, attention core, gather, output linear (without its bias) on one
        chunk."""
        b, s, _ = x.shape
        d, group = self.config.head_dim, self.mesh.group(2)
        qkv = yield from self.qkv.steps(x)
        heads = qkv.view(b, s, -1, 3, d).permute(2, 3, 0, 1, 4)  # [heads/d1, 3, b, s, d]
        mine = scatter(heads, group)  # [heads/(d1 d2), 3, b, s, d]
        q, k, v = (t.reshape(-1, s, d) for t in mine.unbind(1))  # [local heads · b, s, d]
        mask = self.mask if self.config.causal else None
        probs = dropout(attention_softmax(attention_scores(q, k, mask)), self._dropout())
        context = torch.bmm(probs, v).view(-1, b, s, d)  # [local heads, b, s, d]
        pending = Pending()
        context = gather(context, group, pending)  # [heads/d1, b, s, d]
        yield pending
        context = context.permute(1, 2, 0, 3).reshape(b, s, -1)
        return (yield from self.proj.steps(context))

    def chunk_steps(self, x: torch.Tensor) -> Steps:
        """The whole layer's forward pass on one chunk, as a step generator."""
        p = self._dropout()
        normed = yield from self.ln1.steps(x)
        x = bias_dropout_add((yield from self.attention_steps(normed)), _bias(self.proj), x, p)
        normed = yield from self.ln2.steps(x)
        hidden = bias_gelu((yield from self.fc1.steps(normed)), _bias(self.fc1))
        return bias_dropout_add((yield from self.fc2.steps(hidden)), _bias(self.fc2), x, p)

    def _dropout(self) -> float:
        return self.config.dropout if self.training else 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = x.chunk(self.chunks, dim=0)
        return torch.cat(interleave([self.chunk_steps(p) for p in parts]), dim=0)
