"""GEMM model: anchored to the measured rows of measured-data.md, bounded by the roofline,
slower per FLOP for the small and skinny GEMMs that chunks and large meshes make."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.calibrate.fit.gemm_curve import fit_gemm_curve, rms_log_error
from atpsim.compute.gemm import (
    gemm_efficiency,
    gemm_flops,
    gemm_kernel_time_s,
    gemm_time_s,
)
from atpsim.compute.hardware import load_profile

A100 = load_profile("a100-sxm4-80gb")
H100 = load_profile("h100-sxm")

#: shared/reference/measured-data.md, GEMM rows: (m, n, k, TFLOP/s).
A100_MEASURED = [
    (1024, 1024, 1024, 119.4), (2048, 2048, 2048, 221.8), (4096, 4096, 4096, 228.0),
    (8192, 8192, 8192, 253.7), (16384, 16384, 16384, 256.5), (1024, 2145, 1024, 132.8),
    (6144, 12288, 12288, 250.8), (802816, 192, 768, 157.8),
]  # fmt: skip
H100_MEASURED = [(4096, 4096, 4096, 716.0), (8192, 8192, 8192, 795.0), (2048, 2048, 13312, 794.5)]


def _tflops(profile, m, n, k, dtype="fp16"):
    return gemm_flops(m, n, k) / gemm_kernel_time_s(m, n, k, 1, dtype, profile) / 1e12


@pytest.mark.parametrize("m, n, k, measured", A100_MEASURED)
def test_a100_matches_measured_rows(m, n, k, measured):
    assert _tflops(A100, m, n, k) == pytest.approx(measured, rel=0.03)


@pytest.mark.parametrize("m, n, k, measured", H100_MEASURED)
def test_h100_matches_measured_rows(m, n, k, measured):
    assert _tflops(H100, m, n, k, "bf16") == pytest.approx(measured, rel=0.03)


def test_curve_alone_is_within_ten_percent_rms():
    """Without the table correction the fitted curve still follows the A100 rows (RMS of the
    log error ~7%), so shapes far from every measured point get sensible rates."""
    points = [(m, n, k, t * 1e12) for m, n, k, t in A100_MEASURED]
    assert rms_log_error(A100, points, "fp16") < 0.10


def test_refit_reproduces_the_bundled_curve():
    """The profile's curve parameters are what fit_gemm_curve makes of its points."""
    refit = fit_gemm_curve(A100, A100.gemm.points)
    assert refit.gemm.efficiency_max == pytest.approx(A100.gemm.efficiency_max, rel=0.01)
    assert refit.gemm.output_half_elements == pytest.approx(
        A100.gemm.output_half_elements, rel=0.05
    )


def test_square_gemms_grow_more_efficient_with_size():
    sizes = [256 * 2 ** (i / 4) for i in range(25)]  # 256 .. 16384 in quarter octaves
    rates = [gemm_efficiency(int(s), int(s), int(s), 1, "fp16", A100) for s in sizes]
    assert all(b >= a * 0.98 for a, b in zip(rates, rates[1:], strict=False))
    assert rates[0] < 0.1 < 0.8 < rates[-1]


@pytest.mark.parametrize("profile", [A100, H100])
def test_smaller_chunks_make_less_efficient_gemms(profile):
    """M2's FC1 on DeviceMesh(8, 1): 8192 tokens, and a quarter of them with chunk=4."""
    whole = gemm_efficiency(8192, 2048, 4096, 1, "fp16", profile)
    quarter = gemm_efficiency(2048, 2048, 4096, 1, "fp16", profile)
    assert quarter < 0.95 * whole


def test_skinny_gemms_are_less_efficient_than_square_ones_of_equal_work():
    square = gemm_efficiency(4096, 4096, 4096, 1, "fp16", A100)
    skinny = gemm_efficiency(4096 * 64, 4096, 64, 1, "fp16", A100)
    assert skinny < 0.5 * square


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 1 << 17),
    st.integers(1, 1 << 15),
    st.integers(1, 1 << 15),
    st.integers(1, 64),
    st.sampled_from(["fp16", "bf16", "fp32"]),
)
def test_never_above_peak_or_bandwidth(m, n, k, batch, dtype):
    for profile in (A100, H100):
        t = gemm_kernel_time_s(m, n, k, batch, dtype, profile)
        assert gemm_flops(m, n, k, batch) / t <= profile.peak_flops_for(dtype) * (1 + 1e-12)
        moved = 2 * batch * (m * k + k * n + m * n) * (2 if dtype != "fp32" else 4) / 2
        assert moved / t <= profile.memory_bandwidth_Bps * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(16, 1 << 14), st.integers(16, 1 << 14), st.integers(16, 1 << 14))
def test_more_work_never_takes_less_time(m, n, k):
    """Doubling any dimension does not make the kernel faster."""
    t = gemm_kernel_time_s(m, n, k, 1, "fp16", A100)
    for bigger in ((2 * m, n, k), (m, 2 * n, k), (m, n, 2 * k)):
        assert gemm_kernel_time_s(*bigger, 1, "fp16", A100) >= t * 0.999


def test_launch_overhead_is_added_once():
    kernel = gemm_kernel_time_s(1024, 1024, 1024, 1, "fp16", A100)
    assert gemm_time_s(1024, 1024, 1024, 1, "fp16", A100) == pytest.approx(kernel + 4e-6)


def test_batched_gemm_is_faster_than_separate_calls():
    """One batched call of 16 small GEMMs fills the GPU better than 16 calls."""
    batched = gemm_time_s(2048, 2048, 128, 16, "fp16", A100)
    separate = 16 * gemm_time_s(2048, 2048, 128, 1, "fp16", A100)
    assert batched < separate


def test_empty_gemm_takes_no_time():
    assert gemm_time_s(0, 10, 10, 1, "fp16", A100) == 0.0
