"""The ops every tensor-parallel layer plan is built from, and the issuer that orders them.

A layer plan (ATP's mesh, :mod:`atpsim.parallel.atp`; its sequence-parallel variant,
:mod:`atpsim.parallel.sequence`; SUMMA, :mod:`atpsim.parallel.summa`; SageMaker-style TP,
:mod:`atpsim.parallel.sagemaker`; the embedding and LM head, :mod:`atpsim.parallel.head`) lists
one layer's ops for one chunk as *items*: an op and its role in the dependency chain. The
helpers here make those items from a rank's sizes (:class:`LayerDims`), so the schemes share
one definition of a GEMM's FLOPs and bytes, of LayerNorm and of the attention core, and
:class:`Issuer` turns the lists into the tasks of a :class:`~atpsim.program.StepProgram`.

Units: FLOPs are floating-point operations (a multiply-add is 2), bytes are bytes of the model's
dtype (``dtype_bytes`` per element) unless a constant says fp32. Memory-bound ops follow
Megatron-LM's fused kernels (bytes read + written per element, B = dtype bytes, masks 1 byte):
LayerNorm 2B (+B for the statistics pass when the hidden is sharded), scale-mask-softmax 2B,
dropout 2B+1; backward LayerNorm with the residual-gradient add 4B (+2B statistics pass),
softmax 3B, dropout 2B+1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.program import CommOp, ComputeOp, Task


@dataclass(frozen=True)
class After:
    """A role that also waits for earlier ops of the chunk by name (*waits*: ops issued with an
    :class:`After` role themselves): *chained*, the op follows the previous op as ``chain``
    does and becomes the chain's head; else it runs off the chain (it waits for *waits* only,
    or for the head where *waits* is empty, and the chain goes on without it). Ring
    attention's sends and the compute waiting for the block they bring
    (:mod:`atpsim.parallel.context`)."""

    waits: tuple[str, ...] = ()
    chained: bool = True


#: How an op joins its chunk's dependency chain: ``chain`` follows the previous op; a
#: ``dgrad`` does too and marks the gradient it read; a ``wgrad`` depends on that gradient
#: only, so it overlaps the dgrad's collective (ATP paper, Section 4.2); :class:`After` also
#: waits for named ops.
Role = Literal["chain", "dgrad", "wgrad"] | After
Item = tuple[ComputeOp | CommOp, Role]

#: Bytes of the LayerNorm statistics all-reduced per token: mean and variance (or, backward,
#: the two sums the gradient needs) in fp32.
LN_STATS_BYTES_PER_TOKEN = 8
#: LayerNorm's memory passes, bytes per element in dtype bytes (whole, statistics, apply): the
#: forward pass reads and writes each element once (2B; the statistics pass reads it, B); the
#: backward pass with the residual-gradient add moves twice that (module docstring).
LN_FWD_PASSES = (2, 1, 2)
LN_BWD_PASSES = (4, 2, 4)


@dataclass(frozen=True)
class LayerDims:
    """Per-rank sizes of one chunk of one layer on the mesh. *qkv_out* is the fused QKV
    projection's output width (``h + 2·kv_heads·head_dim``, 3h without grouped-query
    attention), *ffn* the MLP's hidden width, *gated* whether the MLP is SwiGLU (its first
    GEMM ``h -> 2·ffn``), *linear_dtype* the dtype of the linear layers' GEMMs where it is not
    the model's compute dtype (``"fp8"``, :attr:`atpsim.compute.models.ModelConfig.linear_dtype`)."""

    tokens: int  # T = (batch / chunks) · seq
    seq: int  # tokens of a sequence on this rank: seq / cp, a ring attention block's length
    hidden: int
    ffn: int
    d1: int
    d2: int
    head_dim: int
    head_share: float  # (batch/chunks) · heads / (d1·d2): this rank's share of (sample, head) pairs
    head_batches: int  # the busiest rank's whole (sample, head) pairs: ceil(head_share)
    dtype_bytes: int
    qkv_out: int
    gated: bool = False
    linear_dtype: str | None = None
    cp: int = 1  # context-parallel ranks a sequence is split over (atpsim.parallel.context)

    @property
    def fc1_out(self) -> int:
        """The MLP's first GEMM's output width: ``2·ffn`` gated (gate and up fused), else ffn."""
        return 2 * self.ffn if self.gated else self.ffn


