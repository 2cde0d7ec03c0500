"""A mixture-of-experts layer's MLP on a TP mesh with expert parallelism, as one rank's ops.

The layer (GShard, Lepikhin et al. 2020; Switch Transformer, Fedus et al. 2021; Megatron-Core's
``MoELayer`` with the all-to-all token dispatcher): a router scores every token against the
``E`` experts (``[T, h] x [h, E]``), each token goes to its ``top_k`` best, the tokens travel to
the ranks holding their experts (**dispatch**, an all-to-all over the expert-parallel group),
each rank runs its ``E/ep`` experts' MLPs, and the outputs travel back (**combine**, a second
all-to-all) to be summed with the router's weights. Backward mirrors it: the combine's
gradient is an all-to-all, the experts' backward, the dispatch's gradient an all-to-all.

Sizes per rank, for the T tokens of one chunk (``b·s/chunks``) on DeviceMesh(d1, d2), the
activations ``[T, h/d2]`` replicated over dimension 1:

* **routing share**: the d1 ranks that hold the same ``[T, h/d2]`` route ``T/d1`` tokens each
  (a local slice; with sequence parallelism on 1D TP the rank's own ``T/t`` tokens, as
  Megatron-Core's dispatcher takes them). Router GEMM ``[T/d1, h/d2] x [h/d2, E]``, its partial
  sums all-reduced on dimension 2 where d2 > 1.
* **dispatch / combine**: an all-to-all over the expert-parallel group (ranks of the same TP
  position in ``ep`` replicas, :meth:`~atpsim.parallel.layout.ParallelLayout.ep_groups`;
  collective dimension :data:`EP_DIM`) of ``top_k·(T/d1)·(h/d2)`` elements per rank, each
  rank's whole send buffer in nccl-tests' convention: the routed copies of its tokens. NCCL's
  all-to-all sends equal parts; the imbalance is charged to the experts (below).
* **experts**: ``E/ep`` experts per rank, each at its capacity ``C = ceil(capacity_factor ·
  top_k · ep·T / E)`` tokens (GShard's expert capacity over the ``ep·T`` tokens its group
  routes; the busiest expert is that full and the others wait for it). The tokens are
  all-gathered on dimension 1 (each of the d1 ranks routed a different slice), the experts'
  MLPs run as one grouped GEMM per linear with TP inside each expert exactly as the dense MLP
  (FC1 ``[C, h/d2] x [h/d2, fc1/d1]`` with its dimension-2 all-reduce, the activation, FC2
  ``[C, ffn/d1] x [ffn/d1, h/d2]``), and FC2's partial sums are reduce-scattered on dimension
  1 back to each rank's share (Megatron-Core's expert tensor parallelism with sequence
  parallelism: all-gather before the experts, reduce-scatter after).
* **output**: without sequence parallelism the next layer needs ``[T, h/d2]`` on every rank
  of dimension 1: an all-gather on dimension 1 after the combine (backward: the gradient is
  replicated, so its slice is local, and the input's gradient, one slice per rank, is
  all-gathered). With sequence parallelism the output is the rank's ``T/t`` tokens already.
* **memory-bound ops**: the router's softmax and top-k over ``[T/d1, E]`` (2B; backward 3B),
  the permutation of the routed copies before the dispatch and the weighted un-permutation
  after the combine (2B each per element of ``[top_k·T/d1, h/d2]``), the experts' activation
  as the dense MLP's (:func:`~atpsim.parallel.ops.mlp_activation_items`).

Megatron-Core requires sequence parallelism with TP and EP together; atpsim also runs 1D TP
without it and ATP's 2D meshes through the same slice-and-gather. With ``ep`` = 1 there is no
all-to-all (every expert is on every rank), the rest is unchanged. Not modelled: token dropping's
effect on the loss, auxiliary load-balancing losses, shared experts, expert biases' absence
(counted as Megatron-LM's default ``add_bias_linear``), the router's fp32 logits (timed in the
model's dtype).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.ops import (
    Item,
    LayerDims,
    chain_items,
    gemm_op,
    memory_op,
    mesh_collective,
    mlp_activation_items,
)
from atpsim.program import CommOp, ComputeOp

#: The collective dimension of the expert-parallel group in a pass program's comm ops, beyond
#: a DeviceMesh's 1 and 2 and a SUMMA grid's depth 3: the groups a job's passes run it on are
#: :meth:`~atpsim.parallel.layout.ParallelLayout.ep_groups`.
EP_DIM = 4


@dataclass(frozen=True)
class ExpertDims:
    """Per-rank sizes of one MoE layer's experts for one chunk (module docstring): *experts*
    in all, *top_k*, *ep* ranks sharing them, each expert's *ffn* width and *gated*, its
    *capacity* in tokens, *every* (the MoE layers' period) and whether the layer runs with
    *sequence_parallel*."""

    experts: int
    top_k: int
    ep: int
    ffn: int
    gated: bool
    capacity: int
    every: int = 1
    sequence_parallel: bool = False

    @property
    def local_experts(self) -> int:
        """Experts one rank holds: ``E/ep``."""
        return self.experts // self.ep

    @property
    def tokens(self) -> int:
        """Tokens one rank's experts process, all at capacity: ``E/ep · C``."""
        return self.local_experts * self.capacity

    @property
    def fc1_out(self) -> int:
        return 2 * self.ffn if self.gated else self.ffn

    def holds(self, layer: int) -> bool:
        """Whether layer *layer* of a chunk is an MoE layer (layers 0, k, 2k, ...)."""
        return layer % self.every == 0


def check_experts(model: ModelConfig, ep: int) -> None:
    """Refuse (key ``ep``) expert parallelism on a dense model and an *ep* that does not
    divide the experts."""
    if ep > 1 and not model.is_moe:
        raise SimulationError(f"{ep} expert-parallel replicas for model {model.name!r}, which is "
                              "dense (model.experts = 0): expert parallelism needs a mixture of "
                              "experts", key="ep")  # fmt: skip
    if model.is_moe and model.experts % ep:
        raise SimulationError(f"{ep} expert-parallel replicas do not divide the {model.experts} "
                              f"experts of model {model.name!r}", key="ep")  # fmt: skip


def expert_capacity(model: ModelConfig, tokens: int, ep: int) -> int:
    """GShard's expert capacity for *tokens* per replica and *ep* replicas routing together:
    ``ceil(capacity_factor · top_k · ep·tokens / experts)`` tokens."""
    fair = model.router_top_k * ep * tokens / model.experts
    return max(1, math.ceil(model.capacity_factor * fair - 1e-9))


def expert_dims(model: ModelConfig, dims: LayerDims, ep: int, sequence_parallel: bool = False
                ) -> ExpertDims | None:
    """The experts of *model*'s MoE layers for a rank of *dims* in a group of *ep* (None for a
    dense model), checked: *ep* divides the experts, d1 the expert width and the tokens."""
    if not model.is_moe:
        check_experts(model, ep)
        return None
    check_experts(model, ep)
    if model.expert_ffn_size % dims.d1:
        raise SimulationError(f"model.expert_ffn_hidden ({model.expert_ffn_size}) is not divisible "
                              f"by d1 = {dims.d1}", key="tp")  # fmt: skip
    if dims.tokens % dims.d1:
        raise SimulationError(f"{dims.tokens} tokens do not split over d1 = {dims.d1} ranks for "
                              "routing", key="tp")  # fmt: skip
    return ExpertDims(model.experts, model.router_top_k, ep, model.expert_ffn_size, model.gated,
                      expert_capacity(model, dims.tokens, ep), model.moe_every, sequence_parallel)


def ep_collective(name: str, nbytes: float, e: ExpertDims) -> list[Item]:
    """The all-to-all of *nbytes* per rank over the expert-parallel group, or nothing at ep 1."""
    if e.ep == 1:
        return []
    return [(CommOp(name, "all_to_all", EP_DIM, float(nbytes)), "chain")]


def dispatch_bytes(d: LayerDims, e: ExpertDims) -> float:
    """Bytes each rank sends in one dispatch (or combine): ``top_k·(T/d1)·(h/d2)`` elements."""
    return e.top_k * (d.tokens // d.d1) * (d.hidden // d.d2) * d.dtype_bytes


def _grouped(name: str, m: int, n: int, k: int, d: LayerDims, e: ExpertDims) -> ComputeOp:
    """The rank's experts' ``[m, k] x [k, n]`` GEMMs as one grouped GEMM (a linear's dtype)."""
    return gemm_op(name, m, n, k, d, batch=e.local_experts, dtype=d.linear_dtype)


def moe_forward_items(d: LayerDims, e: ExpertDims, prefix: str) -> list[Item]:
    """The MoE layer's MLP forward for one chunk, in order (module docstring), from the second
    LayerNorm's output to the input of the bias-dropout-add."""
    p, b, h2 = f"{prefix}moe_", d.dtype_bytes, d.hidden // d.d2
    share, c, n = d.tokens // d.d1, e.capacity, e.tokens
    routed, f1, f = e.top_k * share, e.fc1_out // d.d1, e.ffn // d.d1
    gathered = [] if e.sequence_parallel else mesh_collective(f"{p}output_gather", "all_gather", 1,
                                                              d.tokens * h2 * b, d)  # fmt: skip
    return [
        *chain_items(gemm_op(f"{p}router", share, e.experts, h2, d)),
        *mesh_collective(f"{p}router_sum", "all_reduce", 2, share * e.experts * b, d),
        *chain_items(memory_op(f"{p}route", share * e.experts, 2 * b),
                     memory_op(f"{p}permute", routed * h2, 2 * b)),
        *ep_collective(f"{p}dispatch", dispatch_bytes(d, e), e),
        *mesh_collective(f"{p}expert_gather", "all_gather", 1, n * h2 * b, d),
        *chain_items(_grouped(f"{p}expert_fc1", c, f1, h2, d, e)),
        *mesh_collective(f"{p}expert_f3", "all_reduce", 2, n * f1 * b, d),
        *mlp_activation_items(f"{p}expert_fc1", n * f, d, backward=False),
        *chain_items(_grouped(f"{p}expert_fc2", c, h2, f, d, e)),
        *mesh_collective(f"{p}expert_scatter", "reduce_scatter", 1, n * h2 * b, d),
        *ep_collective(f"{p}combine", dispatch_bytes(d, e), e),
        *chain_items(memory_op(f"{p}unpermute", routed * h2, 2 * b)),
        *gathered,
    ]


def _grouped_bwd(name: str, conjugate: str, collective: str, dim: int, m: int, k: int, n: int,
                 d: LayerDims, e: ExpertDims) -> list[Item]:
    """A grouped linear's backward: dgrad ``[m, n] x [n, k]``, the *collective* of its output
    (every local expert's) on mesh dimension *dim*, then wgrad ``[k, m] x [m, n]``."""
    return [
        (_grouped(f"{name}_dgrad", m, k, n, d, e), "dgrad"),
        *mesh_collective(conjugate, collective, dim, e.local_experts * m * k * d.dtype_bytes, d),
        (_grouped(f"{name}_wgrad", k, n, m, d, e), "wgrad"),
    ]


def moe_backward_items(d: LayerDims, e: ExpertDims, prefix: str) -> list[Item]:
    """The backward of :func:`moe_forward_items`, in order."""
    p, b, h2 = f"{prefix}moe_", d.dtype_bytes, d.hidden // d.d2
    share, c, n = d.tokens // d.d1, e.capacity, e.tokens
    routed, f1, f = e.top_k * share, e.fc1_out // d.d1, e.ffn // d.d1
    gathered = [] if e.sequence_parallel else mesh_collective(f"{p}input_gather_bwd", "all_gather", 1,
                                                              d.tokens * h2 * b, d)  # fmt: skip
    return [
        *chain_items(memory_op(f"{p}unpermute_bwd", routed * h2, 2 * b)),
        *ep_collective(f"{p}combine_bwd", dispatch_bytes(d, e), e),
        *mesh_collective(f"{p}expert_scatter_bwd", "all_gather", 1, n * h2 * b, d),
        *_grouped_bwd(f"{p}expert_fc2", f"{p}expert_f4_bwd", "all_reduce", 2, c, f, h2, d, e),
        *mlp_activation_items(f"{p}expert_fc1", n * f, d, backward=True),
        *_grouped_bwd(f"{p}expert_fc1", f"{p}expert_gather_bwd", "reduce_scatter", 1, c, h2, f1, d, e),
        *ep_collective(f"{p}dispatch_bwd", dispatch_bytes(d, e), e),
        *chain_items(memory_op(f"{p}permute_bwd", routed * h2, 2 * b),
                     memory_op(f"{p}route_bwd", share * e.experts, 3 * b)),
        (gemm_op(f"{p}router_dgrad", share, h2, e.experts, d), "dgrad"),
        (gemm_op(f"{p}router_wgrad", h2, e.experts, share, d), "wgrad"),
        *gathered,
    ]


def expert_params_per_rank(model: ModelConfig, d1: int, d2: int, ep: int) -> float:
    """Parameters of the experts one rank of DeviceMesh(d1, d2) holds in *model*'s MoE layers:
    ``E/ep`` experts each, their weights over ``d1·d2``, FC1's bias over d1 and FC2's over d2
    (Megatron-LM's default ``add_bias_linear``). Their gradients are reduced over the ``dp/ep``
    replicas holding the same experts."""
    if not model.is_moe:
        return 0.0
    expert = model.expert_weights() / (d1 * d2) + model.expert_fc1_out / d1 + model.hidden / d2
    return model.moe_layers * (model.experts // ep) * expert


def router_params_per_rank(model: ModelConfig, d2: int) -> float:
    """The routers' weights one rank holds: ``h·E`` per MoE layer, split over d2 (each rank
    scores its ``h/d2`` slice); reduced over every data-parallel replica, as dense weights."""
    return model.moe_layers * model.hidden * model.experts / d2


def moe_activation_bytes(d: LayerDims, e: ExpertDims) -> float:
    """Bytes an MoE layer's MLP keeps for backward on one rank for one chunk, in place of the
    dense MLP's ``[T, fc1 + ffn]/d1``: the router's probabilities ``[T/d1, E]``, the experts'
    gathered input ``[E/ep·C, h/d2]`` and activation input and output ``[E/ep·C, fc1 + ffn]/d1``
    (at capacity), and the combined copies ``[top_k·T/d1, h/d2]`` the un-permutation weighs."""
    share, h2 = d.tokens // d.d1, d.hidden // d.d2
    n = e.tokens
    elements = share * e.experts + n * h2 + n * (e.fc1_out + e.ffn) / d.d1 + e.top_k * share * h2
    return d.dtype_bytes * elements
