"""2D / 2.5D tensor parallelism: a transformer layer whose linears are SUMMA products.

SUMMA (van de Geijn and Watts 1995, paper ref [29]) computes ``Y = X W`` on a q x q grid of
ranks (i, j) that each hold one block of X, W and Y: in step t = 0..q-1 the owner of
``X[i, t]`` (rank (i, t)) broadcasts it along grid row i, the owner of ``W[t, j]`` (rank
(t, j)) broadcasts it along grid column j, and every rank adds ``X[i, t] W[t, j]`` to its
``Y[i, j]``. The 2D tensor parallelism the paper compares with (Xu et al. 2021, ref [32]) runs
every linear this way; the 2.5D one (Wang et al. 2022, ref [30]) stacks ``depth`` such grids,
splits the batch over them and replicates W, whose gradient is then all-reduced over depth.
The schedules below are derived from SUMMA itself, not taken from those papers' code.

Sharding, per rank (i, j, l) of :class:`~atpsim.parallel.grid.Grid` (q, d), T = tokens of one
chunk: activations ``[T/(q·d), h/q]`` (rows = samples split over grid rows i and depth l,
columns = hidden split over grid columns j); each linear's weight ``W: [k, n]`` as a block
``[k/q, n/q]``, the same on every depth layer. Attention: grid column j's QKV block holds
whole heads (heads/q of them, their Q, K and V side by side) and grid row i holds whole
samples (b/(q·d)), so the attention core is local: ``b/(q·d) · heads/q`` (sample, head) pairs
per rank, the split the 2D paper uses (batch over rows, heads over columns). So
``b/chunks`` must be a multiple of q·d and ``heads`` of q.

Bytes per linear ``[T, k] x [k, n]`` per rank, B = dtype bytes, X block
``x = T·k·B/(q²·d)``, W block ``w = k·n·B/q²``:

* forward: q steps of a broadcast of x on dimension 2 (rows) and of w on dimension 1
  (columns), then a GEMM ``[T/(q·d), k/q] x [k/q, n/q]``: ``q·(x + w)`` broadcast;
* backward, step t: dgrad ``dX[i, t] = sum_j dY[i, j] W[t, j]^T``: broadcast of w on
  dimension 1, GEMM ``[T/(q·d), n/q] x [n/q, k/q]``, reduce of x on dimension 2 to position t;
  wgrad ``dW[t, j] = sum_i X[i, t]^T dY[i, j]``: broadcast of x on dimension 2, GEMM
  ``[k/q, T/(q·d)] x [T/(q·d), n/q]``, reduce of w on dimension 1 to position t:
  ``q·(x + w)`` broadcast and ``q·(x + w)`` reduced; then, at depth d > 1, an all-reduce of
  the ``w`` gradient on dimension 3.

Per rank a linear's GEMM FLOPs are ``3 · q · 2·(T/(q·d))·(k/q)·(n/q) = 6·T·k·n/(q²·d)``, so
summed over the ``q²·d`` ranks they are the layer's ``6·T·k·n`` (Table 2's total, test).
LayerNorm on ``[T/(q·d), h/q]`` all-reduces its statistics over the grid row (dimension 2),
as ATP's does over its dimension 2; the memory-bound ops are ATP's on the local blocks.

The schedule is the plain one: step t+1's broadcasts wait for step t's GEMM (no lookahead),
and every op of a chunk follows the previous one; chunks overlap as in ATP (Section 4.1).
"""

from __future__ import annotations

from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError
from atpsim.parallel.grid import Grid
from atpsim.parallel.ops import (
    LN_BWD_PASSES,
    LN_FWD_PASSES,
    Issuer,
    Item,
    LayerDims,
    attention_core_backward,
    attention_core_forward,
    chain_items,
    gemm_op,
    layernorm_items,
    memory_op,
    require_gpt_layer,
)
from atpsim.program import CommOp, StepProgram

#: Grid dimensions of :class:`Grid`: columns (i varies), rows (j varies), depth.
COLUMNS, ROWS, DEPTH = 1, 2, 3


def summa_dims(model: ModelConfig, grid: Grid, chunks: int) -> LayerDims:
    """Per-rank sizes on *grid* (``tokens`` = this rank's rows ``T/(q·d)``; d1 = d2 = q so
    ATP's LayerNorm helper all-reduces over the grid rows); raise where the model does not split."""
    q, depth = grid.q, grid.depth
    if chunks < 1 or model.batch % chunks:
        raise AtpsimError(f"chunks ({chunks}) must be >= 1 and divide the batch ({model.batch})")
    samples = model.batch // chunks
    if samples % (q * depth):
        raise AtpsimError(
            f"the batch per chunk ({samples}) must be divisible by q·depth = {q * depth} of {grid}"
        )
    if model.heads % q or model.hidden % q:
        raise AtpsimError(
            f"model.heads ({model.heads}) and model.hidden ({model.hidden}) must be divisible "
            f"by q = {q} of {grid}"
        )
    require_gpt_layer(model, "summa")
    pairs = samples // (q * depth) * (model.heads // q)
    return LayerDims(
        tokens=samples // (q * depth) * model.seq, seq=model.seq, hidden=model.hidden,
        ffn=model.ffn_size, d1=q, d2=q, head_dim=model.head_dim,
        head_share=float(pairs), head_batches=pairs, dtype_bytes=model.dtype_bytes,
        qkv_out=model.qkv_out,
    )  # fmt: skip


