"""A collective's fixed cost and NVSwitch bus bandwidth from a measured NCCL all-reduce sweep.

Source: shared/reference/measured-data.md, "All-reduce", Azure ND A100 v4 (8 x A100-SXM4-80GB
on NVSwitch, NCCL 2.18.5, all_reduce_perf in place; AZ Azure_Results/ND_A100_v4_results.md):
bus bandwidth by message size. nccl-tests sizes are powers of two, so "67 MB" is 64 MiB and
"1 GB" is 1 GiB. With busbw = algbw · 2(n-1)/n, each row gives the time of one all-reduce:

    t(S) = 2(n-1)/n · S / busbw(S)

and the affine model ``t = t0 + 2(n-1)/n · S / B`` (a fixed per-call cost t0, then the bus at
B) is fitted by least squares on relative time errors, over the rows from 8 MiB up (the
layer's tensors are 16-400 MiB; 1 MiB sits in NCCL's low-latency protocol regime). It gives
t0 ~ 0.1 ms and B ~ 218 GB/s (7% RMS): the per-collective overhead of the paper-stack profile
and IC3's effective NVLink rate, both measured, not fitted to the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SOURCE = (
    "measured-data.md 'All-reduce', Azure ND A100 v4, 8 x A100-SXM4-80GB NVSwitch, NCCL 2.18.5, "
    "all_reduce_perf in place [M] (AZ Azure_Results/ND_A100_v4_results.md)"
)
MIB = 2**20
#: (message bytes per rank, measured bus bandwidth in bytes/s).
AZURE_A100_ALLREDUCE: tuple[tuple[int, float], ...] = (
    (1 * MIB, 36.22e9),
    (8 * MIB, 89.99e9),
    (64 * MIB, 166.63e9),
    (128 * MIB, 174.18e9),
    (256 * MIB, 213.87e9),
    (512 * MIB, 221.58e9),
    (1024 * MIB, 228.10e9),
    (8192 * MIB, 231.58e9),
)
N_RANKS = 8
MIN_FIT_BYTES = 8 * MIB


@dataclass(frozen=True)
class CollectiveFit:
    """``t = overhead_s + 2(n-1)/n · bytes / bus_Bps`` and its RMS relative error."""

    overhead_s: float
    bus_Bps: float
    rms_relative_error: float

    def time_s(self, nbytes: float, n_ranks: int = N_RANKS) -> float:
        return self.overhead_s + _bus_factor(n_ranks) * nbytes / self.bus_Bps


def _bus_factor(n_ranks: int) -> float:
    """All-reduce's bus factor 2(n-1)/n (nccl-tests)."""
    return 2.0 * (n_ranks - 1) / n_ranks


def measured_times_s(rows: tuple[tuple[int, float], ...] = AZURE_A100_ALLREDUCE) -> np.ndarray:
    """Time of each measured all-reduce: 2(n-1)/n · bytes / busbw."""
    return np.array([_bus_factor(N_RANKS) * nbytes / busbw for nbytes, busbw in rows])


def fit_collective(
    rows: tuple[tuple[int, float], ...] = AZURE_A100_ALLREDUCE, min_bytes: int = MIN_FIT_BYTES
) -> CollectiveFit:
    """Least squares of (t0 + a·x) / t - 1 over the rows of at least *min_bytes*, where x is
    the bus bytes 2(n-1)/n · S; linear in (t0, a), so solved exactly (no iteration)."""
    kept = tuple(row for row in rows if row[0] >= min_bytes)
    times = measured_times_s(kept)
    bus_bytes = np.array([_bus_factor(N_RANKS) * nbytes for nbytes, _ in kept])
    design = np.column_stack([1.0 / times, bus_bytes / times])
    (overhead_s, seconds_per_byte), *_ = np.linalg.lstsq(design, np.ones(len(kept)), rcond=None)
    fit = CollectiveFit(float(overhead_s), float(1.0 / seconds_per_byte), 0.0)
    errors = np.array([fit.time_s(n) for n, _ in kept]) / times - 1.0
    return CollectiveFit(fit.overhead_s, fit.bus_Bps, float(np.sqrt(np.mean(errors**2))))
