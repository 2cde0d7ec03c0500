"""Fit the memory-bound ops' bandwidth to measured non-GEMM op times (profile -> fit).

atpsim times every non-GEMM op of a layer (LayerNorm, softmax, GeLU, dropout, residual adds;
see :mod:`atpsim.parallel.atp`) as memory-bound (:mod:`atpsim.compute.timing`):

    t = launch_overhead + bytes_moved / (memory_bandwidth · memory_efficiency[class])

On a GPU that is the datasheet bandwidth times an achievable fraction, about the same for
every fused kernel. On a CPU core, or with unfused eager ops, the classes differ by an order
of magnitude (GeLU's backward evaluates erf and exp per element, a residual add only streams),
so each class's bandwidth is measured: a table of (op, bytes_moved, time), the layer's own
non-GEMM ops at the layer's sizes with atpsim's byte counts, each op's class given by
:func:`atpsim.compute.timing.memory_op_class`. With the per-call overhead ``o`` from the GEMM
fit, a set of ops' effective bandwidth is the one that makes their total time exact:

    B = sum(bytes_moved_i) / sum(t_i - o)

(weighting each op by its time, as a layer does; a least-squares fit on relative errors would
let the many cheap ops outvote the few expensive ones). It is taken over every op (the
fallback for classes not measured) and over each class. A class whose ops take no longer than
the overhead gets no bandwidth of its own.

Uncertainty (:meth:`MemoryFit.uncertainty`): B is a ratio estimator, the least-squares slope of
busy time on bytes through the origin with variance proportional to bytes; its standard
variance (Cochran, Sampling Techniques, Section 6.4) gives
``Var(ln B) = n s^2 / (sum(t - o))^2`` with ``s^2 = sum(e_i^2) / (n - 1)``,
``e_i = (t_i - o) - bytes_i / B``: a **least-squares covariance**, closed form and free. The
classes are fitted to disjoint ops, so they are drawn independently (zero correlation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from atpsim.calibrate.measurements.samples import MemoryOpSample
from atpsim.calibrate.uncertainty.record import FitUncertainty, ParameterSigma
from atpsim.errors import AtpsimError


@dataclass(frozen=True)
class MemoryFit:
    """The effective bandwidth of all ops and of each class (bytes/s), the overhead it
    assumed, and each op's residual ``(sample, predicted_s)``."""

    bandwidth_Bps: float
    overhead_s: float
    residuals: tuple[tuple[MemoryOpSample, float], ...]
    class_bandwidth_Bps: tuple[tuple[str, float], ...] = ()

    def bandwidth_for(self, op_class: str) -> float:
        """The class's own bandwidth, else that of all ops."""
        return dict(self.class_bandwidth_Bps).get(op_class, self.bandwidth_Bps)

    def rms_rel_error(self, op_class: str | None = None) -> float:
        """RMS of ``(predicted - measured) / measured`` over all ops or one class's."""
        errors = [
            (p - s.time_s) / s.time_s
            for s, p in self.residuals
            if op_class is None or s.op_class == op_class
        ]
        return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


    def log_sigma(self, op_class: str | None = None) -> float:
        """The 1-sigma of ln B of all ops or one class (module docstring; 0 for one op)."""
        members = [s for s, _ in self.residuals if op_class is None or s.op_class == op_class]
        bandwidth = self.bandwidth_Bps if op_class is None else self.bandwidth_for(op_class)
        busy = sum(s.time_s - self.overhead_s for s in members)
        if len(members) < 2 or busy <= 0:
            return 0.0
        errors = [(s.time_s - self.overhead_s) - s.bytes_moved / bandwidth for s in members]
        s2 = sum(e * e for e in errors) / (len(members) - 1)
        return math.sqrt(len(members) * s2) / busy

    def uncertainty(self) -> FitUncertainty:
        """The record of the profile fields this fit sets, each with its log sigma, bounded to
        (0, 1], uncorrelated (module docstring)."""
        names = ["memory_efficiency", *(f"memory_efficiency_by_class.{c}"
                                        for c, _ in self.class_bandwidth_Bps)]  # fmt: skip
        sigmas = [self.log_sigma(), *(self.log_sigma(c) for c, _ in self.class_bandwidth_Bps)]
        parameters = tuple(ParameterSigma(n, s, "log", 0.0, 1.0) for n, s in zip(names, sigmas, strict=True))
        identity = tuple(tuple(1.0 if i == j else 0.0 for j in range(len(names)))
                         for i in range(len(names)))  # fmt: skip
        return FitUncertainty("memory", "covariance", RATIO_WHY, parameters, identity,
                              self.rms_rel_error(), len(self.residuals) - len(names))  # fmt: skip


RATIO_WHY = ("the ratio estimator's least-squares variance n s^2 / (sum(t - o))^2 of ln B per "
             "class: closed form; classes fitted to disjoint ops are drawn independently")


def effective_bandwidth_Bps(samples: Sequence[MemoryOpSample], overhead_s: float) -> float | None:
    """``sum(bytes) / sum(t - o)`` of *samples*; None when they are no slower than *o*."""
    moved = sum(s.bytes_moved for s in samples)
    busy = sum(s.time_s - overhead_s for s in samples)
    return moved / busy if samples and moved > 0 and busy > 0 else None


def fit_memory_bandwidth(samples: Sequence[MemoryOpSample], overhead_s: float) -> MemoryFit:
    """The bandwidth of all *samples* and of each class, given the per-call *overhead_s*
    (module docstring)."""
    overall = effective_bandwidth_Bps(samples, overhead_s)
    if overall is None:
        raise AtpsimError(
            "the memory-bound ops take no longer than their per-call overhead: no bandwidth "
            f"can be fitted ({len(samples)} ops, overhead {overhead_s:g} s)"
        )
    by_class: dict[str, float] = {}
    for op_class in sorted({s.op_class for s in samples}):
        members = [s for s in samples if s.op_class == op_class]
        bandwidth = effective_bandwidth_Bps(members, overhead_s)
        if bandwidth is not None:
            by_class[op_class] = bandwidth
    fit = MemoryFit(overall, overhead_s, (), tuple(by_class.items()))
    residuals = tuple(
        (s, overhead_s + s.bytes_moved / fit.bandwidth_for(s.op_class)) for s in samples
    )
    return MemoryFit(overall, overhead_s, residuals, fit.class_bandwidth_Bps)
