"""The Blackwell profiles (issue 24): b200 (HGX/DGX B200) and gb200 (a GB200 NVL72 GPU) load,
carry NVIDIA's dense peaks, cite every number, and say their GEMM curve is derived.

Expected values (NVIDIA's per-GPU specifications, Tensor Core figures quoted with sparsity, so
dense = half): HGX B200 FP16/BF16 4.5 -> 2.25 PFLOP/s, FP8 9 -> 4.5, 7.7 TB/s, 180 GB;
GB200 NVL72 5 -> 2.5, 10 -> 5, 8 TB/s, 186 GB (GB counted as GiB, as the other profiles do).
"""

import pytest

from atpsim.compute.gemm import curve_efficiency
from atpsim.compute.hardware import load_profile

BLACKWELL = {
    "b200": (2.25e15, 7.7e12, 180 * 2**30),
    "gb200": (2.5e15, 8.0e12, 186 * 2**30),
}


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_peaks_bandwidth_and_capacity_are_nvidia_s(name):
    bf16, bandwidth, capacity = BLACKWELL[name]
    profile = load_profile(name)
    assert profile.peak_flops_for("bf16") == bf16
    assert profile.peak_flops_for("fp16") == bf16
    assert profile.memory_bandwidth_Bps == bandwidth
    assert profile.memory_capacity_bytes == capacity


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_fp8_peak_is_twice_bf16(name):
    profile = load_profile(name)
    assert profile.peak_flops_for("fp8") == 2 * profile.peak_flops_for("bf16")


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_every_number_has_a_source(name):
    profile = load_profile(name)
    sources = dict(profile.sources)
    numbers = ("peak_flops", "memory_bandwidth_Bps", "memory_capacity_bytes",
               "memory_efficiency", "launch_overhead_s", "gemm")  # fmt: skip
    assert {key for key in numbers if sources.get(key)} == set(numbers)
    assert "GiB" in sources["memory_capacity_bytes"]


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_the_gemm_curve_is_derived_from_h100_s_and_says_so(name):
    """No B200 GEMM is measured: the curve is H100's (the same fraction of peak at any shape),
    uncorrected (model 'curve', no points), and the profile's status is 'derived'."""
    profile, h100 = load_profile(name), load_profile("h100-sxm")
    assert profile.provenance_status == "derived"
    assert profile.gemm.model == "curve" and profile.gemm.points == ()
    assert "derived" in dict(profile.sources)["gemm"]
    for shape in [(4096, 4096, 4096, 1), (1024, 8192, 2048, 4)]:
        assert curve_efficiency(*shape, profile) == curve_efficiency(*shape, h100)
