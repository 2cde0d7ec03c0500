"""Time of every memory-bound (non-GEMM) op of the ATP layer, run by the kernel's own code.

``python -m validation.bench.memory_ops --out DIR --world-size 4 --hidden 256 --heads 8
--batch 4 --seq 128 --chunks 1,2 --dropout 0.1`` takes every memory-bound op of atpsim's
program for that layer (:func:`atpsim.parallel.atp.build_step_program`, per rank and per chunk,
on every mesh of the world size) and times, in this process, the function of
:mod:`validation.ops` the kernel runs for it on tensors of the op's per-rank shape:

* a forward op (``ln1``, ``ln1_stats``, ``ln1_apply``, ``attn_softmax``, ``attn_dropout``,
  ``proj_bias_dropout_add``, ``fc1_bias_gelu``, ``fc2_bias_dropout_add``): the function, with
  autograd recording as in training;
* a backward op (the same names with ``_bwd``): ``torch.autograd.grad`` of that function's
  output (graph kept, so each repetition runs only the backward), which includes the bias
  gradient of the bias ops; the LayerNorm backward ops also add the gradient of the other use
  of their input, the residual-gradient add atpsim counts in them.

Each row is a distinct (op, shape); ``uses`` names the (mesh, chunks) that run it. ``elements``,
``bytes_moved`` and ``op_class`` are atpsim's (:func:`atpsim.compute.timing.memory_op_class`),
so ``atpsim validate`` fits each class's bandwidth from this file
(:mod:`atpsim.calibrate.fit.memory`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from atpsim.api import (
    LayerDims,
    ModelConfig,
    build_step_program,
    factorizations,
    layer_dims,
    memory_op_class,
)
from validation import ops
from validation.bench.common import (
    DTYPES,
    add_flush_option,
    add_model_options,
    base_parser,
    init_distributed,
    save,
    timed,
)

log = logging.getLogger("validation.bench")

NAME = "memory_ops"
COLUMNS = (
    "op", "op_class", "shape", "elements", "bytes_moved", "bytes_per_element", "dtype",
    "device", "reps", "time_s", "time_s_mean", "time_s_min", "time_s_max", "time_s_std",
    "run_delay_s_fastest", "run_delay_s_median", "bandwidth_Bps", "uses",
)  # fmt: skip
EPS = 1e-5


@dataclass(frozen=True)
class OpCase:
    """One op to time: its atpsim *name* (no layer prefix), the main tensor's *shape* (whose
    size is the op's element count), *backward*, and atpsim's *bytes_moved*."""

    name: str
    shape: tuple[int, ...]
    backward: bool
    bytes_moved: float

    @property
    def elements(self) -> int:
        return int(torch.Size(self.shape).numel())


def forward_name(name: str) -> str:
    """``"ln2_bwd_apply"`` -> ``"ln_apply"``: the forward op, LayerNorm's number dropped."""
    base = name.replace("_bwd", "")
    return "ln" + base[3:] if base.startswith(("ln1", "ln2")) else base


