"""A PyTorch profiler (Kineto) trace of the ATP layer's training step, for ``atpsim validate``.

``torchrun --nproc-per-node 2 -m validation.bench.profile_layer --out DIR --hidden 256
--heads 8 --batch 4 --seq 128 --meshes 1x2 --chunks 1 --steps 2`` builds
:class:`validation.layer.ATPTransformerLayer` on each mesh, runs ``--warmup`` untimed steps
(``y = layer(x); y.backward(g)``), then profiles ``--steps`` steps with ``torch.profiler``
(CPU activity, and CUDA on a GPU; ``record_shapes`` so GEMMs and collectives carry their
operand shapes), each step inside its own ``ProfilerStep#i`` range and after a barrier, so
the ranks start it together. Every rank writes
``DIR/trace.<d1>x<d2>.c<chunks>.rank<r>.json`` (the Chrome trace Kineto exports, the same
format on a GPU) with one top-level key added, ``atpsim_layer``: the layer's sizes, mesh,
chunks, dtype and the machine description (:func:`validation.bench.machine.describe_machine`),
so ``atpsim validate DIR/trace....json`` knows which program to map the trace onto.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

from validation.bench.common import (
    DTYPES,
    add_model_options,
    base_parser,
    init_distributed,
    mesh_list,
)
from validation.bench.machine import describe_machine
from validation.layer import ATPTransformerLayer
from validation.mesh import ATPMesh, init_mesh, mesh_shapes
from validation.reference import LayerConfig

log = logging.getLogger("validation.bench")
#: The trace's top-level key that describes the profiled layer (read by atpsim.calibrate.trace).
METADATA_KEY = "atpsim_layer"


def trace_name(mesh: ATPMesh, chunks: int, rank: int) -> str:
    """``trace.<d1>x<d2>.c<chunks>.rank<r>.json``."""
    return f"trace.{mesh.d1}x{mesh.d2}.c{chunks}.rank{rank}.json"


def describe_layer(config: LayerConfig, mesh: ATPMesh, chunks: int, args: Any) -> dict[str, Any]:
    """The ``atpsim_layer`` entry: what was profiled and on what."""
    return {
        "hidden": config.hidden, "heads": config.heads, "batch": config.batch,
        "seq": config.seq, "ffn_mult": config.ffn_mult, "dropout": config.dropout,
        "d1": mesh.d1, "d2": mesh.d2, "chunks": chunks, "dtype": args.dtype,
        "steps": args.steps, "warmup": args.warmup, "machine": describe_machine(),
    }  # fmt: skip


def profile_mesh(config: LayerConfig, mesh: ATPMesh, chunks: int, args: Any,
                 device: torch.device) -> Path:  # fmt: skip
    """Profile ``args.steps`` steps of the layer on *mesh*; returns this rank's trace file."""
    dtype = DTYPES[args.dtype]
    layer = ATPTransformerLayer(config, mesh, chunks, dtype=dtype)
    shape = (config.batch, config.seq, config.hidden // mesh.d2)
    x = torch.randn(shape, dtype=dtype, device=device, requires_grad=True)
    grad = torch.randn(shape, dtype=dtype, device=device)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).backward(grad)

    for _ in range(args.warmup):
        step()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as prof:
        for i in range(args.steps):
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            with record_function(f"ProfilerStep#{i}"):
                step()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
    path = args.out / trace_name(mesh, chunks, dist.get_rank())
    prof.export_chrome_trace(str(path))
    _add_metadata(path, describe_layer(config, mesh, chunks, args))
    return path


def _add_metadata(path: Path, layer: dict[str, Any]) -> None:
    """Write *layer* under :data:`METADATA_KEY` into the exported trace (Kineto keeps other
    programs' top-level keys; ``add_metadata_json`` does the same but only while profiling)."""
    trace = json.loads(path.read_text())
    trace[METADATA_KEY] = layer
    path.write_text(json.dumps(trace, separators=(",", ":")))


def parser():
    parser = base_parser(__doc__.split("\n")[0])
    parser.set_defaults(warmup=3)
    parser.add_argument("--meshes", type=mesh_list, default=None, help="e.g. 2x1,1x2 (default: all)")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps (ProfilerStep#i)")
    add_model_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    device = init_distributed()
    args.out.mkdir(parents=True, exist_ok=True)
    config = LayerConfig(args.hidden, args.heads, args.batch, args.seq, args.ffn_mult,
                         dropout=args.dropout)  # fmt: skip
    for d1, d2 in args.meshes or mesh_shapes(dist.get_world_size()):
        mesh = init_mesh(d1, d2, device.type)
        for chunks in args.chunks:
            log.info("wrote %s", profile_mesh(config, mesh, chunks, args, device))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
