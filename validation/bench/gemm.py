"""GEMM time by (m, n, k, batch) for the shapes the ATP layer produces on each mesh.

``python -m validation.bench.gemm --out DIR --world-size 4 --hidden 256 --heads 8 --batch 4
--seq 128 --chunks 1,2`` takes every GEMM of atpsim's own program for that layer
(:func:`atpsim.parallel.atp.build_step_program`: the linears' forward, dgrad and wgrad GEMMs and
the attention core's batched GEMMs, per rank and per chunk) on every mesh of the world size,
and times each distinct shape once in this process: ``A[batch, m, k] @ B[batch, k, n]``. The
``ops`` column names the (mesh, chunks, op) that use a shape (``2x2 c1 qkv; ...``); extra shapes can be given with
``--shapes``. flops = 2·batch·m·n·k. ``--dtype fp8`` (a GPU with FP8 tensor cores) times the
linears' GEMMs (batch 1) as Transformer Engine runs them (:func:`fp8_product`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from atpsim.api import ModelConfig, build_step_program, factorizations
from validation.bench.common import (
    DTYPES,
    add_flush_option,
    add_model_options,
    base_parser,
    init_distributed,
    save,
    timed,
)

NAME = "gemm"
#: The FP8 dtype (E4M3 operands, bf16 output: :func:`fp8_product`), atpsim's ``fp8``.
FP8 = "fp8"
COLUMNS = (
    "m", "n", "k", "batch", "dtype", "device", "reps", "time_s", "time_s_mean", "time_s_min",
    "time_s_max", "time_s_std", "run_delay_s_fastest", "run_delay_s_median", "flops",
    "flops_per_s", "ops",
)  # fmt: skip
Shape = tuple[int, int, int, int]


def layer_gemms(
    model: ModelConfig, world_size: int, chunk_counts: list[int]
) -> dict[Shape, list[str]]:
    """Each distinct (m, n, k, batch) of the layer's GEMMs on every mesh of *world_size* ranks
    and chunk count, with the ops that use it (``"2x2 c1 qkv"``)."""
    shapes: dict[Shape, list[str]] = {}
    for mesh in factorizations(world_size):
        for chunks in chunk_counts:
            program = build_step_program(model, mesh, chunks)
            for op in program.compute_ops():
                if op.kind != "gemm":
                    continue
                label = f"{mesh.d1}x{mesh.d2} c{chunks} {op.name.removeprefix('l0.')}"
                uses = shapes.setdefault((op.m, op.n, op.k, op.batch), [])
                if label not in uses:
                    uses.append(label)
    return shapes


def parse_shapes(text: str) -> dict[Shape, list[str]]:
    """``"1024,1024,1024;512,64,512,16"`` -> {(m, n, k, batch): ["extra"]} (batch optional)."""
    shapes: dict[Shape, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        numbers = [int(x) for x in part.split(",")]
        if len(numbers) not in (3, 4) or min(numbers) < 1:
            raise SystemExit(f"--shapes: expected m,n,k or m,n,k,batch, got {part!r}")
        shapes[(*numbers[:3], numbers[3] if len(numbers) == 4 else 1)] = ["extra"]  # type: ignore[index]
    return shapes


def measure(shape: Shape, uses: list[str], args: Any, device: torch.device) -> dict[str, Any]:
    """One row: the median time of ``A @ B`` for *shape*."""
    m, n, k, batch = shape
    if args.dtype == FP8:
        product = fp8_product(m, n, k, device)
    else:
        dtype = DTYPES[args.dtype]
        lead = (batch,) if batch > 1 else ()
        a = torch.randn(*lead, m, k, dtype=dtype, device=device)
        b = torch.randn(*lead, k, n, dtype=dtype, device=device)
        product = partial(torch.matmul, a, b)
    stats = timed(product, device, args, barrier=False)
    flops = 2.0 * batch * m * n * k
    return {
        "m": m, "n": n, "k": k, "batch": batch, "dtype": args.dtype, "device": device.type,
        "reps": args.reps, **stats, "flops": flops, "flops_per_s": flops / stats["time_s"],
        "ops": "; ".join(uses),
    }  # fmt: skip


def fp8_product(m: int, n: int, k: int, device: torch.device) -> Callable[[], torch.Tensor]:
    """``A @ B`` in FP8 as Transformer Engine's linears run it: E4M3 operands with per-tensor
    scales, B column-major (cuBLASLt's FP8 layout), bf16 output, split accumulation (TE's
    dgrad and wgrad; its forward GEMM accumulates fast), through ``torch._scaled_mm``."""
    a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device)
    return partial(torch._scaled_mm, a, b, one, one, out_dtype=torch.bfloat16)


def parser():
    parser = base_parser(__doc__.split("\n")[0], (*DTYPES, FP8))
    parser.add_argument("--world-size", type=int, default=4, help="meshes of this many ranks")
    add_model_options(parser)
    add_flush_option(parser)
    parser.add_argument("--shapes", type=parse_shapes, default={}, help="extra m,n,k[,batch];...")
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    if args.dtype == FP8 and not torch.cuda.is_available():
        raise SystemExit("--dtype fp8: FP8 GEMMs need a GPU with FP8 tensor cores (sm_89 or later)")
    model = ModelConfig("bench", args.hidden, args.heads, batch=args.batch, seq=args.seq,
                        dtype=args.dtype, ffn_mult=args.ffn_mult)  # fmt: skip
    device = init_distributed()
    shapes = layer_gemms(model, args.world_size, args.chunks) | args.shapes
    if args.dtype == FP8:  # FP8 runs the linears; the attention core's batched GEMMs stay bf16
        shapes = {shape: uses for shape, uses in shapes.items() if shape[3] == 1}
    rows = [measure(shape, uses, args, device) for shape, uses in sorted(shapes.items())]
    save(args.out, NAME, COLUMNS, rows, argv, args.append)
    return 0


if __name__ == "__main__":
    sys.exit(main())
