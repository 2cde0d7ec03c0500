"""compute_time_s: GEMM ops by the GEMM model, memory ops by bytes over achievable bandwidth."""

import pytest

from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import load_profile
from atpsim.compute.timing import compute_time_s, memory_time_s
from atpsim.errors import AtpsimError
from atpsim.program import ComputeOp

A100 = load_profile("a100-sxm4-80gb")


def test_memory_op_golden():
    """64 MiB read+written at 80% of 2.039 TB/s: 4 us + 67108864 / 1.6312e12 s = 45.14 us."""
    op = ComputeOp("ln", "memory", bytes_moved=64 * 2**20)
    assert compute_time_s(op, A100, "fp16") == pytest.approx(4e-6 + 67108864 / 1.6312e12)


def test_gemm_op_uses_the_gemm_model():
    op = ComputeOp("fc1", "gemm", flops=2.0 * 8192 * 2048 * 4096, m=8192, n=2048, k=4096)
    assert compute_time_s(op, A100, "fp16") == gemm_time_s(8192, 2048, 4096, 1, "fp16", A100)


def test_dtype_changes_gemm_time():
    op = ComputeOp("fc1", "gemm", m=4096, n=4096, k=4096)
    assert compute_time_s(op, A100, "fp32") > 10 * compute_time_s(op, A100, "fp16")


def test_empty_memory_op_is_free():
    assert memory_time_s(0, A100) == 0.0


def test_unknown_kind_is_an_error():
    op = ComputeOp("x", "magic", bytes_moved=1.0)  # type: ignore[arg-type]
    with pytest.raises(AtpsimError, match="unknown kind 'magic'"):
        compute_time_s(op, A100, "fp16")
