"""The calibration report as plain text: parameters, fit residuals, check errors, M4."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from atpsim.calibrate.paper import parameters as params
from atpsim.calibrate.paper.fit import group_rms
from atpsim.calibrate.paper.table3 import PAPER_OPTIMAL_MESH, TOPOLOGIES, CellPrediction

GB = 1e9


def report(result) -> str:  # type: ignore[no-untyped-def]
    """Every section of the fit's report, for a :class:`~atpsim.calibrate.paper.fit.FitResult`."""
    return "\n".join(
        [
            *parameter_lines(result.fit.values),
            "",
            *residual_lines(result),
            "",
            "Check set (chunk 2 and 4; predicted, not fitted):",
            *cell_lines(result.check),
            f"  RMS error {rms(result.check):.1%}",
            "",
            "M4 (held out; predictions for the record):",
            *cell_lines(result.held_out),
            "",
            *ranking_lines(result.fit.cells),
        ]
    )


def parameter_lines(values) -> list[str]:  # type: ignore[no-untyped-def]
    measured = params.measured_collective()
    lines = ["Fitted parameters (value | spec | meaning):"]
    for p in params.PARAMETERS:
        spec = "-" if p.spec is None else f"{p.spec / p.scale:.4g}"
        lines.append(
            f"  {p.name:<26} {values[p.name] / p.scale:10.4g} {p.unit:<18} spec {spec:<8} "
            f"{p.meaning}"
        )
    lines += [
        "Measured, not fitted (NCCL all-reduce sweep, atpsim.calibrate.fit.nccl_overhead):",
        f"  collective_overhead_s      {measured.overhead_s * 1e6:10.4g} us per collective call",
        f"    (affine fit RMS {measured.rms_relative_error:.1%}; charged by the event backend only)",
        "  ic3: links at spec (NVLink3 300 GB/s) with NCCL profile a100 (atpsim/data/nccl.yaml, "
        "python -m atpsim.calibrate.fit.nccl_curve)",
    ]
    return lines


def residual_lines(result) -> list[str]:  # type: ignore[no-untyped-def]
    fit = result.fit
    lines = ["Fit set (Baseline cells, TFLOP/s per GPU, 2^40 unit):", *cell_lines(fit.cells)]
    lines.append(
        f"IC1 calibrated all-reduce bandwidths (paper values read with "
        f"{result.element_bytes} bytes per element):"
    )
    for t in fit.targets:
        simulated = fit.bandwidths_Bps[t.name]
        lines.append(
            f"  {t.name:<12} simulated {simulated / GB:7.3f} GB/s  target {t.target_Bps / GB:7.3f} "
            f"(paper {t.paper_Bps / GB:.2f})  {simulated / t.target_Bps - 1:+7.1%}"
        )
    per_topology = ", ".join(f"{name} {group_rms(fit, name):.1%}" for name in TOPOLOGIES)
    lines.append(f"  RMS error {fit.rms():.1%} over the fit set; by machine: {per_topology}")
    lines.append(f"  ({result.evaluations} evaluations)")
    return lines


def cell_lines(cells: Iterable[CellPrediction]) -> list[str]:
    lines = []
    for c in cells:
        mesh = f"({c.mesh.d1},{c.mesh.d2})"
        paper = "-" if c.cell.paper is None else f"{c.cell.paper:7.2f}"
        error = "" if c.error is None else f"{c.error:+7.1%}"
        lines.append(
            f"  {c.cell.label:<22} {mesh:<6} simulated {c.tflops:7.2f}  paper {paper}  {error}"
        )
    return lines


def ranking_lines(cells: Iterable[CellPrediction]) -> list[str]:
    lines = [
        "Mesh ranking at chunk 1 (TFLOP/s per GPU per mesh; the paper's optimum, Section 5.3):"
    ]
    for c in cells:
        ranked = sorted(c.by_mesh.items(), key=lambda item: -item[1])
        text = "  ".join(f"({d1},{d2}) {v:.2f}" for (d1, d2), v in ranked)
        paper = PAPER_OPTIMAL_MESH.get(c.cell.topology)
        verdict = (
            ""
            if paper is None
            else f"  paper {paper}: {'agrees' if paper == ranked[0][0] else 'DISAGREES'}"
        )
        lines.append(f"  {c.cell.model} {c.cell.topology}: {text}{verdict}")
    return lines


def rms(cells: Iterable[CellPrediction]) -> float:
    errors = [c.error for c in cells if c.error is not None]
    return float(np.sqrt(np.mean(np.square(errors)))) if errors else float("nan")
