"""Seeded parameter draws, the same for every point of a sweep (common random numbers).

Draw 0 is the fitted values (the point estimate, simulated exactly as without draws); draws
1..N perturb each fitted parameter by its recorded uncertainty. The standard normals of draw i
for a fit depend only on the seed, the fit's name and i, never on the point, the order of the
points or the process that simulates them: every point of a sweep (every mesh of a plan) sees
the same parameter values in draw i, so the differences between points are differences of the
configuration, not of the draws (common random numbers; e.g. Glasserman, Monte Carlo Methods
in Financial Engineering, Section 4.2), and a sweep split over worker processes draws exactly
what one process would.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from atpsim.errors import AtpsimError

#: The most draws one request may ask for: each costs a simulation of every point, and each
#: drawn topology stays memoized for the next point (about 0.3 MB per draw on ic1, measured);
#: a thousand pin p10 and p90 to about a percentile.
MAX_DRAWS = 1_000
#: The largest seed: a sweep's results keep it in an int64 column.
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Draws:
    """*n* parameter draws (besides the point estimate) from *seed*."""

    n: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_draws(self.n, self.seed)

    def normals(self, source: str, k: int, index: int) -> np.ndarray:
        """The *k* standard normals of draw *index* (1..n) for the fit *source*."""
        if not 1 <= index <= self.n:
            raise AtpsimError(f"draw index {index} outside 1..{self.n}", key="uncertainty")
        return _normals(self.seed, source, k, self.n)[index - 1]

    def indices(self) -> range:
        """The random draws' indices, 1..n (0 is the point estimate)."""
        return range(1, self.n + 1)


def check_draws(n: object, seed: object = 0, key: str | None = None) -> None:
    """A clear error unless *n* is a whole number of draws in 1..MAX_DRAWS and *seed* in
    0..MAX_SEED."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_DRAWS:
        raise AtpsimError(f"expected a number of parameter draws from 1 to {MAX_DRAWS}, got {n!r}",
                          key=key, param="uncertainty")  # fmt: skip
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise AtpsimError(f"expected a seed from 0 to 2^63 - 1, got {seed!r}",
                          key=key, param="seed")  # fmt: skip


@lru_cache(maxsize=256)
def _normals(seed: int, source: str, k: int, n: int) -> np.ndarray:
    """An n x k array of standard normals from a generator seeded by (seed, CRC-32 of
    *source*): stable across processes and Python versions (no salted hash)."""
    rng = np.random.default_rng([seed, zlib.crc32(source.encode())])
    normals = rng.standard_normal((n, k))
    normals.setflags(write=False)
    return normals
