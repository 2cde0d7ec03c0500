"""Fit the GEMM efficiency curve of a profile to measured GEMMs (profile -> fit -> predict).

The validation harness measures GEMM rates by shape; :func:`fit_gemm_curve` chooses the
curve's ``efficiency_max`` and ``output_half_elements`` that minimise the RMS of
``ln(curve rate / measured rate)`` (``k_half`` and ``smoothness`` stay as given: the data of
a few shapes cannot pin four parameters), by a coarse-to-fine grid search: deterministic and
numpy-free. The result keeps the points, so a ``table`` profile is then exact at them.

``python -m atpsim.calibrate.fit.gemm_curve`` refits the packaged profiles' curves to their
measured points (:data:`FITS`: the A100's two parameters to its eight cuBLASLt rows, the H100's
plateau alone to its two square rows), checks that the refit gives the values the profiles
hold, and writes each curve's uncertainty to ``atpsim/data/calibration/gemm-curve.yaml``
(``--dry-run``: print only): the **least-squares covariance** of the log parameters
(:func:`curve_uncertainty`), J the central-difference Jacobian of the log rate residuals at the
profile's values. Not a bootstrap: the grid search's optimum is only as fine as its last grid,
so refits of resampled residuals would mostly measure the grid; the curve is smooth in its
parameters, and with 8 (A100) or 2 (H100) points the covariance is what the data can say. A
``table`` profile's correction pulls the curve back onto every measured shape, so a draw moves
the GEMMs between and beyond the measured shapes, not those at them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from atpsim.calibrate.uncertainty.estimate import covariance_from_jacobian, numerical_jacobian
from atpsim.calibrate.uncertainty.record import FitUncertainty, record_from_covariance
from atpsim.compute.gemm import curve_kernel_time_s, gemm_flops
from atpsim.compute.hardware import HardwareProfile, load_profile
from atpsim.errors import AtpsimError

Point = tuple[int, int, int, float]
#: The curve's fitted parameters (k_half and smoothness stay as given).
CURVE_PARAMETERS = ("efficiency_max", "output_half_elements")


def rms_log_error(profile: HardwareProfile, points: Sequence[Point], dtype: str) -> float:
    """RMS of ln(curve rate / measured rate) over *points* (the curve alone, no correction)."""
    errors = log_rate_residuals(profile, points, dtype)
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def fit_gemm_curve(
    profile: HardwareProfile, points: Sequence[Point], dtype: str = "fp16", *, rounds: int = 6,
    free: Sequence[str] = CURVE_PARAMETERS,
) -> HardwareProfile:
    """*profile* with its GEMM curve refitted to *points* ``(m, n, k, flops_per_s)`` of
    *dtype* (only the parameters in *free*; the others stay), and the points stored for the
    table correction."""
    if not points:
        raise AtpsimError("fitting the GEMM curve needs at least one measured point")
    best = (profile.gemm.efficiency_max, math.log10(profile.gemm.output_half_elements))
    lo, hi = (0.05, 2.0), (1.0, 9.0)
    span = ((hi[0] - lo[0]) / 2 if CURVE_PARAMETERS[0] in free else 0.0,
            (hi[1] - lo[1]) / 2 if CURVE_PARAMETERS[1] in free else 0.0)
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


@dataclass(frozen=True)
class CurveFit:
    """Which *points* of packaged profile *profile* (all: None; else the shapes with m = n = k
    when *square*) pin which *free* parameters."""

    profile: str
    free: tuple[str, ...]
    square: bool = False

    def points(self, hardware: HardwareProfile) -> list[Point]:
        pts = list(hardware.gemm.points)
        return [p for p in pts if p[0] == p[1] == p[2]] if self.square else pts


#: The packaged profiles' fitted curves (their ``sources.gemm`` say the same).
FITS = (
    CurveFit("a100-sxm4-80gb", CURVE_PARAMETERS),
    CurveFit("h100-sxm", ("efficiency_max",), square=True),
)
COVARIANCE_WHY = (
    "least-squares covariance of the log parameters, J at the profile's values: the grid "
    "search's optimum is only as fine as its grid (a bootstrap would measure the grid), the "
    "curve is smooth in its parameters; a table profile stays exact at its measured shapes"
)


def log_rate_residuals(profile: HardwareProfile, points: Sequence[Point], dtype: str) -> list[float]:
    """ln(curve rate / measured rate) per point (the curve alone, no correction)."""
    return [math.log(gemm_flops(m, n, k) / curve_kernel_time_s(m, n, k, 1, dtype, profile) / rate)
            for m, n, k, rate in points]  # fmt: skip


def curve_uncertainty(profile: HardwareProfile, points: Sequence[Point], dtype: str,
                      free: Sequence[str]) -> FitUncertainty:  # fmt: skip
    """The covariance record of *profile*'s *free* curve parameters (log space) given
    *points* (module docstring)."""
    import numpy as np

    def residuals(log_values: np.ndarray) -> np.ndarray:
        gemm = replace(profile.gemm, **dict(zip(free, np.exp(log_values).tolist(), strict=True)))
        return np.array(log_rate_residuals(replace(profile, gemm=gemm), points, dtype))

    x = np.log([getattr(profile.gemm, name) for name in free])
    r = residuals(x)
    covariance = covariance_from_jacobian(numerical_jacobian(residuals, x, 1e-4), r, len(free))
    return record_from_covariance(
        f"gemm:{profile.name}", "covariance", COVARIANCE_WHY, free, covariance, "log",
        residual_rms=float(np.sqrt(np.mean(r**2))), dof=len(r) - len(free),
    )  # fmt: skip


def refit_and_record(spec: CurveFit) -> tuple[HardwareProfile, FitUncertainty]:
    """Refit *spec*'s curve; an AtpsimError if it no longer gives the profile's values (to
    the digits the profile holds); the record of the profile's values' uncertainty."""
    profile = load_profile(spec.profile)
    points, dtype = spec.points(profile), profile.gemm.points_dtype
    refit = fit_gemm_curve(profile, points, dtype, free=spec.free)
    for name in spec.free:
        held, found = getattr(profile.gemm, name), getattr(refit.gemm, name)
        if abs(found / held - 1) > 5e-4:
            raise AtpsimError(f"the refit gives {found:.6g}, the profile holds {held:.6g}: "
                              "refit the profile first", key=f"{spec.profile}: gemm.{name}")  # fmt: skip
    return refit, curve_uncertainty(profile, points, dtype, spec.free)


def refit_line(spec: CurveFit, refit: HardwareProfile, record: FitUncertainty) -> str:
    """One refitted curve as the command prints it: the free parameters' values, the fit's
    RMS and degrees of freedom, each parameter's 1-sigma."""
    sigmas = ", ".join(f"{p.name} 1-sigma {p.sigma:.1%}" for p in record.parameters)
    return (f"{spec.profile}: refit {[getattr(refit.gemm, n) for n in spec.free]} "
            f"(RMS {record.residual_rms:.1%}, {record.dof} dof); {sigmas}")  # fmt: skip


