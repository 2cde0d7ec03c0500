"""The pieces of prediction intervals on hand-made inputs: records, draws, the two estimators,
the ranking's confidence (atpsim.calibrate.uncertainty)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.estimate import (
    bootstrap_covariance,
    covariance_from_jacobian,
    residual_bootstrap,
)
from atpsim.calibrate.uncertainty.record import (
    FitUncertainty,
    ParameterSigma,
    block_diagonal,
    from_dict,
    record_from_covariance,
)
from atpsim.calibrate.uncertainty.summary import Interval, ranking_confidence
from atpsim.errors import AtpsimError


def _record(sigmas=(0.1, 2.0), rho=0.5) -> FitUncertainty:
    cov = np.array([[sigmas[0] ** 2, rho * sigmas[0] * sigmas[1]],
                    [rho * sigmas[0] * sigmas[1], sigmas[1] ** 2]])  # fmt: skip
    return record_from_covariance("t", "covariance", "why", ("rate", "delay_s"), cov,
                                  ("log", "linear"), {"delay_s": (0.0, None)})  # fmt: skip


def test_record_reads_back_what_it_writes():
    record = _record()
    again = from_dict("t", record.to_dict())
    assert again.names == ("rate", "delay_s")
    assert [p.sigma for p in again.parameters] == pytest.approx([0.1, 2.0], rel=1e-3)
    assert again.correlation[0][1] == pytest.approx(0.5)
    assert again.parameter("delay_s").lower == 0.0 and again.parameter("rate").lower is None


def test_malformed_record_is_one_clear_error():
    with pytest.raises(AtpsimError, match="malformed uncertainty record"):
        from_dict("broken.yaml", {"method": "covariance"})
    bad = {**_record().to_dict(), "method": "guess"}
    with pytest.raises(AtpsimError, match="expected method"):
        from_dict("broken.yaml", bad)


def test_perturb_is_multiplicative_in_log_space_additive_in_linear_and_clipped():
    assert ParameterSigma("b", 0.1, "log").perturb(2.0, math.log(1.5)) == pytest.approx(3.0)
    assert ParameterSigma("o", 0.1, "linear").perturb(2.0, 0.5) == pytest.approx(2.5)
    assert ParameterSigma("o", 0.1, "linear", lower=0.0).perturb(0.2, -0.5) == 0.0
    assert ParameterSigma("e", 0.1, "log", upper=1.0).perturb(0.9, 0.5) == 1.0


def test_deltas_follow_the_sigmas_and_correlation():
    """Over many standard normals the deltas have the record's sigmas and correlation."""
    record = _record(rho=0.8)
    z = np.random.default_rng(1).standard_normal((20_000, 2))
    deltas = np.array([[d["rate"], d["delay_s"]] for d in map(record.deltas, z)])
    assert deltas.std(axis=0) == pytest.approx([0.1, 2.0], rel=0.03)
    assert np.corrcoef(deltas.T)[0, 1] == pytest.approx(0.8, abs=0.02)


def test_block_diagonal_keeps_each_fits_correlation_and_no_other():
    joined = block_diagonal("both", _record(rho=0.5), _record(rho=-0.3))
    matrix = np.array(joined.correlation)
    assert matrix[0, 1] == pytest.approx(0.5) and matrix[2, 3] == pytest.approx(-0.3)
    assert matrix[0, 2] == matrix[1, 3] == 0.0 and len(joined.parameters) == 4


def test_draws_are_seeded_per_fit_nested_and_validated():
    a, b = Draws(8, seed=3), Draws(32, seed=3)
    assert np.array_equal(a.normals("paper-fit", 7, 5), b.normals("paper-fit", 7, 5))
    assert not np.array_equal(a.normals("paper-fit", 7, 5), a.normals("nccl:a100", 7, 5))
    assert not np.array_equal(a.normals("paper-fit", 7, 5), Draws(8, 4).normals("paper-fit", 7, 5))
    for bad in (0, -2, True, 2.5):
        with pytest.raises(AtpsimError, match="uncertainty"):
            Draws(bad)  # type: ignore[arg-type]
    with pytest.raises(AtpsimError, match="seed"):
        Draws(4, seed=-1)


def test_covariance_of_a_straight_line_is_the_textbook_one():
    """y = a + b x: Var(b) = s^2 / sum((x - mean x)^2) (Seber and Wild, Section 2.1)."""
    x = np.arange(6.0)
    noise = np.array([0.1, -0.2, 0.05, 0.15, -0.1, 0.0])
    design = np.stack([np.ones_like(x), x], axis=1)
    fit, *_ = np.linalg.lstsq(design, 1 + 2 * x + noise, rcond=None)
    residuals = design @ fit - (1 + 2 * x + noise)
    cov = covariance_from_jacobian(design, residuals)
    s2 = np.sum(residuals**2) / (6 - 2)
    assert cov[1, 1] == pytest.approx(s2 / np.sum((x - x.mean()) ** 2))
    assert not covariance_from_jacobian(design, np.zeros(6)).any()


def test_bootstrap_of_zero_residuals_is_zero_and_spreads_with_them():
    x = np.arange(8.0)

    def refit(y):
        return np.polyfit(x, y, 1)

    exact = 1 + 2 * x
    zero = residual_bootstrap(exact, np.zeros(8), refit, replicates=20)
    assert np.abs(bootstrap_covariance(zero)).max() < 1e-25
    pattern = np.array([0.1, -0.1, 0.2, -0.2, 0.05, -0.05, 0.0, 0.0])
    small = np.diag(bootstrap_covariance(residual_bootstrap(exact, pattern, refit, replicates=50)))
    large = np.diag(bootstrap_covariance(residual_bootstrap(exact, 3 * pattern, refit, replicates=50)))
    assert large == pytest.approx(9 * small)  # same seed, same resamples: exactly 3x the spread


def test_interval_and_ranking_confidence_by_hand():
    assert Interval.of([1.0, 2.0, 3.0, 4.0, 5.0]) == Interval(1.4, 3.0, 4.6)
    # 4 draws x 3 candidates: candidate 0 wins draws 0, 1 and 3 (a tie); loses draw 2 by 10%
    times = np.array([[1.0, 1.2, 2.0], [1.0, 1.1, 2.0], [1.1, 1.0, 2.0], [1.0, 1.0, 2.0]])
    c = ranking_confidence(times, 0)
    assert c.p_best == 0.75 and c.draws == 4
    assert c.expected_loss_pct == pytest.approx(2.5) and c.worst_loss_pct == pytest.approx(10.0)
    assert c.p_best_by_candidate == (0.75, 0.5, 0.0)
