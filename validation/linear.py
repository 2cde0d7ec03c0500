"""Row-first and column-first ATP linears ``Y = X W`` built from a shard spec (Sections 3.2, 4.2).

Activations are ``[..., features]`` tensors; a weight is ``[in_features, out_features]`` as in
the paper's ``Y = XW``. On DeviceMesh(d1, d2):

* column-first, W ``[Shard(1), Shard(0)]``: local W ``[k/d2, n/d1]``; the input is
  ``[Replicate, Shard(-1)]`` (features split over dimension 2), the local GEMM gives partial
  sums over dimension 2, all-reduced there; the output is ``[Shard(-1), Replicate]``.
  Backward: dX = dY W^T is partial over dimension 1 and all-reduced there.
* row-first, W ``[Shard(0), Shard(1)]``: local W ``[k/d1, n/d2]``; input ``[Shard(-1),
  Replicate]``, output partial over dimension 1 -> all-reduce -> ``[Replicate, Shard(-1)]``.
  Backward: dX all-reduced over dimension 2.

The bias is added after the forward all-reduce, so it is sharded like the output; with
``skip_bias_add`` (Megatron-LM's name) the linear returns the output without it and the caller
adds ``linear.bias`` in the op that follows (:mod:`validation.ops`). In the
backward pass the dgrad all-reduce is launched asynchronously and the wgrad GEMM runs while it
is in flight (Section 4.2). Weights are plain local tensors; their spec is kept beside them,
and :func:`torch.distributed.tensor.distribute_tensor` cuts a full tensor into the local shard
(``DTensor.from_local(...).full_tensor()`` reassembles one).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Placement, Replicate, Shard, distribute_tensor

from validation.comm import Conjugate, Pending, group_size
from validation.mesh import ATPMesh

COLUMN_FIRST = (Shard(1), Shard(0))
ROW_FIRST = (Shard(0), Shard(1))

Steps = Generator[Pending, None, torch.Tensor]


def run_steps(steps: Steps) -> torch.Tensor:
    """Run a step generator to the end, waiting on each collective as soon as it is launched."""
    try:
        while True:
            next(steps).wait()
    except StopIteration as stop:
        return stop.value


class _ConjugateMatmul(torch.autograd.Function):
    """``X W`` on local shards with both halves of its conjugate operator: forward, the partial
    sums are all-reduced over *forward_group* in place, asynchronously (the caller waits on
    *pending*); backward, dX is all-reduced over *backward_group* while dW is computed.
    A group of ``None`` (a mesh dimension of size 1) means no communication."""

    @staticmethod
    def forward(ctx, x, weight, forward_group, backward_group, pending):  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.group = backward_group
        y = x @ weight
        if forward_group is not None:
            pending.add(dist.all_reduce(y, group=forward_group, async_op=True))
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad_x = work = None
        if ctx.needs_input_grad[0]:
            grad_x = grad @ weight.t()
            if ctx.group is not None:
                work = dist.all_reduce(grad_x, group=ctx.group, async_op=True)
        grad_w = x.reshape(-1, x.shape[-1]).t() @ grad.reshape(-1, grad.shape[-1])
        if work is not None:
            work.wait()
        return grad_x, grad_w, None, None, None


def shard(full: torch.Tensor, mesh: ATPMesh, placements: Sequence[Placement]) -> torch.Tensor:
    """This rank's block of *full* (the same on every rank) under *placements*, no comms."""
    full = full.to(mesh.device())
    dtensor = distribute_tensor(full, mesh.device_mesh, list(placements), src_data_rank=None)
    return dtensor.to_local()


def _local_size(size: int, parts: int, what: str) -> int:
    if size % parts:
        raise ValueError(f"{what} ({size}) must be divisible by the mesh dimension ({parts})")
    return size // parts


class ATPLinear(nn.Module):
    """``Y = X W + b`` with W of shape [*in_features*, *out_features*] sharded by *weight_spec*
    (``COLUMN_FIRST`` or ``ROW_FIRST``) on *mesh*, as in the paper's Figure 9.

    The spec decides the communication: the forward all-reduce runs over the mesh dimension
    that splits the contraction (in) dimension of W, the backward one over the dimension that
    splits the out dimension. *conjugate* overrides that (the numerics test uses it to show
    that the other assignment is wrong)."""

    def __init__(self, in_features: int, out_features: int, mesh: ATPMesh,
                 weight_spec: Sequence[Placement], *, bias: bool = True,
                 conjugate: Conjugate | None = None, dtype: torch.dtype | None = None,
                 skip_bias_add: bool = False):  # fmt: skip
        super().__init__()
        spec = tuple(weight_spec)
        if spec not in (COLUMN_FIRST, ROW_FIRST):
            raise ValueError(
                f"weight_spec {list(spec)} is neither column-first {list(COLUMN_FIRST)} "
                f"nor row-first {list(ROW_FIRST)}"
            )
        k_dim, n_dim = (2, 1) if spec == COLUMN_FIRST else (1, 2)
        self.mesh, self.weight_spec, self.skip_bias_add = mesh, spec, skip_bias_add
        self.conjugate = conjugate or Conjugate("own", forward_dim=k_dim, backward_dim=n_dim)
        k = _local_size(in_features, mesh.size(k_dim), "in_features")
        n = _local_size(out_features, mesh.size(n_dim), "out_features")
        self.bias_spec = (Shard(0), Replicate()) if n_dim == 1 else (Replicate(), Shard(0))
        device = mesh.device()
        self.weight = nn.Parameter(torch.empty(k, n, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.empty(n, dtype=dtype, device=device)) if bias else None
        self.reset_parameters(in_features)

    def reset_parameters(self, in_features: int) -> None:
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    @property
    def specs(self) -> dict[str, tuple[Placement, ...]]:
        """The placement of each parameter, by parameter name."""
        specs = {"weight": self.weight_spec}
        return specs | ({"bias": self.bias_spec} if self.bias is not None else {})

    @torch.no_grad()
    def load_full_(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shards of a full *weight* [in, out] (and *bias*) into the module."""
        self.weight.copy_(shard(weight, self.mesh, self.weight_spec))
        if self.bias is not None and bias is not None:
            self.bias.copy_(shard(bias, self.mesh, self.bias_spec))

    def steps(self, x: torch.Tensor) -> Steps:
        """The forward pass as a step generator: yields while its all-reduce is in flight;
        returns the output, with the bias added unless *skip_bias_add*."""
        groups = [
            self.mesh.group(self.conjugate.forward_dim),
            self.mesh.group(self.conjugate.backward_dim),
        ]
        forward_group, backward_group = (g if group_size(g) > 1 else None for g in groups)
        pending = Pending()
        y = _ConjugateMatmul.apply(x, self.weight, forward_group, backward_group, pending)
        yield pending
        return y if self.bias is None or self.skip_bias_add else y + self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_steps(self.steps(x))
