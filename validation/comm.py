"""Communication operators of the ATP layer as autograd functions (paper Sections 3.2 and 4).

Every forward collective is launched asynchronously and its work handle is added to a
:class:`Pending`; the caller waits on it just before reading the result, so the chunk
scheduler (:func:`validation.layer.interleave`) can compute another chunk meanwhile
(Section 4.1). Backward collectives are synchronous, except the dgrad all-reduce of a linear,
which :mod:`validation.linear` overlaps with the wgrad GEMM (Section 4.2).

Gradient convention: a tensor replicated over a group carries the full gradient on every rank
(Megatron-LM's convention), so an all-reduce that turns partial sums into a replicated value
has an identity backward (it lives in :mod:`validation.linear`, fused with the GEMM), and a
gather has a slicing backward. Groups of one rank cost nothing:
every operator returns its input unchanged there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass
class Pending:
    """Collectives in flight that a chunk must wait for before it reads their outputs."""

    works: list[Any] = field(default_factory=list)

    def add(self, work: Any) -> None:
        if work is not None:
            self.works.append(work)

    def wait(self) -> None:
        """Block until every collective added so far has finished."""
        for work in self.works:
            work.wait()
        self.works.clear()


@dataclass(frozen=True)
class Conjugate:
    """The paper's conjugate operator f_k around one linear: an all-reduce on mesh dimension
    *forward_dim* of the linear's output partial sums in the forward pass, and one on
    *backward_dim* of its input gradient in the backward pass."""

    name: str
    forward_dim: int
    backward_dim: int


# Column-first linears (QKV, FC1) reduce their outputs over dimension 2 and their input
# gradients over dimension 1; row-first ones (attention output, FC2) the reverse. This follows
# the sharding specs of Section 3.2 and Eq. 2 (f1: 3h/(d1 B2), f3: 4h/(d1 B2)); the prose of
# Section 3.2.1 says the opposite for f3, and the numerics test shows that reading is wrong.
F1 = Conjugate("f1", forward_dim=2, backward_dim=1)
F2 = Conjugate("f2", forward_dim=1, backward_dim=2)
F3 = Conjugate("f3", forward_dim=2, backward_dim=1)
F4 = Conjugate("f4", forward_dim=1, backward_dim=2)


def group_size(group: dist.ProcessGroup) -> int:
    return dist.get_world_size(group)


def _all_reduce(tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    tensor = tensor.contiguous().clone()
    dist.all_reduce(tensor, group=group)
    return tensor


class _AllReduceStatistics(torch.autograd.Function):
    """Forward: asynchronous all-reduce (sum). Backward: all-reduce of the gradients, since
    every rank uses the replicated sum on its own shard."""

    @staticmethod
    def forward(ctx, x, group, pending):  # type: ignore[override]
        ctx.group = group
        out = x.contiguous().clone()
        pending.add(dist.all_reduce(out, group=group, async_op=True))
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return _all_reduce(grad, ctx.group), None, None


def reduce_statistics(x: torch.Tensor, group: dist.ProcessGroup, pending: Pending) -> torch.Tensor:
    """Sum of per-rank statistics over *group* (all-reduce forward and backward)."""
    if group_size(group) == 1:
        return x
    return _AllReduceStatistics.apply(x, group, pending)


class _Scatter(torch.autograd.Function):
    """Forward: keep this rank's block of dim 0. Backward: all-gather the blocks' gradients."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[override]
        ctx.group = group
        size, rank = group_size(group), dist.get_rank(group)
        return x.chunk(size, dim=0)[rank].contiguous()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        grad = grad.contiguous()
        out = grad.new_empty((group_size(ctx.group) * grad.shape[0], *grad.shape[1:]))
        all_gather_single(out, grad, group=ctx.group)
        return out, None


class _Gather(torch.autograd.Function):
    """Forward: asynchronous all-gather along dim 0. Backward: this rank's block of dim 0."""

    @staticmethod
    def forward(ctx, x, group, pending):  # type: ignore[override]
        ctx.group = group
        x = x.contiguous()
        out = x.new_empty((group_size(group) * x.shape[0], *x.shape[1:]))
        pending.add(all_gather_single(out, x, group=group, async_op=True))
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        size, rank = group_size(ctx.group), dist.get_rank(ctx.group)
        return grad.chunk(size, dim=0)[rank], None, None


def scatter(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Replicated over *group* -> sharded along dim 0 (no communication forward)."""
    if group_size(group) == 1:
        return x
    return _Scatter.apply(x, group)


def gather(x: torch.Tensor, group: dist.ProcessGroup, pending: Pending) -> torch.Tensor:
    """Sharded along dim 0 over *group* -> replicated (asynchronous all-gather)."""
    if group_size(group) == 1:
        return x
    return _Gather.apply(x, group, pending)
