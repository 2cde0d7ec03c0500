"""GEMM time from its shape: a fitted efficiency curve, a roofline, and measured corrections.

A GEMM ``C[m, n] = A[m, k] @ B[k, n]`` repeated *batch* times does ``2·batch·m·n·k`` FLOPs and
moves at least ``dtype_bytes·batch·(m·k + k·n + m·n)`` bytes. Its kernel time is

    t_compute = flops / (peak · efficiency(m, n, k, batch))
    t_memory  = bytes / (memory bandwidth · memory_efficiency)
    t_kernel  = (t_compute^p + t_memory^p)^(1/p) / correction(m, n, k, batch)

and ``gemm_time_s`` adds the profile's launch overhead. The efficiency curve is

    efficiency = efficiency_max · P / (P + output_half_elements) · k / (k + k_half),
    P = batch · m · n (output elements: the parallel work the GPU spreads over its SMs)

so small outputs (few tiles for the SMs: what small chunks and large meshes make) and short
k loops (pipeline prologue and epilogue per tile) run below the large-GEMM plateau, and the
smooth maximum with exponent p (*smoothness*) lets compute and memory traffic overlap
imperfectly near the roofline's ridge, where skinny GEMMs sit.

``correction`` (profiles with ``gemm.model: table``) pulls the curve onto measured points:
``ln correction = Σ w_i ln r_i / (1 + Σ w_i)`` with ``r_i`` = measured / curve at point i and
``w_i = (radius / d_i)^2``, ``d_i`` the distance in octaves between the shapes
``(log2(batch·m), log2 n, log2 k)``. It equals ``r_i`` at a measured shape, and one radius from a
lone point it is halfway back to 1; the result never exceeds the peak or the memory bandwidth
(roofline).

The A100 curve was fitted (least squares in log rate, ``k_half`` fixed at 128: four 32-deep
k tiles) to the cuBLASLt rows of ``shared/reference/measured-data.md``; its RMS error is ~7%
before correction (it cannot follow the step from 1024³ to 2048³ and the plateau after it),
about 0 at the measured points after.

FP8 GEMMs (``dtype="fp8"``: Transformer Engine's linears in FP8 training) are timed by the same
curve and the same measured corrections at the profile's FP8 peak, their operands one byte and
their output bf16 (:data:`OUTPUT_DTYPE`): a derived efficiency, not a fixed speed-up (no FP8
GEMM was measured for a bundled profile; the profile's ``sources.gemm_fp8`` says so). A
profile without an FP8 peak refuses them (:meth:`~atpsim.compute.hardware.HardwareProfile.
peak_flops_for`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import DTYPE_BYTES

_WEIGHT_POWER = 2
#: The dtype a GEMM writes where it is not its operands' (Transformer Engine's FP8 GEMMs
#: write bf16).
OUTPUT_DTYPE = {"fp8": "bf16"}


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """FLOPs of a (batched) GEMM, 2 per multiply-add."""
    return 2.0 * batch * m * n * k


def gemm_bytes(m: int, n: int, k: int, batch: int, dtype: str) -> float:
    """Bytes a GEMM must read (A, B) and write (C) at least once, its output in
    :data:`OUTPUT_DTYPE` where that differs from the operands' *dtype*."""
    if dtype in OUTPUT_DTYPE:
        out = DTYPE_BYTES[OUTPUT_DTYPE[dtype]]
        return float(batch) * (DTYPE_BYTES[dtype] * (m * k + k * n) + out * m * n)
    return float(DTYPE_BYTES[dtype]) * batch * (m * k + k * n + m * n)


def curve_efficiency(m: int, n: int, k: int, batch: int, profile: HardwareProfile) -> float:
    """Fraction of peak the compute part runs at, before the roofline and corrections."""
    g = profile.gemm
    outputs = float(batch) * m * n
    return g.efficiency_max * outputs / (outputs + g.output_half_elements) * k / (k + g.k_half)


def curve_kernel_time_s(
    m: int, n: int, k: int, batch: int, dtype: str, profile: HardwareProfile
) -> float:
    """Kernel seconds by the curve and the smooth roofline alone (no measured correction)."""
    peak = profile.peak_flops_for(dtype)
    t_compute = gemm_flops(m, n, k, batch) / (peak * curve_efficiency(m, n, k, batch, profile))
    t_memory = gemm_bytes(m, n, k, batch, dtype) / (
        profile.memory_bandwidth_Bps * profile.memory_efficiency
    )
    p = profile.gemm.smoothness
    return float((t_compute**p + t_memory**p) ** (1.0 / p))


@lru_cache(maxsize=64)
def _log_residuals(profile: HardwareProfile) -> tuple[tuple[float, float, float, float], ...]:
    """Per measured point: its shape in log2 and ln(measured rate / curve rate)."""
    rows = []
    for m, n, k, rate in profile.gemm.points:
        curve_rate = gemm_flops(m, n, k) / curve_kernel_time_s(
            m, n, k, 1, profile.gemm.points_dtype, profile
        )
        rows.append((math.log2(m), math.log2(n), math.log2(k), math.log(rate / curve_rate)))
    return tuple(rows)


def correction(m: int, n: int, k: int, batch: int, profile: HardwareProfile) -> float:
    """Factor by which measured points near this shape say the curve's rate is off (1 = none)."""
    if profile.gemm.model != "table" or not profile.gemm.points:
        return 1.0
    x = (math.log2(batch * m), math.log2(n), math.log2(k))
    radius = profile.gemm.correction_radius_octaves
    total_weight, weighted = 1.0, 0.0
    for lm, ln_, lk, log_r in _log_residuals(profile):
        distance = math.dist(x, (lm, ln_, lk))
        if distance == 0.0:
            return math.exp(log_r)
        weight = (radius / distance) ** _WEIGHT_POWER
        total_weight += weight
        weighted += weight * log_r
    return math.exp(weighted / total_weight)


@lru_cache(maxsize=65536)
def gemm_kernel_time_s(
    m: int, n: int, k: int, batch: int, dtype: str, profile: HardwareProfile
) -> float:
    """Seconds the GEMM kernel runs (no launch overhead): what a back-to-back benchmark
    measures. Never faster than the peak FLOP/s or the full memory bandwidth allow."""
    if min(m, n, k, batch) <= 0:
        return 0.0
    t = curve_kernel_time_s(m, n, k, batch, dtype, profile) / correction(m, n, k, batch, profile)
    floor = max(
        gemm_flops(m, n, k, batch) / profile.peak_flops_for(dtype),
        gemm_bytes(m, n, k, batch, dtype) / profile.memory_bandwidth_Bps,
    )
    return max(t, floor)


def gemm_time_s(m: int, n: int, k: int, batch: int, dtype: str, profile: HardwareProfile) -> float:
    """Seconds for one (batched) GEMM on *profile*: launch overhead + kernel time."""
    if min(m, n, k, batch) <= 0:
        return 0.0
    return profile.launch_overhead_s + gemm_kernel_time_s(m, n, k, batch, dtype, profile)


def gemm_efficiency(
    m: int, n: int, k: int, batch: int, dtype: str, profile: HardwareProfile
) -> float:
    """Achieved fraction of peak FLOP/s of the kernel (launch overhead excluded)."""
    t = gemm_kernel_time_s(m, n, k, batch, dtype, profile)
    return gemm_flops(m, n, k, batch) / (t * profile.peak_flops_for(dtype))
