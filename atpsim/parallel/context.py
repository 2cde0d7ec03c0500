"""Context parallelism: a sequence split over ``cp`` ranks, its attention run as ring attention.

Megatron-LM's ``--context-parallel-size`` (Megatron-Core's context-parallel docs,
``context_parallel.html``; the attention is Transformer Engine's ``AttnFuncWithCPAndKVP2P``)
after Liu et al., "Ring Attention with Blockwise Transformers for Near-Infinite Context"
(arXiv:2310.01889):

* **Tokens**: each sequence of ``s`` tokens is cut into ``2·cp`` chunks and CP rank ``c`` holds
  chunks ``c`` and ``2·cp - 1 - c``, so that under a causal mask every rank does the same
  attention work (a load-balanced split; the sequence must divide into ``2·cp`` chunks,
  :func:`check_context`). Every op but the attention core (LayerNorms, the QKV and output
  projections, the MLP, their TP collectives) is token-parallel: it runs on the rank's
  ``s/cp`` tokens and needs no CP communication.
* **Ring attention, forward**: a rank's queries (``s/cp`` tokens) meet every key in ``cp``
  steps. At step ``i`` it holds the K, V block of CP rank ``c - i`` (its own at step 0),
  runs the attention core on that block (:func:`~atpsim.parallel.ops.attention_core_forward`
  on ``s/cp`` queries x ``s/cp`` keys) and meanwhile sends the block on to the next CP rank
  (a point-to-point send of :func:`kv_block_bytes`: a ``sendrecv`` comm op on :data:`CP_DIM`,
  every rank of the context-parallel group sending to the next and receiving from the
  previous at once, :mod:`atpsim.collectives.sendrecv`;
  :meth:`~atpsim.parallel.layout.ParallelLayout.cp_groups`): ``cp - 1`` sends, each started when its block has
  arrived, so a step's compute hides the next block's transfer and only what it does not
  hide is exposed. From step 1 on, the step's output is merged into the running output with
  the softmax statistics (a memory pass of 3B per output element, TE's out correction).
* **Backward**: the K, V blocks go round again (``cp - 1`` sends), each step runs the core's
  backward on the block in hand, adds its dK, dV to the partial sums received from the
  previous rank (3B per element) and sends them on (``cp`` sends of the same size: after the
  last step each block's dK, dV return to their owner, who copies them into the QKV
  gradient, 2B per element, before the QKV backward goes on).

Per step the core is a full ``s/cp x s/cp`` block, as atpsim's attention core counts the full
``s x s`` scores without context parallelism (no causal saving either way), so the
attention's work per rank is exactly ``1/cp`` of the sequence's. Not modelled: the causal
saving of the diagonal and off-diagonal blocks (half of each, alike on every rank, which is
why the split is load-balanced), the softmax statistics' own bytes (fp32 per token and head,
small beside the blocks), and a selective recomputation's second KV round (its compute is
counted, :func:`atpsim.training.passes.selective_recompute_s`).
"""

from __future__ import annotations

from atpsim.errors import SimulationError
from atpsim.parallel.ops import (
    After,
    Item,
    LayerDims,
    attention_core_backward,
    attention_core_forward,
    chain_items,
    memory_op,
)
from atpsim.program import CommOp

#: The collective dimension of a ring attention step's sends in a pass program's comm ops,
#: beyond a DeviceMesh's 1 and 2, a SUMMA grid's depth 3 and expert parallelism's 4: the
#: groups a job's passes run it on are the context-parallel groups
#: (:meth:`~atpsim.parallel.layout.ParallelLayout.cp_groups`), each a ring of sends.
CP_DIM = 5


def check_context(seq: int, cp: int, key: str = "cp") -> None:
    """Refuse (key *key*) a context-parallel size below 1 or one whose ``2·cp`` load-balanced
    chunks do not divide the sequence of *seq* tokens."""
    if cp < 1:
        raise SimulationError(f"expected cp >= 1, got {cp}", key=key)
    if cp > 1 and seq % (2 * cp):
        raise SimulationError(f"model.seq {seq} does not split into 2·cp = {2 * cp} chunks: context "
                              "parallelism gives each rank two chunks of every sequence", key=key)  # fmt: skip


def kv_width(d: LayerDims) -> float:
    """Elements of K and V per token on one rank: ``2·kv_heads·head_dim / (d1·d2)`` (the
    fused QKV output less the queries, over the TP ranks that split the heads)."""
    return (d.qkv_out - d.hidden) / (d.d1 * d.d2)


def kv_block_bytes(d: LayerDims) -> float:
    """Bytes of one ring attention step's send per rank: the K and V of the rank's ``T`` tokens
    of one chunk (``T = b/chunks · s/cp``), ``2 · T · kv_heads·head_dim / (d1·d2) · B``."""
    return d.tokens * kv_width(d) * d.dtype_bytes


def attention_forward(prefix: str, d: LayerDims) -> list[Item]:
    """The attention core's forward: :func:`~atpsim.parallel.ops.attention_core_forward`, or
    with ``d.cp > 1`` its ring (module docstring), names prefixed by *prefix*."""
    if d.cp == 1:
        return attention_core_forward(prefix, d)
    items: list[Item] = []
    out = d.seq * d.head_share * d.head_dim  # the output's elements: s/cp queries of the rank's heads
    for i in range(d.cp):
        if i < d.cp - 1:
            items.append(_send(prefix, "kv", i, d))
        items += _after_block(attention_core_forward(f"{prefix}cp{i}.", d), prefix, i)
        if i > 0:
            items += chain_items(memory_op(f"{prefix}cp{i}.out_correction", out, 3 * d.dtype_bytes))
    return items


def attention_backward(prefix: str, d: LayerDims) -> list[Item]:
    """The attention core's backward: :func:`~atpsim.parallel.ops.attention_core_backward`, or
    with ``d.cp > 1`` its ring (module docstring)."""
    if d.cp == 1:
        return attention_core_backward(prefix, d)
    items: list[Item] = []
    elements, b = d.tokens * kv_width(d), d.dtype_bytes
    for i in range(d.cp):
        if i < d.cp - 1:
            items.append(_send(prefix, "kv", i, d))
        items += _after_block(attention_core_backward(f"{prefix}cp{i}.", d), prefix, i)
        if i > 0:
            items.append((memory_op(f"{prefix}cp{i}.dkv_add", elements, 3 * b), After((f"{prefix}cp{i - 1}.dkv",))))
        items.append(_send(prefix, "dkv", i, d, after_compute=True))
    items.append((memory_op(f"{prefix}cp.dkv_return", elements, 2 * b), After((f"{prefix}cp{d.cp - 1}.dkv",))))
    return items


def _send(prefix: str, what: str, step: int, d: LayerDims, after_compute: bool = False) -> Item:
    """Step *step*'s send of *what* (``kv``: the block in hand, started when it has arrived,
    the first when the chain has made it; ``dkv``: the partial gradients, when the step's
    compute has made them) to the next CP rank, off the chain."""
    op = CommOp(f"{prefix}cp{step}.{what}", "sendrecv", CP_DIM, kv_block_bytes(d))
    waits = () if after_compute or step == 0 else (f"{prefix}cp{step - 1}.{what}",)
    return op, After(waits, chained=False)


def _after_block(items: list[Item], prefix: str, step: int) -> list[Item]:
    """A step's core *items*, its first op also waiting for the block step ``step - 1``'s
    send brought (step 0 computes on the rank's own block)."""
    if step == 0:
        return items
    (op, _), *rest = items
    return [(op, After((f"{prefix}cp{step - 1}.kv",))), *rest]
