"""Device memory per rank of a whole training job: DP x PP x TP, ZeRO, recomputation,
sequence parallelism, and the micro-batches a pipeline schedule keeps in flight.

The busiest rank is a rank of the stage that needs the most (:func:`job_memory_per_stage`):
the first when the layers split evenly, as it holds the most micro-batches' activations (a
1F1B stage ``s`` runs ``p - s`` forwards ahead of its backwards); with an uneven partition
(:mod:`atpsim.parallel.partition`) each stage counts its own layers.

* **Model state** (Rajbhandari et al., ZeRO, SC 2020, Section 3.1): mixed-precision Adam keeps
  2 + 2 bytes of weights and gradients and 12 of fp32 optimizer state per parameter
  (:func:`~atpsim.parallel.memory.optimizer_bytes_per_param`); ZeRO stage 1 (Megatron-LM's
  distributed optimizer) shards the optimizer state over the ``dp`` replicas, stage 2 the
  gradients too, stage 3 the weights too. A stage holds its ``L / p`` layers' (an uneven
  partition: its own count's) parameters of its TP shard (:func:`~atpsim.parallel.atp.params_per_rank`). FP8 training (Transformer Engine) keeps
  an FP8 copy of the weights beside the bf16 ones: 2 + 1 bytes of weights per parameter
  (:attr:`~atpsim.compute.models.ModelConfig.weight_bytes_per_param`). A mixture of experts'
  MoE layers hold the router and ``E/ep`` experts (:mod:`atpsim.parallel.moe`); ZeRO shards
  the experts' state over the ``dp/ep`` replicas that hold the same experts, the rest over
  ``dp`` (Megatron-Core's expert data-parallel group), and an MoE layer keeps its experts'
  activations at capacity in place of the MLP's.
* **Embedding and LM head**: the first stage holds its vocabulary shard of the embedding
  (``V·h/n``); an untied LM head (``tie_embeddings: false``) is a second ``V·h/n`` on the last
  stage, so on the first too when there is one stage (tied, one stage shares one matrix).
* **Activations** per layer and micro-batch are :func:`~atpsim.parallel.memory.activation_terms`
  (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022):
  ``selective`` recomputation drops the attention core's softmax and dropout (Section 5);
  ``full`` keeps only each layer's input ``[T, h/d2]``; sequence parallelism (Section 4.2.2,
  1D TP only: DeviceMesh(t, 1)) shards the LayerNorm and dropout part ``[T, h]`` over ``t``;
  context parallelism (``cp``, :mod:`atpsim.parallel.context`) keeps ``1/cp`` of every term
  (a rank's ``s/cp`` tokens), and ZeRO then shards over the ``dp·cp`` pipelines.
* **In flight**: the peak, over a stage's op order, of forwards run minus backwards run,
  each counting the layers of its model chunk (``L / (p·v)``): on the first stage ``p``
  micro-batches of ``L/p`` layers for 1F1B, ``m`` for GPipe, ``L·(1 + (p-1)/(p·v))`` layers'
  worth interleaved; on stage ``s`` of 1F1B ``p - s`` micro-batches of its ``n_s`` layers.
  With activation offloading (:mod:`atpsim.training.offload`) one model chunk of one
  micro-batch (``n_s / v`` layers), the rest in host memory.

Not counted: the embedding's and the logits' activations, transient buffers, the CUDA context,
fragmentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError, limit_from_env
from atpsim.parallel.atp import layer_dims, params_per_rank
from atpsim.parallel.head import head_params_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.memory import activation_terms, optimizer_bytes_per_param
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import expert_dims, expert_params_per_rank, moe_activation_bytes
from atpsim.parallel.pipeline import PipelineShape, stage_orders

Recompute = Literal["none", "selective", "full"]
RECOMPUTE = ("none", "selective", "full")

#: The most (virtual) stage x micro-batch slots of one iteration, over all replicas, that a
#: job may have unless ATPSIM_MAX_SLOTS says otherwise. The joint network's task graph holds
#: every replica's pipeline, about 3 tasks and 2.6 KB per slot, built and run in about 75 µs
#: a slot (megatron-1.7b, pp 2, global batch 200,000 on the 2-core development machine: 400,000
#: slots, 1.13 GB peak, 30 s): a million slots is some 2.6 GB and a minute or two. The largest
#: committed job (megatron-1t, pp 64, global batch 3072) has 196,608.
DEFAULT_MAX_SLOTS = 1_000_000
MAX_SLOTS_ENV = "ATPSIM_MAX_SLOTS"


def pipeline_slots(pp: int, virtual_stages: int, global_batch: int, micro_batch: int) -> int:
    """Stage x micro-batch slots of one iteration over every replica: ``p·v·B/b``."""
    return pp * virtual_stages * (global_batch // max(micro_batch, 1))


def check_slots(pp: int, virtual_stages: int, global_batch: int, micro_batch: int) -> str | None:
    """Why a job of these sizes is too large to simulate (one sentence naming global_batch, the
    count, the limit and ``ATPSIM_MAX_SLOTS``), or None."""
    slots, limit = pipeline_slots(pp, virtual_stages, global_batch, micro_batch), max_slots()
    if slots <= limit:
        return None
    return (f"global batch {global_batch:,} in micro-batches of {micro_batch} over {pp} stages"
            + (f" x {virtual_stages} virtual" if virtual_stages > 1 else "")
            + f" is {slots:,} stage x micro-batch slots, more than the {limit:,} a job may have "
            f"(about 2.6 KB and 75 µs each): give a smaller global_batch or set "
            f"{MAX_SLOTS_ENV}={slots}")  # fmt: skip


def max_slots() -> int:
    """The slot limit: ``ATPSIM_MAX_SLOTS`` if set (an integer >= 1), else DEFAULT_MAX_SLOTS."""
    return limit_from_env(MAX_SLOTS_ENV, DEFAULT_MAX_SLOTS)


@dataclass(frozen=True)
class JobMemory:
    """Bytes one rank of pipeline stage *stage* (the busiest, where one is asked for) needs."""

    params_per_rank: float
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    layers_in_flight: float
    stage: int = 0

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes


def job_memory_per_rank(
    model: ModelConfig,
    layout: ParallelLayout,
    *,
    micro_batch: int,
    n_microbatches: int,
    schedule: str = "1f1b",
    virtual_stages: int = 1,
    zero: int = 0,
    recompute: Recompute = "none",
    sequence_parallel: bool = False,
    vocab: int = 0,
    stage_layers: Sequence[int] | None = None,
    offload: bool = False,
) -> JobMemory:
    """Memory of the busiest rank when *model* (``model.layers`` in all) trains on *layout*
    with micro-batches of *micro_batch* samples, *n_microbatches* per step and pipeline;
    with a *vocab*, the first stage also holds its shard of the embedding (``V·h/n``), and the
    last of the LM head (tied: a copy; on one stage, an untied head only). *stage_layers*:
    each stage's layers (default: ``L / p`` each, the layers a divisor of the stages). The
    stage that needs the most; the first on a tie (:func:`job_memory_per_stage`). With
    *offload* (activation offloading, :mod:`atpsim.training.offload`) a rank keeps one model
    chunk's activations of one micro-batch, the others on the host."""
    stages = job_memory_per_stage(model, layout, micro_batch=micro_batch, n_microbatches=n_microbatches,
                                  schedule=schedule, virtual_stages=virtual_stages, zero=zero,
                                  recompute=recompute, sequence_parallel=sequence_parallel,
                                  vocab=vocab, stage_layers=stage_layers, offload=offload)  # fmt: skip
    return max(stages, key=lambda m: m.total_bytes)


