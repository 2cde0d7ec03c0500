"""Two ways a fit estimates how well its data pin its parameters.

- **Least-squares covariance** (:func:`covariance_from_jacobian`): at the optimum, with J the
  Jacobian of the residuals with respect to the parameters and s^2 = sum(r^2) / (m - p) the
  residual variance (m residuals, p parameters), Cov = s^2 (J^T J)^-1 (the Gauss-Newton
  approximation; e.g. Seber and Wild, Nonlinear Regression, Section 2.1). One Jacobian costs p
  evaluations of the model, so it suits fits whose every evaluation is expensive (the paper
  fit simulates 32 training steps per evaluation) and whose residuals are smooth in the
  parameters near the optimum. It says nothing about a parameter pressed against a bound.
- **Residual bootstrap** (:func:`residual_bootstrap`): resample the fit's residuals with
  replacement, add them to the fitted predictions, refit, and take the spread of the refitted
  parameters (Efron and Tibshirani, An Introduction to the Bootstrap, Section 9.5). It costs a
  refit per replicate, so it suits cheap fits, and it follows what the covariance cannot: a
  parameter at a bound (a refit can leave it or not), a model that switches branches (NCCL's
  protocol choice), residuals far from normal.

Both give a covariance matrix; :func:`atpsim.calibrate.uncertainty.record.record_from_covariance`
turns it into the record a fit writes beside its values. Zero residuals give a zero covariance
(a perfect fit pins its parameters): the intervals then collapse to the point estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

#: Replicates of a residual bootstrap, and its seed (fixed: a refit writes the same file).
REPLICATES = 200
SEED = 0


def covariance_from_jacobian(
    jacobian: ArrayLike, residuals: ArrayLike, n_params: int | None = None
) -> np.ndarray:
    """s^2 (J^T J)^+ with s^2 = sum(r^2) / max(m - p, 1) (module docstring); the
    pseudo-inverse leaves a parameter no residual depends on at variance 0 rather than
    failing (such a parameter is reported, not drawn: its data say nothing)."""
    jac = np.atleast_2d(np.asarray(jacobian, dtype=float))
    r = np.asarray(residuals, dtype=float)
    p = n_params if n_params is not None else jac.shape[1]
    s2 = float(np.sum(r * r)) / max(len(r) - p, 1)
    return s2 * np.linalg.pinv(jac.T @ jac)


def numerical_jacobian(
    fn: Callable[[np.ndarray], np.ndarray], x: ArrayLike, step: float = 1e-4
) -> np.ndarray:
    """Central differences of the residual function *fn* at *x* (absolute *step* per
    coordinate, scaled by max(1, |x_i|))."""
    x0 = np.asarray(x, dtype=float)
    columns = []
    for i in range(len(x0)):
        h = step * max(1.0, abs(x0[i]))
        up, down = x0.copy(), x0.copy()
        up[i] += h
        down[i] -= h
        columns.append((np.asarray(fn(up)) - np.asarray(fn(down))) / (2 * h))
    return np.stack(columns, axis=1)


def residual_bootstrap(
    fitted: ArrayLike,
    residuals: ArrayLike,
    refit: Callable[[np.ndarray], Sequence[float]],
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> np.ndarray:
    """The refitted parameters (one row per replicate) of *replicates* synthetic data sets
    ``fitted + resampled residuals`` (in whatever space the fit's residuals are: log for a
    log fit); *refit* maps one data set to its parameters. Deterministic for a *seed*."""
    rng = np.random.default_rng(seed)
    base, r = np.asarray(fitted, dtype=float), np.asarray(residuals, dtype=float)
    rows = [refit(base + rng.choice(r, size=len(r), replace=True)) for _ in range(replicates)]
    return np.array(rows, dtype=float)


def bootstrap_covariance(replicates: np.ndarray) -> np.ndarray:
    """The sample covariance of bootstrap replicates (rows), 0 for a single replicate."""
    rows = np.atleast_2d(replicates)
    if len(rows) < 2:
        return np.zeros((rows.shape[1], rows.shape[1]))
    return np.atleast_2d(np.cov(rows, rowvar=False))