def op_shape(name: str, d: LayerDims) -> tuple[int, ...]:
    """The per-rank shape of op *name*'s main tensor on one chunk (atpsim's element count)."""
    t, s = d.tokens, d.seq
    kind = forward_name(name)
    if kind.startswith("attn_"):
        return (d.head_batches, s, s)
    return (t, d.ffn // d.d1) if kind == "fc1_bias_gelu" else (t, d.hidden // d.d2)


def layer_cases(
    model: ModelConfig, world_size: int, chunk_counts: list[int]
) -> dict[OpCase, list[str]]:
    """Each distinct memory-bound op of the layer on every mesh and chunk count, with the
    (mesh, chunks) that run it (``"2x2 c1"``)."""
    cases: dict[OpCase, list[str]] = {}
    for mesh in factorizations(world_size):
        for chunks in chunk_counts:
            dims = layer_dims(model, mesh, chunks)
            for op in build_step_program(model, mesh, chunks).compute_ops():
                if op.kind != "memory":
                    continue
                name = op.name.split(".", 1)[-1]
                case = OpCase(name, op_shape(name, dims), "_bwd" in name, op.bytes_moved)
                uses = cases.setdefault(case, [])
                label = f"{mesh.d1}x{mesh.d2} c{chunks}"
                if label not in uses:
                    uses.append(label)
    return cases


Built = tuple[Callable[..., torch.Tensor], list[torch.Tensor]]


@dataclass(frozen=True)
class Inputs:
    """Makes an op's inputs: random tensors of *dtype* on *device* that require gradients."""

    dtype: torch.dtype
    device: torch.device

    def __call__(self, *size: int) -> torch.Tensor:
        return torch.randn(size, dtype=self.dtype, device=self.device).requires_grad_()


def _layernorm(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    return partial(ops.layernorm, eps=EPS), [new(*shape), new(shape[-1]), new(shape[-1])]


def _layernorm_statistics(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    return ops.layernorm_statistics, [new(*shape)]


def _layernorm_apply(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    """The apply pass of a shard of width ``h/d2``, with the statistics all ``d2`` shards
    would sum to if alike."""
    x, width = new(*shape), shape[-1]
    stats = ops.layernorm_statistics(x.detach()) * (args.hidden // width)
    fn = lambda x, st, w, b: ops.layernorm_apply(x, st, args.hidden, EPS, w, b)  # noqa: E731
    return fn, [x, stats.requires_grad_(), new(width), new(width)]


def _softmax(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    mask = ops.causal_mask(shape[-1], new.device, new.dtype)
    scores = (torch.randn(shape, dtype=new.dtype, device=new.device) + mask).requires_grad_()
    return ops.attention_softmax, [scores]


def _dropout(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    probs = torch.softmax(torch.randn(shape, dtype=new.dtype, device=new.device), -1)
    return partial(ops.dropout, p=args.dropout), [probs.requires_grad_()]


def _bias_dropout_add(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    fn = partial(ops.bias_dropout_add, p=args.dropout)
    return fn, [new(*shape), new(shape[-1]), new(*shape)]


def _bias_gelu(shape: tuple[int, ...], new: Inputs, args: Any) -> Built:
    return ops.bias_gelu, [new(*shape), new(shape[-1])]


#: The kernel's function and inputs for each forward op (:func:`forward_name`).
BUILDERS: dict[str, Callable[[tuple[int, ...], Inputs, Any], Built]] = {
    "ln": _layernorm,
    "ln_stats": _layernorm_statistics,
    "ln_apply": _layernorm_apply,
    "attn_softmax": _softmax,
    "attn_dropout": _dropout,
    "proj_bias_dropout_add": _bias_dropout_add,
    "fc2_bias_dropout_add": _bias_dropout_add,
    "fc1_bias_gelu": _bias_gelu,
}


def build(case: OpCase, args: Any, device: torch.device) -> Built:
    """The kernel's function for *case*'s forward op and its inputs."""
    builder = BUILDERS.get(forward_name(case.name))
    if builder is None:
        raise SystemExit(f"memory_ops: no kernel function for atpsim's op {case.name!r}")
    return builder(case.shape, Inputs(DTYPES[args.dtype], device), args)


def timed_call(case: OpCase, args: Any, device: torch.device) -> Callable[[], Any]:
    """What one repetition runs: the forward op, or the backward of a recorded forward
    (plus, for LayerNorm, the add into the gradient of the input's other use)."""
    fn, inputs = build(case, args, device)
    if not case.backward:
        return lambda: fn(*inputs)
    out = fn(*inputs)
    grad = torch.randn_like(out)
    other = torch.randn_like(inputs[0]) if case.name.startswith("ln") else None

    def backward() -> Any:
        grads = torch.autograd.grad(out, inputs, grad, retain_graph=True)
        return grads if other is None else grads[0] + other

    return backward


def measure(case: OpCase, uses: list[str], args: Any, device: torch.device) -> dict[str, Any]:
    """One row: the op's time statistics, atpsim's bytes and the bandwidth they imply."""
    stats = timed(timed_call(case, args, device), device, args, barrier=False)
    return {
        "op": case.name, "op_class": memory_op_class(case.name),
        "shape": "x".join(map(str, case.shape)), "elements": case.elements,
        "bytes_moved": case.bytes_moved, "bytes_per_element": case.bytes_moved / case.elements,
        "dtype": args.dtype, "device": device.type, "reps": args.reps, **stats,
        "bandwidth_Bps": case.bytes_moved / stats["time_s"], "uses": "; ".join(uses),
    }  # fmt: skip


def parser():
    parser = base_parser(__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=4, help="meshes of this many ranks")
    add_model_options(parser)
    add_flush_option(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    model = ModelConfig("bench", args.hidden, args.heads, batch=args.batch, seq=args.seq,
                        dtype=args.dtype, ffn_mult=args.ffn_mult)  # fmt: skip
    device = init_distributed()
    cases = layer_cases(model, args.world_size, args.chunks)
    rows = [measure(case, uses, args, device) for case, uses in sorted(cases.items(), key=_order)]
    save(args.out, NAME, COLUMNS, rows, argv, args.append)
    return 0


def _order(item: tuple[OpCase, list[str]]) -> tuple[str, tuple[int, ...]]:
    return item[0].name, item[0].shape


if __name__ == "__main__":
    sys.exit(main())