def job_memory_per_stage(
    model: ModelConfig,
    layout: ParallelLayout,
    *,
    micro_batch: int,
    n_microbatches: int,
    schedule: str = "1f1b",
    virtual_stages: int = 1,
    zero: int = 0,
    recompute: Recompute = "none",
    sequence_parallel: bool = False,
    vocab: int = 0,
    stage_layers: Sequence[int] | None = None,
    offload: bool = False,
) -> tuple[JobMemory, ...]:
    """The memory of one rank of each pipeline stage (:func:`job_memory_per_rank`'s
    arguments): its layers' parameters and the ends it holds, and its micro-batches in
    flight, each of its ``n_s / v`` layers' activations."""
    mesh = _mesh(layout, sequence_parallel)
    if stage_layers is None:
        if model.layers % (layout.pp * virtual_stages):
            raise SimulationError(f"{model.layers} layers do not split into {layout.pp} stages x "
                                  f"{virtual_stages} virtual stages", key="pp")  # fmt: skip
        stage_layers = (model.layers // layout.pp,) * layout.pp
    if zero not in (0, 1, 2, 3):
        raise SimulationError(f"expected zero 0, 1, 2 or 3, got {zero}", key="zero")
    shape = PipelineShape(layout.pp, n_microbatches, virtual_stages)
    per_layer = activation_bytes_per_microbatch(replace(model, batch=micro_batch), mesh,
                                                recompute, sequence_parallel, layout.ep, layout.cp)  # fmt: skip
    out = []
    for stage, layers in enumerate(stage_layers):
        held = replace(model, layers=layers) if layers else None  # a stage may hold none
        params = params_per_rank(held, mesh, layout.ep) if held else 0.0
        params += _ends_held(stage, layout.pp, model.tie_embeddings) * head_params_per_rank(vocab, model, mesh)
        chunks = microbatches_in_flight(shape, schedule, stage)
        in_flight = (min(chunks, 1) if offload else chunks) * (layers / virtual_stages)
        experts = expert_params_per_rank(held, mesh.d1, mesh.d2, layout.ep) if held else 0.0
        shards = _Shards(layout.replicas, experts, layout.ep)
        out.append(_memory(model, params, shards, zero, in_flight, per_layer, stage))
    return tuple(out)


@dataclass(frozen=True)
class _Shards:
    """How ZeRO shards a rank's parameters: over the *dp* replicas (with context parallelism
    the ``dp·cp`` pipelines, as Megatron-Core's distributed optimizer shards over its
    data-and-context-parallel group), the *expert* parameters among them over the ``dp/ep``
    replicas that hold the same experts."""

    dp: int
    expert: float = 0.0
    ep: int = 1

    def bytes(self, params: float, per_param: float, sharded: bool) -> float:
        """Bytes of *params* at *per_param* bytes each, over their replicas where *sharded*."""
        if not sharded:
            return params * per_param
        if not self.expert:
            return params * per_param / self.dp
        return (params - self.expert) * per_param / self.dp + self.expert * per_param / (self.dp // self.ep)


def _ends_held(stage: int, pp: int, tied: bool) -> int:
    """Vocabulary shards *stage* holds: the embedding on the first stage and the LM head on
    the last (tied, a copy of the embedding's weights; on one stage the tied head is the
    embedding itself)."""
    return (stage == 0) + (stage == pp - 1 and (pp > 1 or not tied))


def _memory(model: ModelConfig, params: float, shard: _Shards, zero: int, in_flight: float,
            per_layer: float, stage: int) -> JobMemory:
    """One rank's bytes: *params* of weights, gradients and Adam state (ZeRO sharding them
    over *shard*'s replicas) and *in_flight* layers' activations of *per_layer* bytes each."""
    return JobMemory(
        params_per_rank=params,
        weights_bytes=shard.bytes(params, model.weight_bytes_per_param, zero >= 3),
        gradients_bytes=shard.bytes(params, model.dtype_bytes, zero >= 2),
        optimizer_bytes=shard.bytes(params, optimizer_bytes_per_param(model.dtype_bytes), zero >= 1),
        activations_bytes=in_flight * per_layer,
        layers_in_flight=in_flight,
        stage=stage,
    )


def activation_bytes_per_microbatch(
    model: ModelConfig, mesh: DeviceMesh, recompute: Recompute, sequence_parallel: bool, ep: int = 1,
    cp: int = 1,
) -> float:
    """Bytes one layer keeps for one micro-batch (``model.batch`` samples) on one rank; for a
    mixture of experts the mean over a chunk's layers, one in ``moe_every`` keeping the MoE
    MLP's activations (:func:`~atpsim.parallel.moe.moe_activation_bytes`, its experts split
    over *ep* replicas) in place of the dense MLP's. With *cp* context-parallel ranks, a
    ``1/cp`` of it: every term is the rank's ``s/cp`` tokens' (the attention's ``s x s``
    scores too: its ``s/cp`` queries against all ``s`` keys, :mod:`atpsim.parallel.context`)."""
    return _activation_bytes(model, mesh, recompute, sequence_parallel, ep) / cp


def _activation_bytes(model: ModelConfig, mesh: DeviceMesh, recompute: Recompute, sequence_parallel: bool,
                      ep: int) -> float:
    """:func:`activation_bytes_per_microbatch` of a whole sequence per rank."""
    if recompute not in RECOMPUTE:
        raise SimulationError(f"expected recompute one of {list(RECOMPUTE)}, got {recompute!r}",
                              key="recompute")  # fmt: skip
    dims = layer_dims(model, mesh, 1)
    split = mesh.d1 if sequence_parallel else 1
    if recompute == "full":
        return dims.tokens * dims.hidden / dims.d2 * dims.dtype_bytes / split
    terms = activation_terms(dims)
    terms["hidden_sharded"] /= split
    terms["ln_stats"] /= split
    if recompute == "selective":
        terms["attention"] = 0.0
    experts = expert_dims(model, dims, ep, sequence_parallel)
    if experts is None:
        return sum(terms.values())
    moe = moe_activation_bytes(dims, experts) - terms["mlp"]
    return sum(terms.values()) + moe / model.moe_every


def layers_in_flight(n_layers: int, shape: PipelineShape, schedule: str) -> float:
    """Peak layers' worth of micro-batch activations the first stage holds: forwards run
    minus backwards run, each weighted by its chunk's ``L / (p·v)`` layers."""
    return microbatches_in_flight(shape, schedule, 0) * (n_layers / shape.n_virtual_stages)


def microbatches_in_flight(shape: PipelineShape, schedule: str, stage: int) -> int:
    """Peak model chunks' activations *stage* holds at once: over its op order, forwards
    run minus backwards run."""
    held = peak = 0
    for op in stage_orders(schedule, shape)[stage]:
        held += 1 if op.kind == "F" else -1
        peak = max(peak, held)
    return peak


def _mesh(layout: ParallelLayout, sequence_parallel: bool) -> DeviceMesh:
    if not isinstance(layout.tp, DeviceMesh):
        raise SimulationError("job memory is defined for ATP meshes (SUMMA grids: not yet)",
                              key="tp")  # fmt: skip
    if sequence_parallel and layout.tp.d2 != 1:
        raise SimulationError(f"sequence parallelism is Megatron-LM's, for 1D TP (DeviceMesh(t, 1)),"
                              f" not {layout.tp}", key="sequence_parallel")  # fmt: skip
    return layout.tp