def gemm_op(
    name: str, m: int, n: int, k: int, dims: LayerDims, batch: int = 1, share: float | None = None,
    dtype: str | None = None,
) -> ComputeOp:
    """A ``[m, k] x [k, n]`` GEMM, *batch* of them: ``2·share·m·n·k`` FLOPs, where *share*
    (default *batch*) is the number of GEMMs whose FLOPs this rank owns (an uneven head split
    runs whole GEMMs but owns a fraction), and the bytes of the three matrices once each;
    *dtype* as :class:`~atpsim.program.ComputeOp`'s (None: the model's compute dtype)."""
    flops = 2.0 * (batch if share is None else share) * m * n * k
    traffic = float(dims.dtype_bytes) * batch * (m * k + k * n + m * n)
    return ComputeOp(name, "gemm", flops=flops, bytes_moved=traffic, m=m, n=n, k=k, batch=batch,
                     dtype=dtype)


def linear_op(name: str, m: int, n: int, k: int, dims: LayerDims) -> ComputeOp:
    """A linear layer's GEMM (forward, dgrad or wgrad): :func:`gemm_op` in the layer's
    *linear_dtype* (FP8 under Transformer Engine; the attention core's GEMMs are not linears)."""
    return gemm_op(name, m, n, k, dims, dtype=dims.linear_dtype)


def mlp_activation_items(name: str, elements: int, d: LayerDims, backward: bool) -> list[Item]:
    """The MLP's activation on *elements* outputs per rank (``[T, ffn/d1]``), Megatron-LM's
    fused kernels: bias-GeLU reads and writes each element (2B; backward 3B: the gradient, the
    input, the input's gradient); SwiGLU (named ``..._swiglu``) reads the gate and up halves
    and writes one (3B; backward reads the gradient and both halves and writes both halves'
    gradients, 5B)."""
    b = d.dtype_bytes
    if d.gated:
        return chain_items(memory_op(f"{name}_swiglu" + ("_bwd" if backward else ""), elements,
                                     (5 if backward else 3) * b))  # fmt: skip
    return chain_items(memory_op(f"{name}_bias_gelu" + ("_bwd" if backward else ""), elements,
                                 (3 if backward else 2) * b))  # fmt: skip


def require_gpt_layer(model: ModelConfig, scheme: str) -> None:
    """Refuse (keyed by the model's key) a Llama-style layer or FP8 on a *scheme* that models
    GPT's layer only: grouped-query attention, SwiGLU and FP8 GEMMs are modelled on ATP meshes
    and Megatron-LM's 1D TP (:mod:`atpsim.parallel.atp`, :mod:`atpsim.parallel.sequence`)."""
    for key, differs in (("kv_heads", model.n_kv_heads != model.heads),
                         ("ffn", model.gated), ("dtype", model.dtype == "fp8")):  # fmt: skip
        if differs:
            raise SimulationError(f"model.{key} {getattr(model, key)!r}: the {scheme} scheme models "
                                  "GPT's layer only (grouped-query attention, SwiGLU and FP8 run "
                                  "on ATP meshes)", key=f"model.{key}")  # fmt: skip


def memory_op(name: str, elements: float, bytes_per_element: float) -> ComputeOp:
    """A memory-bound op that moves *bytes_per_element* bytes (read + written) per element."""
    return ComputeOp(name, "memory", bytes_moved=float(elements) * bytes_per_element)


def mesh_collective(
    name: str, collective: str, dim: int, nbytes: float, dims: LayerDims
) -> list[Item]:
    """The *collective* of *nbytes* bytes per rank on mesh dimension *dim* (1 or 2) as a chain
    item, or nothing when that dimension has size 1 (a group of one rank moves no bytes)."""
    if (dims.d1 if dim == 1 else dims.d2) == 1:
        return []
    return [(CommOp(name, collective, dim, float(nbytes)), "chain")]  # type: ignore[arg-type]


def chain_items(*ops: ComputeOp) -> list[Item]:
    """*ops* as items that each follow the previous op of their chunk."""
    return [(op, "chain") for op in ops]


def layernorm_items(name: str, d: LayerDims, passes: tuple[int, int, int]) -> list[Item]:
    """LayerNorm on this rank's ``[T, h/d2]``, forward or backward: one memory pass when d2 = 1,
    else a statistics pass, the all-reduce of the statistics on dimension 2 and an apply pass;
    *passes* = (whole, statistics, apply) bytes per element, in dtype bytes."""
    elements, b = d.tokens * d.hidden // d.d2, d.dtype_bytes
    whole, stats_pass, apply_pass = passes
    if d.d2 == 1:
        return chain_items(memory_op(name, elements, whole * b))
    stats = d.tokens * LN_STATS_BYTES_PER_TOKEN
    return [
        *chain_items(memory_op(f"{name}_stats", elements, stats_pass * b)),
        *mesh_collective(f"{name}_stats", "all_reduce", 2, stats, d),
        *chain_items(memory_op(f"{name}_apply", elements, apply_pass * b)),
    ]


