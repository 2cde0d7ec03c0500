"""Fit a hardware profile to measured GEMM times (profile -> fit).

A measured GEMM call takes (:mod:`atpsim.compute.gemm`, compute-bound)

    t = overhead + flops / (E · g(m, n, k)),   g = P / (P + P_half) · k / (k + k_half),
    P = batch·m·n output elements,             E = peak · efficiency_max

where *overhead* is the per-call cost that moves no data (a GPU's kernel launch; on a CPU
PyTorch's op dispatch, tens of microseconds). For fixed ``(P_half, k_half)`` this is linear in
``(overhead, 1/E)``, so both come from one least-squares solve on the relative error
``(predicted - measured) / measured``: the smallest GEMMs, whose time is nearly all overhead,
pin it, and the large ones pin E. ``(P_half, k_half)`` are searched on a grid (log10 P_half in
steps of 0.05 over [0, 9]; k_half in :data:`K_HALVES`). The GEMM curve is then refined by
:func:`atpsim.calibrate.fit.gemm_curve.fit_gemm_curve` (which adds the profile's smooth memory
roofline) on the kernel rates ``flops / (t - overhead)`` of the GEMMs whose kernel is at least
half their time.

The profile's peak is E, the curve's asymptote (above every measured rate, as a datasheet peak
is; ``efficiency_max`` starts at 1 and the refinement may lower it). It is written with
``gemm.model: table`` and those kernel rates as its points, so the measured shapes are
predicted from their own measurement and other shapes from the curve pulled toward their
measured neighbours.

Uncertainty (:meth:`ProfileFit.uncertainty`): the **least-squares covariance** of
(overhead, ln efficiency_max, ln P_half) over every GEMM's relative curve error, J by central
differences at the fitted values. The grid search's optimum is as fine as its grid, so a
bootstrap of it would mostly measure the grid; the curve is smooth in these three. (k_half is a
grid choice among a few values and is not drawn.) Where the data do not pin P_half within a
factor e (its log sigma >= 1: every measured GEMM's output is far above it, as on the committed
CPU folders, and no time depends on it), it is held at its fitted value and the other two are
conditioned on it: a linearised sigma of such a parameter would be meaningless.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from atpsim.calibrate.fit.gemm_curve import fit_gemm_curve
from atpsim.calibrate.measurements.samples import GemmSample
from atpsim.calibrate.uncertainty.estimate import covariance_from_jacobian, numerical_jacobian
from atpsim.calibrate.uncertainty.record import FitUncertainty, record_from_covariance
from atpsim.compute.gemm import curve_kernel_time_s, gemm_time_s
from atpsim.compute.hardware import GemmModel, HardwareProfile
from atpsim.errors import AtpsimError

#: k_half values tried (0: no short-k penalty; 128 is the A100 profile's four 32-deep tiles).
K_HALVES = (0.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)
#: log10 P_half grid: [0, 9] in steps of 0.05.
LOG10_P_HALVES = tuple(i * 0.05 for i in range(181))
#: A GEMM informs the rate table when its kernel is at least this share of its measured time.
KERNEL_SHARE = 0.5
#: The GEMMs with FLOPs at most this factor above the smallest are reported as overhead points.
SMALL_FACTOR = 16.0


@dataclass(frozen=True)
class GemmResidual:
    """A GEMM's measured seconds, the fitted profile's (*predicted_s*, table-corrected) and the
    curve's alone (*curve_s*), and its *role*: 'rate' (informed the curve), 'overhead',
    'both', or 'none'."""

    sample: GemmSample
    predicted_s: float
    curve_s: float
    role: str

    @property
    def rel_error(self) -> float:
        return (self.predicted_s - self.sample.time_s) / self.sample.time_s

    @property
    def curve_rel_error(self) -> float:
        return (self.curve_s - self.sample.time_s) / self.sample.time_s


@dataclass(frozen=True)
class ProfileFit:
    """The fitted profile and the residual of every GEMM."""

    profile: HardwareProfile
    residuals: tuple[GemmResidual, ...]

    def rms_rel_error(self, curve: bool = False) -> float:
        errors = [r.curve_rel_error if curve else r.rel_error for r in self.residuals]
        return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


    def uncertainty(self, samples: Sequence[GemmSample]) -> FitUncertainty:
        """The covariance record of the profile's GEMM fields (module docstring) given the
        *samples* it was fitted to."""
        import numpy as np

        profile, dtype = self.profile, self.profile.gemm.points_dtype
        names = ("launch_overhead_s", "gemm.efficiency_max", "gemm.output_half_elements")

        def errors(x: np.ndarray) -> np.ndarray:
            gemm = replace(profile.gemm, efficiency_max=math.exp(x[1]),
                           output_half_elements=math.exp(x[2]))  # fmt: skip
            trial = replace(profile, gemm=gemm)
            return np.array([(x[0] + _curve_kernel_s(s, trial, dtype)) / s.time_s - 1
                             for s in samples])  # fmt: skip

        x = np.array([profile.launch_overhead_s, math.log(profile.gemm.efficiency_max),
                      math.log(profile.gemm.output_half_elements)])  # fmt: skip
        r, jac = errors(x), numerical_jacobian(errors, x, 1e-6)
        covariance = covariance_from_jacobian(jac, r, 3)
        kept = 3 if covariance[2, 2] < 1.0 else 2  # P_half unpinned: hold it (docstring)
        covariance = covariance_from_jacobian(jac[:, :kept], r, kept)
        return record_from_covariance(
            "gemm", "covariance", COVARIANCE_WHY, names[:kept], covariance,
            ("linear", "log", "log")[:kept], {"launch_overhead_s": (0.0, None)},
            residual_rms=float(np.sqrt(np.mean(r**2))), dof=len(r) - kept,
        )  # fmt: skip


COVARIANCE_WHY = ("least-squares covariance of (overhead, ln efficiency_max, ln P_half) over "
                  "the GEMMs' relative curve errors, J at the fitted values: the grid search's "
                  "optimum is as fine as its grid, the curve smooth in these")


def fit_profile(samples: Sequence[GemmSample], base: HardwareProfile) -> ProfileFit:
    """*base* (name, memory figures, sources) with its peak, per-call overhead and GEMM curve
    fitted to *samples* (all of one dtype: the profile's peak is for that dtype)."""
    dtype = _one_dtype(samples)
    overhead_s, peak, p_half, k_half = _grid_fit(samples)
    start = replace(
        base,
        peak_flops=((dtype, peak),),
        launch_overhead_s=overhead_s,
        gemm=GemmModel(
            model="table", efficiency_max=1.0, output_half_elements=p_half, k_half=k_half
        ),
    )
    profile = _refine(start, samples, dtype, overhead_s)
    smallest = min(s.flops for s in samples)
    residuals = tuple(
        _residual(s, profile, dtype, overhead_s, s.flops <= SMALL_FACTOR * smallest)
        for s in samples
    )
    return ProfileFit(profile, residuals)


def _one_dtype(samples: Sequence[GemmSample]) -> str:
    dtypes = sorted({s.dtype for s in samples})
    if len(dtypes) != 1:
        raise AtpsimError(f"fitting a profile needs GEMMs of one dtype, got {dtypes or 'no GEMMs'}")
    return dtypes[0]


def _grid_fit(samples: Sequence[GemmSample]) -> tuple[float, float, float, float]:
    """(overhead_s, E, P_half, k_half) minimising the RMS relative time error (docstring)."""
    t = np.array([s.time_s for s in samples])
    flops = np.array([s.flops for s in samples])
    outputs = np.array([float(s.batch * s.m * s.n) for s in samples])
    k = np.array([float(s.k) for s in samples])
    best: tuple[float, float, float, float, float] | None = None
    for k_half in K_HALVES:
        for log_p in LOG10_P_HALVES:
            g = outputs / (outputs + 10**log_p) * k / (k + k_half)
            overhead, inv_e = _linear_fit(t, flops / g)
            error = float(np.sqrt(np.mean(((overhead + flops / g * inv_e) / t - 1) ** 2)))
            if best is None or error < best[0]:
                best = (error, overhead, 1.0 / inv_e, 10**log_p, k_half)
    assert best is not None
    return best[1], best[2], float(f"{best[3]:.4g}"), best[4]


def _linear_fit(t: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """argmin over (a >= 0, b > 0) of sum(((a + b·x) / t - 1)^2)."""
    design = np.stack([1.0 / t, x / t], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if a < 0 or b <= 0:
        a, b = 0.0, float(np.dot(x / t, np.ones_like(t)) / np.dot(x / t, x / t))
    return float(a), float(b)


def _rate_points(
    samples: Sequence[GemmSample], overhead_s: float
) -> list[tuple[int, int, int, float]]:
    """(batch·m, n, k, kernel FLOP/s) of the GEMMs whose kernel dominates their time."""
    points = []
    for s in samples:
        kernel_s = s.time_s - overhead_s
        if kernel_s >= KERNEL_SHARE * s.time_s:
            points.append((s.batch * s.m, s.n, s.k, s.flops / kernel_s))
    return points


def _refine(
    profile: HardwareProfile, samples: Sequence[GemmSample], dtype: str, overhead_s: float
) -> HardwareProfile:
    """Refit efficiency_max and P_half with the memory roofline included, and store the kernel
    rates as the table's points (a profile without any keeps the grid's curve)."""
    points = _rate_points(samples, overhead_s)
    if not points:
        return profile
    fitted = fit_gemm_curve(profile, points, dtype)
    if fitted.gemm.efficiency_max > 1.0:
        peak = fitted.peak_flops_for(dtype) * fitted.gemm.efficiency_max
        fitted = replace(
            fitted, peak_flops=((dtype, peak),), gemm=replace(fitted.gemm, efficiency_max=1.0)
        )
    return fitted


def _curve_kernel_s(sample: GemmSample, profile: HardwareProfile, dtype: str) -> float:
    return curve_kernel_time_s(sample.m, sample.n, sample.k, sample.batch, dtype, profile)


def _residual(
    sample: GemmSample, profile: HardwareProfile, dtype: str, overhead_s: float, small: bool
) -> GemmResidual:
    rate = sample.time_s - overhead_s >= KERNEL_SHARE * sample.time_s
    role = {(True, True): "both", (True, False): "rate", (False, True): "overhead"}
    return GemmResidual(
        sample,
        predicted_s=gemm_time_s(sample.m, sample.n, sample.k, sample.batch, dtype, profile),
        curve_s=overhead_s + _curve_kernel_s(sample, profile, dtype),
        role=role.get((rate, small), "none"),
    )
