"""The ATP layer's forward + backward time for each mesh and chunk count.

``torchrun --nproc-per-node N -m validation.bench.layer --out DIR --hidden 256 --heads 8
--batch 4 --seq 128 --chunks 1,2 --dropout 0.1`` builds
:class:`validation.layer.ATPTransformerLayer` on
every mesh of N ranks (heads must divide by N) and times ``y = layer(x); y.backward(g)``:
a barrier, then the slowest rank's time per repetition. ``fwd_time_s`` is the forward alone
(timed in separate repetitions, same protocol).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch
import torch.distributed as dist

from validation.bench.common import (
    DTYPES,
    add_model_options,
    base_parser,
    init_distributed,
    mesh_list,
    save,
    timed,
)
from validation.layer import ATPTransformerLayer
from validation.mesh import ATPMesh, init_mesh, mesh_shapes
from validation.reference import LayerConfig

NAME = "layer"
COLUMNS = (
    "d1", "d2", "chunks", "hidden", "heads", "batch", "seq", "ffn_mult", "dropout", "dtype",
    "backend", "device", "reps", "fwd_bwd_time_s", "fwd_bwd_time_s_mean", "fwd_bwd_time_s_min",
    "fwd_bwd_time_s_max", "fwd_bwd_time_s_std", "fwd_bwd_run_delay_s_fastest",
    "fwd_bwd_run_delay_s_median", "fwd_time_s",
)  # fmt: skip


def measure(
    config: LayerConfig, mesh: ATPMesh, chunks: int, args: Any, device: torch.device
) -> dict[str, Any]:
    """One row: forward + backward (and forward alone) of the layer on *mesh*."""
    dtype = DTYPES[args.dtype]
    layer = ATPTransformerLayer(config, mesh, chunks, dtype=dtype)
    shape = (config.batch, config.seq, config.hidden // mesh.d2)
    x = torch.randn(shape, dtype=dtype, device=device, requires_grad=True)
    grad = torch.randn(shape, dtype=dtype, device=device)

    def fwd_bwd() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).backward(grad)

    def fwd() -> None:
        with torch.no_grad():
            layer(x)

    both = timed(fwd_bwd, device, args, "fwd_bwd_time_s")
    forward = timed(fwd, device, args, "fwd_time_s")
    return {
        "d1": mesh.d1, "d2": mesh.d2, "chunks": chunks, "hidden": config.hidden,
        "heads": config.heads, "batch": config.batch, "seq": config.seq,
        "ffn_mult": config.ffn_mult, "dropout": config.dropout, "dtype": args.dtype,
        "backend": dist.get_backend(),
        "device": device.type, "reps": args.reps, **both, "fwd_time_s": forward["fwd_time_s"],
    }  # fmt: skip


def run(args: Any, device: torch.device) -> list[dict[str, Any]]:
    config = LayerConfig(args.hidden, args.heads, args.batch, args.seq, args.ffn_mult,
                         dropout=args.dropout)  # fmt: skip
    rows: list[dict[str, Any]] = []
    for d1, d2 in args.meshes or mesh_shapes(dist.get_world_size()):
        mesh = init_mesh(d1, d2, device.type)
        rows.extend(measure(config, mesh, chunks, args, device) for chunks in args.chunks)
    return rows


def parser():
    parser = base_parser(__doc__.split("\n")[0])
    parser.add_argument(
        "--meshes", type=mesh_list, default=None, help="e.g. 4x1,2x2 (default: all)"
    )
    add_model_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    device = init_distributed()
    rows = run(args, device)
    save(args.out, NAME, COLUMNS, rows, argv, args.append)
    return 0


if __name__ == "__main__":
    sys.exit(main())
