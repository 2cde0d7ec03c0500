"""Fit the memory-bound ops' bandwidth to measured non-GEMM op times (profile -> fit).

atpsim times every non-GEMM op of a layer (LayerNorm, softmax, GeLU, residual adds; see
:mod:`atpsim.parallel.atp`) as memory-bound (:mod:`atpsim.compute.timing`):

    t = launch_overhead + bytes_moved / (memory_bandwidth · memory_efficiency)

On a GPU that is the datasheet bandwidth times an achievable fraction. On a CPU core these ops
are often bound by arithmetic instead (GeLU's erf, softmax's exp), so the bandwidth they reach
must be measured: a table of (op, bytes_moved, time) — ideally the layer's own non-GEMM ops at
the layer's sizes, with atpsim's byte counts. With the per-call overhead ``o`` from the GEMM fit,
the effective bandwidth is the one that makes the measured ops' total time exact:

    B_eff = sum(bytes_moved_i) / sum(t_i - o)

(weighting each op by its time, as a layer does; a least-squares fit on relative errors would
let the many cheap ops outvote the few expensive ones). The profile gets ``memory_bandwidth_Bps
= B_eff`` and ``memory_efficiency = 1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from atpsim.errors import AtpsimError


@dataclass(frozen=True)
class MemoryOpSample:
    """A measured non-GEMM op moving *bytes_moved* bytes (atpsim's count) in *time_s*."""

    op: str
    bytes_moved: float
    time_s: float
    label: str = ""


@dataclass(frozen=True)
class MemoryFit:
    """The effective bandwidth (bytes/s), the overhead it assumed, and each op's residual
    ``(sample, predicted_s)``."""

    bandwidth_Bps: float
    overhead_s: float
    residuals: tuple[tuple[MemoryOpSample, float], ...]

    def rms_rel_error(self) -> float:
        errors = [(p - s.time_s) / s.time_s for s, p in self.residuals]
        return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


def fit_memory_bandwidth(samples: Sequence[MemoryOpSample], overhead_s: float) -> MemoryFit:
    """B_eff of *samples* given the per-call *overhead_s* (module docstring)."""
    moved = sum(s.bytes_moved for s in samples)
    busy = sum(s.time_s - overhead_s for s in samples)
    if not samples or moved <= 0 or busy <= 0:
        raise AtpsimError(
            "the memory-bound ops take no longer than their per-call overhead: no bandwidth "
            f"can be fitted ({len(samples)} ops, {moved:g} bytes, overhead {overhead_s:g} s)"
        )
    bandwidth = moved / busy
    residuals = tuple((s, overhead_s + s.bytes_moved / bandwidth) for s in samples)
    return MemoryFit(bandwidth, overhead_s, residuals)