def write_records(records: dict[str, Any]) -> Path:
    """Write *records* (profile name -> uncertainty record) under :data:`HEADER` to the
    packaged ``calibration/gemm-curve.yaml``; return its path."""
    from importlib import resources

    import yaml

    path = Path(str(resources.files("atpsim").joinpath("data/calibration/gemm-curve.yaml")))
    text = HEADER + yaml.safe_dump(records, sort_keys=False, width=1000, default_flow_style=None)
    path.write_text(text)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """The command: refit every curve of :data:`FITS`, print each, and write the records
    (module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print; write no file")
    args = parser.parse_args(argv)
    records = {}
    for spec in FITS:
        refit, record = refit_and_record(spec)
        print(refit_line(spec, refit, record))
        records[spec.profile] = record.to_dict()
    if not args.dry_run:
        print(f"wrote {write_records(records)}")
    return 0


HEADER = (
    "# The uncertainty of the packaged profiles' GEMM efficiency curves, written by\n"
    "# `python -m atpsim.calibrate.fit.gemm_curve` (atpsim/calibrate/fit/gemm_curve.py) beside\n"
    "# the values in atpsim/data/hardware/*.yaml, which it refits and leaves as they are.\n"
    "# Per profile: each fitted curve parameter's 1-sigma (of its logarithm), their correlation;\n"
    "# drawn by --uncertainty N (atpsim/calibrate/uncertainty). Generated: do not edit.\n"
)


if __name__ == "__main__":
    raise SystemExit(main())
