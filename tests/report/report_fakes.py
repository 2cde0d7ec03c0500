"""Small results frames shaped like the paper's Figure 11, Figure 12 and Table 3 sweeps."""

from __future__ import annotations

from typing import Any

import pandas as pd

from atpsim.analytic.model import closed_form_units
from atpsim.compute.models import MODEL_PRESETS
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.results.io import to_frame
from atpsim.scenario.point import SweepPoint
from atpsim.sweep import simulate_row


def fake(point: SweepPoint) -> dict[str, Any]:
    """comm_over_delta = the closed form + 0.1 (so simulated and formula lines differ);
    TFLOP/s = 100 * hidden/2048 / (1 + comm_over_delta / (4 * chunks)), chunks hiding a little.
    To rank meshes differently, analytic rows take the closed form of the transposed mesh
    (d2, d1) without the 0.1, and rabenseifner rows the transposed form + 0.1."""
    d1, d2 = point.shape.d1, point.shape.d2
    if point.mode == "analytic":
        ratio = closed_form_units(d2, d1)
    elif point.algorithm == "rabenseifner":
        ratio = closed_form_units(d2, d1) + 0.1
    else:
        ratio = closed_form_units(d1, d2) + 0.1
    tflops = 100.0 * point.model.hidden / 2048 / (1 + ratio / (4 * point.chunks))
    return {
        "comm_over_delta": ratio,
        "tflops_per_gpu": tflops,
        "tflops_per_gpu_paper_unit": tflops * 1e12 / 2**40,
        "step_time_s": 1.0 / tflops,
        "comm_time_s": ratio * 1e-3,
    }


def frame_of(points: list[SweepPoint]) -> pd.DataFrame:
    return to_frame(simulate_row(fake, p, i) for i, p in enumerate(points))


def point(topo: str, n: int, model: str, mesh: DeviceMesh, **kw: Any) -> SweepPoint:
    return SweepPoint(
        "t", {"preset": topo}, topo, n, "a100-sxm4-80gb", MODEL_PRESETS[model], mesh, **kw
    )


def fig11_frame() -> pd.DataFrame:
    return frame_of(
        [
            point(topo, n, m, DeviceMesh(n // i, i))
            for topo, n in (("ic1", 8), ("ic4", 16))
            for m in ("M1", "M2")
            for i in (1, 2, 4)
        ]
    )


def fig12_frame() -> pd.DataFrame:
    return frame_of(
        [
            point(topo, n, "M4", mesh, group="atp-opt")
            for topo in ("ic5", "ic6")
            for n in (16, 64, 256)
            for mesh in factorizations(n)
        ]
    )


def table3_frame() -> pd.DataFrame:
    return frame_of(
        [
            point(topo, 8, m, mesh, chunks=c, group="atp-opt")
            for m in ("M2", "M4")
            for topo in ("ic1", "ic3")
            for mesh in factorizations(8)
            for c in (1, 2, 4)
        ]
    )


def modes_frame() -> pd.DataFrame:
    """ic4 at 8 and 16 GPUs, M2, every mesh (atp-opt), chunks 1 and 2, des and analytic."""
    return frame_of(
        [
            point("ic4", n, "M2", mesh, chunks=c, mode=mode, group="atp-opt")
            for mode in ("des", "analytic")
            for n in (8, 16)
            for mesh in factorizations(n)
            for c in (1, 2)
        ]
    )


def algorithms_frame() -> pd.DataFrame:
    """ic1, 8 GPUs, M2, every mesh, chunks 1, ring and rabenseifner (des)."""
    return frame_of(
        [
            point("ic1", 8, "M2", mesh, algorithm=algorithm, group="atp-opt")
            for algorithm in ("ring", "rabenseifner")
            for mesh in factorizations(8)
        ]
    )


def placements_frame() -> pd.DataFrame:
    """ic5 and ic6 at 16 and 64 GPUs, M4, every mesh in both placements, des and analytic,
    ring and rabenseifner."""
    return frame_of(
        [
            point(topo, n, "M4", DeviceMesh(m.d1, m.d2, place), algorithm=alg, mode=mode,
                  group="atp-opt")
            for topo in ("ic5", "ic6")
            for alg in ("ring", "rabenseifner")
            for place in ("row-major", "column-major")
            for mode in ("des", "analytic")
            for n in (16, 64)
            for m in factorizations(n)
        ]
    )  # fmt: skip