def _comm(name: str, collective: str, dim: int, nbytes: float, size: int, root: int = 0) -> list[Item]:
    """The collective as a chain item, or nothing where its groups have one rank."""
    if size == 1:
        return []
    op = CommOp(name, collective, dim, float(nbytes), root)  # type: ignore[arg-type]
    return [(op, "chain")]


def summa_forward(name: str, k: int, n: int, d: LayerDims, grid: Grid) -> list[Item]:
    """``Y = X W`` with ``W: [k, n]``: q steps of two broadcasts and a local GEMM."""
    q, m, b = grid.q, d.tokens, d.dtype_bytes
    items: list[Item] = []
    for t in range(q):
        items += _comm(f"{name}_x{t}", "broadcast", ROWS, m * k // q * b, q, t)
        items += _comm(f"{name}_w{t}", "broadcast", COLUMNS, k // q * n // q * b, q, t)
        items += chain_items(gemm_op(f"{name}_s{t}", m, n // q, k // q, d))
    return items


def summa_backward(name: str, k: int, n: int, d: LayerDims, grid: Grid) -> list[Item]:
    """dgrad and wgrad of ``Y = X W`` step by step (module docstring), then the depth
    all-reduce of the weight gradient."""
    q, m, b = grid.q, d.tokens, d.dtype_bytes
    x_bytes, w_bytes = m * k // q * b, k // q * n // q * b
    items: list[Item] = []
    for t in range(q):
        items += _comm(f"{name}_bwd_w{t}", "broadcast", COLUMNS, w_bytes, q, t)
        items += chain_items(gemm_op(f"{name}_dgrad_s{t}", m, k // q, n // q, d))
        items += _comm(f"{name}_dx{t}", "reduce", ROWS, x_bytes, q, t)
        items += _comm(f"{name}_bwd_x{t}", "broadcast", ROWS, x_bytes, q, t)
        items += chain_items(gemm_op(f"{name}_wgrad_s{t}", k // q, n // q, m, d))
        items += _comm(f"{name}_dw{t}", "reduce", COLUMNS, w_bytes, q, t)
    items += _comm(f"{name}_dw_depth", "all_reduce", DEPTH, w_bytes, grid.depth)
    return items


def summa_forward_layer(d: LayerDims, grid: Grid, layer: int) -> list[Item]:
    """One layer's forward ops for one chunk: ATP's layer with SUMMA linears."""
    p, h, f, b = f"l{layer}.", d.hidden, d.ffn, d.dtype_bytes
    rows = d.tokens
    return [
        *layernorm_items(f"{p}ln1", d, LN_FWD_PASSES),
        *summa_forward(f"{p}qkv", h, 3 * h, d, grid),
        *attention_core_forward(p, d),
        *summa_forward(f"{p}proj", h, h, d, grid),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add", rows * h // grid.q, 3 * b + 1)),
        *layernorm_items(f"{p}ln2", d, LN_FWD_PASSES),
        *summa_forward(f"{p}fc1", h, f, d, grid),
        *chain_items(memory_op(f"{p}fc1_bias_gelu", rows * f // grid.q, 2 * b)),
        *summa_forward(f"{p}fc2", f, h, d, grid),
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add", rows * h // grid.q, 3 * b + 1)),
    ]


def summa_backward_layer(d: LayerDims, grid: Grid, layer: int) -> list[Item]:
    """One layer's backward ops for one chunk, the forward reversed."""
    p, h, f, b = f"l{layer}.", d.hidden, d.ffn, d.dtype_bytes
    rows = d.tokens
    return [
        *chain_items(memory_op(f"{p}fc2_bias_dropout_add_bwd", rows * h // grid.q, 2 * b + 1)),
        *summa_backward(f"{p}fc2", f, h, d, grid),
        *chain_items(memory_op(f"{p}fc1_bias_gelu_bwd", rows * f // grid.q, 3 * b)),
        *summa_backward(f"{p}fc1", h, f, d, grid),
        *layernorm_items(f"{p}ln2_bwd", d, LN_BWD_PASSES),
        *chain_items(memory_op(f"{p}proj_bias_dropout_add_bwd", rows * h // grid.q, 2 * b + 1)),
        *summa_backward(f"{p}proj", h, h, d, grid),
        *attention_core_backward(p, d),
        *summa_backward(f"{p}qkv", h, 3 * h, d, grid),
        *layernorm_items(f"{p}ln1_bwd", d, LN_BWD_PASSES),
    ]


def build_summa_program(model: ModelConfig, q: int, depth: int = 1, chunks: int = 1) -> StepProgram:
    """Forward and backward of *model*'s layers on ``Grid(q, depth)`` (2D SUMMA at depth 1,
    2.5D above), the batch split into *chunks*, as one rank's program (SPMD)."""
    grid = Grid(q, depth)
    dims = summa_dims(model, grid, chunks)
    issuer = Issuer(chunks)
    layers = range(model.layers)
    issuer.issue([i for lay in layers for i in summa_forward_layer(dims, grid, lay)], "fwd")
    issuer.issue([i for lay in reversed(layers) for i in summa_backward_layer(dims, grid, lay)], "bwd")
    return StepProgram(tasks=tuple(issuer.tasks))