def attention_core_forward(prefix: str, d: LayerDims) -> list[Item]:
    """Self-attention on this rank's (sample, head) pairs, names prefixed by *prefix*: the
    scores ``Q K^T`` (``[s, hd] x [hd, s]`` per pair), softmax (2B) and dropout (2B+1) on the
    ``s x s`` scores, and the context ``P V`` (``[s, s] x [s, hd]``)."""
    s, hd, hb, b = d.seq, d.head_dim, d.head_batches, d.dtype_bytes
    scores = hb * s * s
    return chain_items(
        gemm_op(f"{prefix}attn_scores", s, s, hd, d, batch=hb, share=d.head_share),
        memory_op(f"{prefix}attn_softmax", scores, 2 * b),
        memory_op(f"{prefix}attn_dropout", scores, 2 * b + 1),
        gemm_op(f"{prefix}attn_context", s, hd, s, d, batch=hb, share=d.head_share),
    )


def attention_core_backward(prefix: str, d: LayerDims) -> list[Item]:
    """The backward of :func:`attention_core_forward`: the context's two gradient GEMMs (to the
    probabilities and to V), dropout (2B+1) and softmax (3B) backward, the scores' two (to Q
    and to K)."""
    s, hd, hb, b = d.seq, d.head_dim, d.head_batches, d.dtype_bytes
    scores = hb * s * s
    return chain_items(
        gemm_op(f"{prefix}attn_context_dgrad_probs", s, s, hd, d, batch=hb, share=d.head_share),
        gemm_op(f"{prefix}attn_context_dgrad_v", s, hd, s, d, batch=hb, share=d.head_share),
        memory_op(f"{prefix}attn_dropout_bwd", scores, 2 * b + 1),
        memory_op(f"{prefix}attn_softmax_bwd", scores, 3 * b),
        gemm_op(f"{prefix}attn_scores_dgrad_q", s, hd, s, d, batch=hb, share=d.head_share),
        gemm_op(f"{prefix}attn_scores_dgrad_k", s, hd, s, d, batch=hb, share=d.head_share),
    )


def _segments(items: Iterable[Item]) -> list[list[Item]]:
    """Split at collectives: a segment ends with a collective and the wgrads issued after it."""
    segments: list[list[Item]] = [[]]
    closed = False
    for op, role in items:
        if closed and role != "wgrad":
            segments.append([])
            closed = False
        segments[-1].append((op, role))
        closed = closed or isinstance(op, CommOp)
    return [s for s in segments if s]


class Issuer:
    """Appends tasks in issue order; each chunk's ops form a dependency chain, and a wgrad
    depends on the gradient its dgrad read (not on the dgrad's collective)."""

    def __init__(self, chunks: int):
        self.tasks: list[Task] = []
        self.head: list[int | None] = [None] * chunks
        self.grad_input: list[int | None] = [None] * chunks
        self.named: list[dict[str, int]] = [{} for _ in range(chunks)]

    def add(self, item: Item, chunk: int, phase: Literal["fwd", "bwd"]) -> None:
        """Append *item* as the next task of *chunk* in *phase*."""
        op, role = item
        if isinstance(role, After):
            self._add_after(op, role, chunk, phase)
            return
        if role == "dgrad":
            self.grad_input[chunk] = self.head[chunk]
        dep = self.grad_input[chunk] if role == "wgrad" else self.head[chunk]
        task_id = len(self.tasks)
        self.tasks.append(Task(task_id, op, chunk, phase, () if dep is None else (dep,)))
        if role != "wgrad":
            self.head[chunk] = task_id

    def _add_after(self, op: ComputeOp | CommOp, role: After, chunk: int, phase: Literal["fwd", "bwd"]) -> None:
        """Append *op* waiting for *role*'s named ops of *chunk* (:class:`After`)."""
        deps = [self.named[chunk][name] for name in role.waits]
        head = self.head[chunk]
        if head is not None and (role.chained or not deps):
            deps.append(head)
        task_id = len(self.tasks)
        self.tasks.append(Task(task_id, op, chunk, phase, tuple(deps)))
        self.named[chunk][op.name] = task_id
        if role.chained:
            self.head[chunk] = task_id

    def finish(self, ops: list[ComputeOp]) -> None:
        """Issue *ops* once, after every chunk's last op (e.g. the optimizer step)."""
        deps = tuple(h for h in self.head if h is not None)
        for op in ops:
            self.tasks.append(Task(len(self.tasks), op, 0, "bwd", deps))

    def issue(self, items: list[Item], phase: Literal["fwd", "bwd"]) -> None:
        """Issue *items* segment by segment, each segment for chunk 0, 1, ... in turn, so the
        compute stream runs chunk i+1's segment while chunk i's collective runs (ATP paper,
        Section 4.1)."""
        for segment in _segments(items):
            for chunk in range(len(self.head)):
                for item in segment:
                    self.add(item, chunk, phase)
