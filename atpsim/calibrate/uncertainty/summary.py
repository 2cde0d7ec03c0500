"""Simulated draws reduced to what a user acts on: percentiles, and a ranking's confidence.

Percentiles are numpy's (linear interpolation between order statistics) of the N drawn values,
the point estimate (draw 0) not among them. A ranking's confidence compares candidates draw by
draw (the same parameter values for every candidate: common random numbers): the probability
that the chosen candidate is the fastest is the share of draws in which it is (a tie counts as
won), and the expected loss of choosing it is the mean over draws of
``(its time - that draw's fastest time) / that draw's fastest time``, in percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The percentiles every interval reports.
PERCENTILES = (10, 50, 90)


@dataclass(frozen=True)
class Interval:
    """The 10th, 50th and 90th percentiles of a quantity over the draws."""

    p10: float
    p50: float
    p90: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval:
        p10, p50, p90 = (float(v) for v in np.percentile(np.asarray(values, float), PERCENTILES))
        return cls(p10, p50, p90)


@dataclass(frozen=True)
class RankingConfidence:
    """How sure the choice of candidate *chosen* is under *draws* draws: *p_best* the share of
    draws in which it is the fastest, *expected_loss_pct* and *worst_loss_pct* the mean and the
    largest step-time loss (percent) of choosing it instead of each draw's fastest, and
    *p_best_by_candidate* every candidate's share."""

    chosen: int
    draws: int
    p_best: float
    expected_loss_pct: float
    worst_loss_pct: float
    p_best_by_candidate: tuple[float, ...]


def ranking_confidence(times_s: np.ndarray, chosen: int) -> RankingConfidence:
    """*times_s*: draws x candidates step times (seconds); *chosen*: the column picked."""
    times = np.atleast_2d(np.asarray(times_s, dtype=float))
    fastest = times.min(axis=1)
    wins = times <= fastest[:, None]
    loss = (times[:, chosen] - fastest) / fastest * 100.0
    return RankingConfidence(
        chosen=chosen,
        draws=len(times),
        p_best=float(wins[:, chosen].mean()),
        expected_loss_pct=float(loss.mean()),
        worst_loss_pct=float(loss.max()),
        p_best_by_candidate=tuple(float(w) for w in wins.mean(axis=0)),
    )
