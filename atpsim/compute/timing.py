"""Duration of one compute op of a step program on a hardware profile.

A ``gemm`` op is timed by the GEMM model (:mod:`atpsim.compute.gemm`) from its shape; a
``memory`` op (LayerNorm, softmax, GeLU, dropout, residual add, bias) is memory-bound:

    t = launch_overhead_s + bytes_moved / (memory_bandwidth_Bps · memory_efficiency)

where *memory_efficiency* is the profile's documented achievable fraction of bandwidth.
"""

from __future__ import annotations

from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import HardwareProfile
from atpsim.errors import AtpsimError
from atpsim.parallel.program import ComputeOp


def memory_time_s(bytes_moved: float, profile: HardwareProfile) -> float:
    """Seconds for a memory-bound kernel that reads and writes *bytes_moved* bytes in all."""
    if bytes_moved <= 0:
        return 0.0
    return profile.launch_overhead_s + bytes_moved / (
        profile.memory_bandwidth_Bps * profile.memory_efficiency
    )


def compute_time_s(op: ComputeOp, profile: HardwareProfile, dtype: str) -> float:
    """Seconds *op* runs on one GPU of *profile* with tensors of *dtype*."""
    if op.kind == "gemm":
        return gemm_time_s(op.m, op.n, op.k, op.batch, dtype, profile)
    if op.kind == "memory":
        return memory_time_s(op.bytes_moved, profile)
    raise AtpsimError(
        f"compute op {op.name!r} has unknown kind {op.kind!r}; expected gemm or memory"
    )
