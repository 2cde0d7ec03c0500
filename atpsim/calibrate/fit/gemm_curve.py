"""Fit the GEMM efficiency curve of a profile to measured GEMMs (profile -> fit -> predict).

The validation harness measures GEMM rates by shape; :func:`fit_gemm_curve` chooses the
curve's ``efficiency_max`` and ``output_half_elements`` that minimise the RMS of
``ln(curve rate / measured rate)`` (``k_half`` and ``smoothness`` stay as given: the data of
a few shapes cannot pin four parameters), by a coarse-to-fine grid search: deterministic and
numpy-free. The result keeps the points, so a ``table`` profile is then exact at them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from atpsim.compute.gemm import curve_kernel_time_s, gemm_flops
from atpsim.compute.hardware import HardwareProfile
from atpsim.errors import AtpsimError

Point = tuple[int, int, int, float]


def rms_log_error(profile: HardwareProfile, points: Sequence[Point], dtype: str) -> float:
    """RMS of ln(curve rate / measured rate) over *points* (the curve alone, no correction)."""
    errors = [
        math.log(gemm_flops(m, n, k) / curve_kernel_time_s(m, n, k, 1, dtype, profile) / rate)
        for m, n, k, rate in points
    ]
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def fit_gemm_curve(
    profile: HardwareProfile, points: Sequence[Point], dtype: str = "fp16", *, rounds: int = 6
) -> HardwareProfile:
    """*profile* with its GEMM curve refitted to *points* ``(m, n, k, flops_per_s)`` of
    *dtype*, and the points stored for the table correction."""
    if not points:
        raise AtpsimError("fitting the GEMM curve needs at least one measured point")
    best = (profile.gemm.efficiency_max, math.log10(profile.gemm.output_half_elements))
    lo, hi = (0.05, 2.0), (1.0, 9.0)
    span = ((hi[0] - lo[0]) / 2, (hi[1] - lo[1]) / 2)
    for _ in range(rounds):
        best = _best_on_grid(profile, points, dtype, best, span, lo, hi)
        span = (span[0] / 4, span[1] / 4)
    gemm = replace(
        profile.gemm,
        efficiency_max=round(best[0], 4),
        output_half_elements=float(f"{10 ** best[1]:.4g}"),
        points=tuple((int(m), int(n), int(k), float(r)) for m, n, k, r in points),
        points_dtype=dtype,
    )
    return replace(profile, gemm=gemm)


def _best_on_grid(
    profile: HardwareProfile,
    points: Sequence[Point],
    dtype: str,
    centre: tuple[float, float],
    span: tuple[float, float],
    lo: tuple[float, float],
    hi: tuple[float, float],
    steps: int = 12,
) -> tuple[float, float]:
    """The best (efficiency_max, log10 output_half_elements) on a grid around *centre*."""
    candidates = []
    for i in range(steps + 1):
        e = min(max(centre[0] + span[0] * (2 * i / steps - 1), lo[0]), hi[0])
        for j in range(steps + 1):
            a = min(max(centre[1] + span[1] * (2 * j / steps - 1), lo[1]), hi[1])
            trial = replace(
                profile, gemm=replace(profile.gemm, efficiency_max=e, output_half_elements=10**a)
            )
            candidates.append((rms_log_error(trial, points, dtype), e, a))
    _, e, a = min(candidates)
    return e, a
