"""A fit's uncertainty as data: each parameter's 1-sigma and the correlation between them.

Every fit that sets a number the simulator uses records, beside that number, how well the data
pinned it (:mod:`atpsim.calibrate.uncertainty`). The record is a block of YAML::

    uncertainty:
      method: covariance            # or bootstrap (how the sigmas were estimated)
      why: "..."                    # why that method suits this fit
      residual_rms: 0.071           # RMS of the fit's residuals (their own unit: log or relative)
      dof: 4                        # residuals minus fitted parameters
      replicates: 0                 # bootstrap refits (0 for covariance)
      parameters:                   # name: 1-sigma, the space it is in, optional bounds
        gemm_efficiency_max: {sigma: 0.021, space: log, lower: 0.2, upper: 0.95}
        layer_overhead_s: {sigma: 0.15, space: log, lower: 1.0e-06, upper: 0.02}
      correlation:                  # pairs "a ~ b"; a pair not listed is uncorrelated
        gemm_efficiency_max ~ layer_overhead_s: -0.4

``space: log`` means sigma is that of ln(value) (positive parameters spanning decades, fitted
in log space); ``linear`` that of the value itself (a parameter that may sit at 0). The record
holds no values: a draw perturbs the value the simulator actually uses (so with every sigma 0
a draw *is* the point estimate), ``value · exp(d)`` in log space and ``value + d`` in linear
space, clipped to the bounds, with ``d = sigma ⊙ (C^½ z)``, C the correlation and z standard
normals (:meth:`FitUncertainty.deltas`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from atpsim.errors import AtpsimError

METHODS = ("covariance", "bootstrap")
#: How a correlated pair of parameters is written: ``a ~ b``.
PAIR = " ~ "
SPACES = ("log", "linear")


@dataclass(frozen=True)
class ParameterSigma:
    """One parameter's 1-sigma *sigma* in *space* (``log``: of ln value), the bounds a drawn
    value is clipped to (the fit's own bounds; None: unbounded), and its *target*: what the
    value sets, ``preset:NAME:KEY`` (a preset's builder parameter), ``profile:NAME:KEY`` (a
    hardware profile's field, ``gemm.`` for the GEMM curve's), ``nccl:NAME:KEY`` (an NCCL
    profile's) or ``link:KEY`` (every link of a fitted topology file)."""

    name: str
    sigma: float
    space: str = "log"
    lower: float | None = None
    upper: float | None = None
    target: str = ""

    def perturb(self, value: float, delta: float) -> float:
        """*value* moved by *delta* (in this parameter's space), clipped to the bounds."""
        moved = value * math.exp(delta) if self.space == "log" else value + delta
        if self.lower is not None:
            moved = max(moved, self.lower)
        if self.upper is not None:
            moved = min(moved, self.upper)
        return moved


@dataclass(frozen=True)
class FitUncertainty:
    """The uncertainty of one fit's parameters (module docstring). *source* names the fit
    (``paper-fit``, ``nccl:a100``, ``gemm:a100-sxm4-80gb``, a fitted folder): draws of one
    source are drawn together, from their own stream of random numbers."""

    source: str
    method: str
    why: str
    parameters: tuple[ParameterSigma, ...]
    correlation: tuple[tuple[float, ...], ...]
    residual_rms: float = 0.0
    dof: int = 0
    replicates: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def parameter(self, name: str) -> ParameterSigma:
        return {p.name: p for p in self.parameters}[name]

    def is_zero(self) -> bool:
        """Whether every sigma is 0 (the fit's residuals were: a draw is the point estimate)."""
        return all(p.sigma == 0.0 for p in self.parameters)

    def deltas(self, z: ArrayLike) -> dict[str, float]:
        """Per parameter, the perturbation ``sigma ⊙ (C^½ z)`` for standard normals *z*."""
        root = _sqrt_psd(np.array(self.correlation, dtype=float))
        mixed = root @ np.asarray(z, dtype=float)
        return {p.name: float(p.sigma * mixed[i]) for i, p in enumerate(self.parameters)}

    def to_dict(self) -> dict[str, Any]:
        """The YAML block (module docstring), numbers rounded to 4 significant digits."""
        parameters = {}
        for p in self.parameters:
            entry: dict[str, Any] = {"sigma": _g(p.sigma), "space": p.space}
            if p.lower is not None:
                entry["lower"] = p.lower
            if p.upper is not None:
                entry["upper"] = p.upper
            if p.target:
                entry["target"] = p.target
            parameters[p.name] = entry
        return {
            "method": self.method,
            "why": self.why,
            "residual_rms": _g(self.residual_rms),
            "dof": self.dof,
            "replicates": self.replicates,
            "parameters": parameters,
            "correlation": {
                f"{a.name}{PAIR}{b.name}": round(self.correlation[i][j], 3)
                for i, a in enumerate(self.parameters) for j, b in enumerate(self.parameters)
                if i < j and round(self.correlation[i][j], 3) != 0.0
            },
        }  # fmt: skip


def from_dict(source: str, data: Any, target_prefix: str = "") -> FitUncertainty:
    """The record of a YAML *data* block (an AtpsimError naming *source* if malformed); a
    parameter without a ``target`` gets *target_prefix* + its name."""
    try:
        parameters = tuple(
            ParameterSigma(str(name), float(p["sigma"]), str(p.get("space", "log")),
                           _optional(p.get("lower")), _optional(p.get("upper")),
                           str(p.get("target", f"{target_prefix}{name}")))
            for name, p in dict(data["parameters"]).items()
        )  # fmt: skip
        correlation = _correlation([p.name for p in parameters], data.get("correlation") or {})
        record = FitUncertainty(
            source, str(data["method"]), str(data.get("why", "")), parameters, correlation,
            float(data.get("residual_rms", 0.0)), int(data.get("dof", 0)),
            int(data.get("replicates", 0)),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise AtpsimError(f"malformed uncertainty record: {error}", source=source,
                          key="uncertainty") from None  # fmt: skip
    _check(record)
    return record


def _correlation(names: list[str], pairs: Mapping[str, Any]) -> tuple[tuple[float, ...], ...]:
    """The full matrix from the listed pairs (the identity elsewhere)."""
    index = {name: i for i, name in enumerate(names)}
    matrix = np.identity(len(names))
    for pair, value in dict(pairs).items():
        a, b = (part.strip() for part in str(pair).split(PAIR.strip()))
        matrix[index[a], index[b]] = matrix[index[b], index[a]] = float(value)
    return tuple(tuple(float(c) for c in row) for row in matrix)


def _check(record: FitUncertainty) -> None:
    n = len(record.parameters)
    if record.method not in METHODS:
        raise AtpsimError(f"expected method one of {METHODS}, got {record.method!r}",
                          source=record.source, key="uncertainty.method")  # fmt: skip
    if len(record.correlation) != n or any(len(row) != n for row in record.correlation):
        raise AtpsimError(f"expected a {n}x{n} correlation matrix", source=record.source,
                          key="uncertainty.correlation")  # fmt: skip
    for p in record.parameters:
        if p.space not in SPACES or not p.sigma >= 0:
            raise AtpsimError(f"expected sigma >= 0 and space log or linear, got {p}",
                              source=record.source, key=f"uncertainty.parameters.{p.name}")  # fmt: skip


def record_from_covariance(
    source: str, method: str, why: str, names: Sequence[str], covariance: ArrayLike,
    spaces: Sequence[str] | str = "log",
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    *, residual_rms: float = 0.0, dof: int = 0, replicates: int = 0,
    targets: Mapping[str, str] | None = None,
) -> FitUncertainty:  # fmt: skip
    """The record of a *covariance* matrix of *names* (in *spaces*, with *targets*): sigmas
    from its diagonal, the correlation from the rest (0 where a sigma is 0)."""
    cov = np.atleast_2d(np.asarray(covariance, dtype=float))
    sigma = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    outer = np.outer(sigma, sigma)
    corr = np.divide(cov, outer, out=np.zeros_like(cov), where=outer > 0)
    np.fill_diagonal(corr, 1.0)
    corr = np.clip(corr, -1.0, 1.0)
    spaces = [spaces] * len(names) if isinstance(spaces, str) else list(spaces)
    bounds, targets = bounds or {}, targets or {}
    parameters = tuple(
        ParameterSigma(name, float(sigma[i]), spaces[i], *bounds.get(name, (None, None)),
                       target=targets.get(name, ""))
        for i, name in enumerate(names)
    )
    rows = tuple(tuple(float(c) for c in row) for row in corr)
    return FitUncertainty(source, method, why, parameters, rows, float(residual_rms), int(dof),
                          int(replicates))  # fmt: skip


def block_diagonal(source: str, *records: FitUncertainty) -> FitUncertainty:
    """One record of several fits' parameters, uncorrelated across fits (each fit's own
    correlation kept): fits of disjoint data, drawn as one source."""
    parameters = tuple(p for r in records for p in r.parameters)
    n, rows, start = len(parameters), [], 0
    for r in records:
        k = len(r.parameters)
        for row in r.correlation:
            rows.append(tuple([0.0] * start + list(row) + [0.0] * (n - start - k)))
        start += k
    methods = {r.method for r in records}
    return FitUncertainty(source, methods.pop() if len(methods) == 1 else "covariance",
                          "; ".join(f"{r.source}: {r.why}" for r in records), parameters,
                          tuple(rows), max((r.residual_rms for r in records), default=0.0),
                          sum(r.dof for r in records))  # fmt: skip


def _sqrt_psd(matrix: np.ndarray) -> np.ndarray:
    """A square root R of a symmetric positive semi-definite *matrix* (R R^T = matrix), by its
    eigendecomposition (a rounded correlation may be singular, where Cholesky fails)."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def _g(value: float) -> float:
    return float(f"{value:.4g}")
