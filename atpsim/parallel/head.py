"""The rest of the model around the transformer layers: the token embedding on the first
pipeline stage and the LM head with the loss on the last, as pass programs of one micro-batch.

Megatron-LM's vocabulary-parallel layers (Shoeybi et al., 2019, Section 3), with the
vocabulary of *vocab* tokens split over all ``n = d1·d2`` ranks of the TP mesh:

- **embedding** (forward): each rank looks up its vocabulary shard, a gather of ``[T, h]``;
  the partial embeddings are summed by an all-reduce of ``[T, h]`` on dimension 1 (and on
  dimension 2 for a 2D mesh, before the layer input is split over d2 again). Backward: the
  gradient is scattered into the shard's rows (a memory pass over ``[T, h]``).
- **LM head** (forward): the logits ``[T, V/n] = [T, h] x [h, V/n]`` (the hidden is first
  all-gathered on dimension 2 of a 2D mesh), the softmax cross-entropy over the shard (a
  memory pass over ``[T, V/n]``) with the max and the sum of exponentials all-reduced across
  the TP ranks (two floats per token, on each mesh dimension). Backward: the logits'
  gradient (a memory pass), dgrad ``[T, V/n] x [V/n, h]`` whose partial sums are all-reduced
  over the TP ranks, and wgrad ``[h, T] x [T, V/n]``.

Model FLOPs: the head's GEMMs add ``6·b·s·h·V`` per step (2 forward, 4 backward), Megatron-LM's
``V/(16·l·h)`` term (Narayanan et al., SC'21, Eq. 3). Parameters per rank: ``V·h/n`` on the first
stage and, tied, on the last (the two copies' gradients are all-reduced each step). An untied
head (``tie_embeddings: false``, Llama) is its own ``h x V`` matrix on the last stage: the same
GEMMs and parameters per rank, its gradient reduced over the data-parallel replicas with the
stage's others and no all-reduce between the first and last stage. The head's GEMMs run in
bf16 under FP8 training (Megatron-LM's output layer is not a Transformer Engine linear).
"""

from __future__ import annotations

from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.parallel.atp import layer_dims
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.ops import Issuer, chain_items, gemm_op, memory_op, mesh_collective
from atpsim.program import StepProgram

Part = Literal["embedding", "head"]
#: Per token: the softmax's running max and sum of exponentials, fp32 (bytes).
LOSS_STATS_BYTES_PER_TOKEN = 2 * 4


def head_params_per_rank(vocab: int, model: ModelConfig, mesh: DeviceMesh) -> float:
    """Parameters of one vocabulary shard of the embedding (or the tied LM head): ``V·h/n``."""
    return vocab * model.hidden / mesh.size


def head_flops(vocab: int, model: ModelConfig) -> float:
    """Forward + backward GEMM FLOPs of the LM head over ``model.batch`` samples: 6·b·s·h·V."""
    return 6.0 * model.batch * model.seq * model.hidden * vocab


def build_head_program(vocab: int, model: ModelConfig, mesh: DeviceMesh, part: Part,
                       phase: Literal["fwd", "bwd"]) -> StepProgram:
    """The *part*'s forward or backward for one micro-batch (``model.batch`` samples)."""
    d = layer_dims(model, mesh, 1)
    t, h, b, shard = d.tokens, model.hidden, model.dtype_bytes, vocab // mesh.size
    if part == "embedding" and phase == "fwd":
        items = (chain_items(memory_op("embedding_lookup", t * h, 2 * b))
                 + mesh_collective("embedding_sum", "all_reduce", 1, t * h * b, d)
                 + mesh_collective("embedding_sum_d2", "all_reduce", 2, t * h * b, d))  # fmt: skip
    elif part == "embedding":
        items = chain_items(memory_op("embedding_bwd", t * h, 3 * b))
    elif phase == "fwd":
        stats = t * LOSS_STATS_BYTES_PER_TOKEN
        items = (mesh_collective("head_gather", "all_gather", 2, t * h * b, d)
                 + chain_items(gemm_op("logits", t, shard, h, d),
                               memory_op("cross_entropy", t * shard, 2 * b))
                 + mesh_collective("loss_stats", "all_reduce", 1, stats, d)
                 + mesh_collective("loss_stats_d2", "all_reduce", 2, stats, d))  # fmt: skip
    else:
        items = (chain_items(memory_op("logits_bwd", t * shard, 2 * b),
                             gemm_op("logits_dgrad", t, h, shard, d))
                 + mesh_collective("logits_dgrad_sum", "all_reduce", 1, t * h * b, d)
                 + mesh_collective("logits_dgrad_sum_d2", "reduce_scatter", 2, t * h * b, d)
                 + chain_items(gemm_op("logits_wgrad", h, shard, t, d)))  # fmt: skip
    issuer = Issuer(1)
    issuer.issue(items, phase)
    return StepProgram(tasks=tuple(issuer.tasks))
