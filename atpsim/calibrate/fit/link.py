"""Fit a link's bandwidth and latency to measured collective times (profile -> fit).

On a uniform fabric (every transfer's path has the same bottleneck bandwidth B and end-to-end
latency alpha, nothing shared: a switch, or a star of CPU processes) the closed form of each
algorithm (:mod:`atpsim.collectives.closed_form`, the oracle the event engine is held to) is
linear in alpha and 1/B:

    t(op, p, n) = c_lat(op, p) · alpha + c_bw(op, p, n) · (1 / B)

e.g. ring all-reduce: ``c_lat = 2(p-1)``, ``c_bw = 2(p-1)/p · n`` (Patarasuk and Yuan 2009).
The two coefficients are read off the closed form itself (alpha = 1 s with B infinite; alpha = 0
with B = 1 B/s), so any registered algorithm fits the same way.

Which points pin which parameter (the Hockney model cannot follow a real library's protocol
switches in between): alpha is fitted to the *small* messages (size <= 16 x the smallest) and
1/B to the *large* ones (size >= the largest / 16), each by least squares on the relative error
``(predicted - measured) / measured`` with the other held, alternating until both settle (a
fixed point; a few dozen rounds). Every point, middle sizes included, gets a residual. For a
ring all-reduce, busbw = 2(p-1)/p · n / t tends to B as n grows: the fitted B is the asymptotic
bus bandwidth of nccl-tests.

Uncertainty (:meth:`LinkFit.uncertainty`, written by ``atpsim validate`` to ``fitted/fit.yaml``
beside the fitted numbers): the **least-squares covariance** of (alpha, ln B) over the fitted
points' relative errors, J = (c_lat / t, -c_bw / (B t)). The model is linear in (alpha, 1/B),
so the covariance is exact for it and costs nothing, where a bootstrap would repeat the
alternating fit for nothing more; alpha's sigma is of the value (it may be 0), B's of its log.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from atpsim.calibrate.measurements.samples import CollectiveSample
from atpsim.calibrate.uncertainty.estimate import covariance_from_jacobian
from atpsim.calibrate.uncertainty.record import FitUncertainty, record_from_covariance
from atpsim.collectives.closed_form import collective_time_s
from atpsim.errors import AtpsimError

#: A point is "small" when its size is at most this factor above the smallest, "large" when at
#: least the largest divided by it (2^4: four doublings of an nccl-tests sweep at each end).
REGIME_FACTOR = 16.0
_ROUNDS = 200
_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Residual:
    """A fit point: measured and predicted seconds; *role* is 'small', 'large', 'both' or
    'middle' (fitted by neither parameter, reported only)."""

    sample: CollectiveSample
    predicted_s: float
    role: str

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.sample.time_s) / self.sample.time_s


@dataclass(frozen=True)
class LinkFit:
    """Fitted bottleneck bandwidth (bytes/s, per direction) and end-to-end latency per transfer
    (s) of a uniform fabric, the algorithm assumed, and the residual of every point."""

    bandwidth_Bps: float
    latency_s: float
    algorithm: str
    residuals: tuple[Residual, ...]

    def rms_rel_error(self, roles: Sequence[str] = ("small", "large", "both", "middle")) -> float:
        """RMS of the relative errors of the points whose role is in *roles*."""
        errors = [r.rel_error for r in self.residuals if r.role in roles]
        return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


    def uncertainty(self, source: str = "link") -> FitUncertainty:
        """The covariance record of (``latency_s``, ``bandwidth_Bps``) (module docstring)."""
        import numpy as np

        fitted = [r for r in self.residuals if r.role in ("small", "large", "both")]
        rows = []
        for r in fitted:
            c_lat, c_bw = coefficients(r.sample.op, self.algorithm, r.sample.group_size,
                                       r.sample.nbytes)  # fmt: skip
            rows.append((c_lat / r.sample.time_s, -c_bw / (self.bandwidth_Bps * r.sample.time_s)))
        errors = [r.rel_error for r in fitted]
        covariance = covariance_from_jacobian(np.array(rows), errors, 2)
        return record_from_covariance(
            source, "covariance", COVARIANCE_WHY, ("latency_s", "bandwidth_Bps"), covariance,
            ("linear", "log"), {"latency_s": (0.0, None)},
            residual_rms=self.rms_rel_error(("small", "large", "both")),
            dof=len(errors) - 2,
        )  # fmt: skip


COVARIANCE_WHY = ("least-squares covariance of (alpha, ln B) over the fitted points' relative "
                  "errors: the model is linear in (alpha, 1/B), so it is exact for it")


def coefficients(op: str, algorithm: str, p: int, nbytes: float) -> tuple[float, float]:
    """``(c_lat, c_bw)`` with ``t = c_lat·alpha + c_bw / B`` by the closed form."""
    c_lat = collective_time_s(op, algorithm, p, nbytes, math.inf, 1.0)
    c_bw = collective_time_s(op, algorithm, p, nbytes, 1.0, 0.0)
    return c_lat, c_bw


def predict_s(
    sample: CollectiveSample, algorithm: str, bandwidth_Bps: float, latency_s: float
) -> float:
    """The closed-form time of *sample* on the fitted fabric (groups do not share links)."""
    return collective_time_s(
        sample.op, algorithm, sample.group_size, sample.nbytes, bandwidth_Bps, latency_s
    )


def fit_link(samples: Sequence[CollectiveSample], algorithm: str = "ring") -> LinkFit:
    """Fit alpha to the small messages and 1/B to the large ones (module docstring)."""
    usable = [s for s in samples if s.group_size > 1 and s.nbytes > 0]
    if len({s.nbytes for s in usable}) < 2:
        raise AtpsimError(
            "fitting a link needs collectives of at least two message sizes on groups of 2 or "
            f"more ranks; got {len(usable)} usable of {len(samples)} samples"
        )
    roles = _roles([s.nbytes for s in usable])
    coeffs = [coefficients(s.op, algorithm, s.group_size, s.nbytes) for s in usable]
    times = [s.time_s for s in usable]
    small = [i for i, r in enumerate(roles) if r in ("small", "both")]
    large = [i for i, r in enumerate(roles) if r in ("large", "both")]
    alpha, inv_b = _alternate(coeffs, times, small, large)
    if not inv_b > 0:
        raise AtpsimError(
            "the large messages do not take longer than their latency share: no bandwidth "
            "can be fitted (measure larger messages)"
        )
    bandwidth = 1.0 / inv_b
    residuals = tuple(
        Residual(s, predict_s(s, algorithm, bandwidth, alpha), role)
        for s, role in zip(usable, roles, strict=True)
    )
    return LinkFit(bandwidth, alpha, algorithm, residuals)


def _roles(sizes: Sequence[float]) -> list[str]:
    lo, hi = min(sizes), max(sizes)
    roles = []
    for n in sizes:
        is_small, is_large = n <= lo * REGIME_FACTOR, n >= hi / REGIME_FACTOR
        roles.append("both" if is_small and is_large else
                     "small" if is_small else "large" if is_large else "middle")  # fmt: skip
    return roles


def _alternate(
    coeffs: Sequence[tuple[float, float]],
    times: Sequence[float],
    small: Sequence[int],
    large: Sequence[int],
) -> tuple[float, float]:
    """Alternate the two one-parameter relative least-squares fits until they settle."""
    inv_b = _solve(coeffs, times, large, column=1, other=0.0)
    alpha = 0.0
    for _ in range(_ROUNDS):
        new_alpha = max(0.0, _solve(coeffs, times, small, column=0, other=inv_b))
        new_inv_b = _solve(coeffs, times, large, column=1, other=new_alpha)
        settled = abs(new_inv_b - inv_b) <= _TOLERANCE * abs(inv_b) and abs(
            new_alpha - alpha
        ) <= _TOLERANCE * max(abs(alpha), 1e-300)
        alpha, inv_b = new_alpha, new_inv_b
        if settled:
            break
    return alpha, inv_b


def _solve(
    coeffs: Sequence[tuple[float, float]],
    times: Sequence[float],
    indices: Sequence[int],
    column: int,
    other: float,
) -> float:
    """argmin_x sum_i ((c_i[column]·x + c_i[1-column]·other - t_i) / t_i)^2 over *indices*."""
    num = den = 0.0
    for i in indices:
        u = coeffs[i][column] / times[i]
        r = (times[i] - coeffs[i][1 - column] * other) / times[i]
        num += u * r
        den += u * u
    if den == 0.0:
        return 0.0
    return num / den
