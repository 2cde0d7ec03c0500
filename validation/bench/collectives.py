"""Collective time by message size on each mesh dimension's groups, all groups at once.

``torchrun --nproc-per-node N -m validation.bench.collectives --out DIR`` times all-reduce
(and all-gather) on every mesh of N ranks and each dimension of size > 1: all d2 groups of
dimension 1 (or d1 groups of dimension 2) run together, as in training. *bytes* is each rank's
buffer in the nccl-tests convention (the all-reduced buffer; an all-gather's full output);
algbw = bytes / time, busbw = algbw · 2(n-1)/n for all-reduce and (n-1)/n for all-gather.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch
import torch.distributed as dist

from atpsim.api import bus_factor
from validation.bench.common import (
    DTYPES,
    base_parser,
    init_distributed,
    mesh_list,
    parse_bytes,
    save,
    timed,
)
from validation.comm import all_gather_single
from validation.mesh import ATPMesh, init_mesh, mesh_shapes

NAME = "collectives"
COLUMNS = (
    "op", "dim", "d1", "d2", "group_size", "n_groups", "bytes", "dtype", "backend", "reps",
    "time_s", "time_s_mean", "time_s_min", "time_s_max", "time_s_std", "run_delay_s_fastest",
    "run_delay_s_median", "algbw_Bps", "busbw_Bps",
)  # fmt: skip

#: The collectives this benchmark times (each has nccl-tests' bus factor in atpsim).
OPS = ("all_reduce", "all_gather")


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min_bytes, min_bytes·factor, ... up to max_bytes."""
    out = [min_bytes]
    while out[-1] * factor <= max_bytes:
        out.append(out[-1] * factor)
    return out


def _collective(
    op: str, nbytes: int, dtype: torch.dtype, group: dist.ProcessGroup, device: torch.device
):
    n, item = dist.get_world_size(group), torch.tensor([], dtype=dtype).element_size()
    numel = max(n, nbytes // item) // n * n
    if op == "all_reduce":
        buffer = torch.ones(numel, dtype=dtype, device=device)
        return numel * item, lambda: dist.all_reduce(buffer, group=group)
    part, out = (
        torch.ones(numel // n, dtype=dtype, device=device),
        torch.empty(numel, dtype=dtype, device=device),
    )
    return numel * item, lambda: all_gather_single(out, part, group=group)


def measure(
    mesh: ATPMesh, dim: int, op: str, nbytes: int, args: Any, device: torch.device
) -> dict[str, Any]:
    """One row: *op* of *nbytes* on every group of mesh dimension *dim* at once."""
    group, n = mesh.group(dim), mesh.size(dim)
    actual, fn = _collective(op, nbytes, DTYPES[args.dtype], group, device)
    stats = timed(fn, device, args)
    algbw = actual / stats["time_s"]
    return {
        "op": op, "dim": dim, "d1": mesh.d1, "d2": mesh.d2, "group_size": n,
        "n_groups": dist.get_world_size() // n, "bytes": actual, "dtype": args.dtype,
        "backend": dist.get_backend(), "reps": args.reps, **stats, "algbw_Bps": algbw,
        "busbw_Bps": algbw * bus_factor(op, n),
    }  # fmt: skip


def run(args: Any, device: torch.device) -> list[dict[str, Any]]:
    """Every (mesh, dimension of size > 1, op, size) row."""
    rows = []
    for d1, d2 in args.meshes or mesh_shapes(dist.get_world_size()):
        mesh = init_mesh(d1, d2, device.type)
        for dim in (d for d in (1, 2) if mesh.size(d) > 1):
            for op in args.ops:
                for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor):
                    rows.append(measure(mesh, dim, op, nbytes, args, device))
    return rows


def parser():
    parser = base_parser(__doc__.split("\n")[0])
    parser.add_argument("--ops", type=lambda t: t.split(","), default=["all_reduce", "all_gather"],
                        help="comma-separated: all_reduce, all_gather")  # fmt: skip
    parser.add_argument(
        "--meshes", type=mesh_list, default=None, help="e.g. 4x1,2x2 (default: all)"
    )
    parser.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("1K"))
    parser.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("16M"))
    parser.add_argument("--factor", type=int, default=4, help="size step (multiplicative)")
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    unknown = set(args.ops) - set(OPS)
    if unknown:
        raise SystemExit(
            f"--ops: unknown {sorted(unknown)}; expected some of {sorted(OPS)}"
        )
    device = init_distributed()
    rows = run(args, device)
    save(args.out, NAME, COLUMNS, rows, argv, args.append)
    return 0


if __name__ == "__main__":
    sys.exit(main())
