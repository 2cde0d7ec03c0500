"""Check the ATP layer against the single-process reference (issue 6, "Numerics").

For each mesh and chunk count, the layer's output and the gradients of its input and of every
parameter must equal the reference's (sharded the same way) within fp32 tolerance:
``|actual - expected| <= atol + rtol * |expected|`` elementwise, as ``torch.testing.assert_close``.

Run on a machine: ``torchrun --nproc-per-node 4 -m validation.numerics`` (gloo on CPU, NCCL on
GPUs); it prints one line per check and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from validation.layer import ACTIVATION_SPEC, OPERATORS, ATPTransformerLayer
from validation.linear import shard
from validation.mesh import ATPMesh, init_mesh, mesh_shapes
from validation.reference import LayerConfig, ReferenceLayer

RTOL = 1e-5
ATOL = 1e-5
#: The issue's tiny model: h=32, heads=4, b=2, s=8.
TINY = LayerConfig(hidden=32, heads=4, batch=2, seq=8)


@dataclass(frozen=True)
class Check:
    """One compared tensor on one rank: the worst absolute error and whether all are in
    tolerance."""

    d1: int
    d2: int
    chunks: int
    rank: int
    tensor: str
    max_abs_error: float
    max_abs_expected: float
    ok: bool


def _compare(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float, bool]:
    actual, expected = actual.detach().double().cpu(), expected.detach().double().cpu()
    if actual.shape != expected.shape:
        return float("inf"), float(expected.abs().max()), False
    error = (actual - expected).abs()
    ok = bool((error <= ATOL + RTOL * expected.abs()).all())
    return float(error.max()), float(expected.abs().max()), ok


def _reference_run(
    config: LayerConfig, seed: int
) -> tuple[ReferenceLayer, dict[str, torch.Tensor]]:
    reference = ReferenceLayer(config, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    shape = (config.batch, config.seq, config.hidden)
    x = torch.randn(shape, generator=generator).requires_grad_()
    grad = torch.randn(shape, generator=generator)
    y = reference(x)
    y.backward(grad)
    return reference, {"x": x.detach(), "grad": grad, "output": y.detach(), "input.grad": x.grad}


def check_layer(config: LayerConfig, mesh: ATPMesh, chunks: int, *, seed: int = 0,
                operators: Mapping = OPERATORS) -> list[Check]:  # fmt: skip
    """Run the reference and the ATP layer on the same input and output gradient; compare."""
    reference, ref = _reference_run(config, seed)
    layer = ATPTransformerLayer(config, mesh, chunks, operators=operators)
    layer.load_reference_(reference)
    x = shard(ref["x"], mesh, ACTIVATION_SPEC).requires_grad_()
    y = layer(x)
    y.backward(shard(ref["grad"], mesh, ACTIVATION_SPEC))
    pairs: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = {
        "output": (y, ref["output"]),
        "input.grad": (x.grad, ref["input.grad"]),
    }
    specs = layer.parameter_specs()
    ref_params = dict(reference.named_parameters())
    for name, param in layer.named_parameters():
        pairs[f"{name}.grad"] = (param.grad, ref_params[name].grad)
    checks = []
    for tensor, (actual, expected) in pairs.items():
        if actual is None or expected is None:
            raise RuntimeError(f"{tensor}: no gradient was computed (a broken autograd path)")
        spec = specs.get(tensor.removesuffix(".grad"), ACTIVATION_SPEC)
        error, scale, ok = _compare(actual, shard(expected, mesh, spec))
        rank = dist.get_rank()
        checks.append(Check(mesh.d1, mesh.d2, chunks, rank, tensor, error, scale, ok))
    return checks


def tiny_for(world_size: int) -> LayerConfig:
    """The tiny model, with enough heads (8 dims each) for every rank to hold whole heads."""
    heads = world_size * -(-TINY.heads // world_size)
    return LayerConfig(hidden=8 * heads, heads=heads, batch=TINY.batch, seq=TINY.seq)


def check_all(config: LayerConfig, chunk_counts: list[int], device_type: str | None = None,
              meshes: list[tuple[int, int]] | None = None) -> list[Check]:  # fmt: skip
    """:func:`check_layer` for every mesh of the world size (or *meshes*) and chunk count."""
    checks = []
    for d1, d2 in meshes or mesh_shapes(dist.get_world_size()):
        mesh = init_mesh(d1, d2, device_type)
        for chunks in chunk_counts:
            checks.extend(check_layer(config, mesh, chunks))
    return checks


def summary(checks: list[Check]) -> str:
    """One line per (mesh, chunks): the number of checks and the worst absolute error."""
    lines = []
    for key in sorted({(c.d1, c.d2, c.chunks) for c in checks}):
        group = [c for c in checks if (c.d1, c.d2, c.chunks) == key]
        worst = max(group, key=lambda c: c.max_abs_error)
        verdict = "ok" if all(c.ok for c in group) else "FAILED"
        lines.append(f"DeviceMesh{key[:2]} chunks={key[2]}: {len(group)} tensors, worst "
                     f"|error| {worst.max_abs_error:.2e} ({worst.tensor}), {verdict}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", default="1,2", help="chunk counts, comma-separated")
    args = parser.parse_args(argv)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    if backend == "nccl":
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    checks = check_all(tiny_for(dist.get_world_size()), [int(c) for c in args.chunks.split(",")])
    gathered: list[list[Check]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(gathered, checks)
    every = [check for rank_checks in gathered for check in rank_checks]
    failed = [check for check in every if not check.ok]
    if dist.get_rank() == 0:
        print(summary(every))
        for check in failed:
            print("FAILED", asdict(check))
        print(f"{len(failed)} of {len(every)} checks failed")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
