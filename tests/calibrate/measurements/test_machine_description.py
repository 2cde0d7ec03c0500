"""The machine description: CPU share of oversubscribed ranks, slowed profiles, base profile."""

import pytest

from atpsim.calibrate.measurements.description import (
    CPU_MEMORY_BANDWIDTH_Bps,
    base_profile,
    cpu_share,
    describe,
    slowed,
)
from atpsim.compute.gemm import gemm_time_s
from atpsim.compute.hardware import load_profile
from atpsim.compute.timing import memory_time_s

CPU = {"device": "cpu", "backend": "gloo", "cpu_count": 2, "cpu_model": "AMD EPYC"}


@pytest.mark.parametrize("ranks, share", [(1, 1.0), (2, 1.0), (4, 0.5), (8, 0.25)])
def test_ranks_share_the_cores(ranks, share):
    assert cpu_share(CPU, ranks) == share


def test_threads_per_rank_count_and_gpus_never_share():
    assert cpu_share({**CPU, "torch_threads": 2}, 2) == 0.5
    assert (
        cpu_share({"device": "cuda", "gpu_name": "NVIDIA H100 80GB HBM3", "cpu_count": 2}, 8) == 1.0
    )
    assert cpu_share({"device": "cpu"}, 8) == 1.0  # no core count: nothing to go by


def test_a_slowed_profile_takes_exactly_one_over_share_longer():
    """Peak, bandwidth and measured rates x 0.5, overhead x 2: every duration doubles (the
    GEMM correction is a ratio of rates, unchanged)."""
    profile = load_profile("a100-sxm4-80gb")
    half = slowed(profile, 0.5)
    for shape in ((64, 64, 64), (1024, 2145, 1024), (802816, 192, 768)):
        ratio = gemm_time_s(*shape, 1, "fp16", half) / gemm_time_s(*shape, 1, "fp16", profile)
        assert ratio == pytest.approx(2.0)
    assert memory_time_s(1e6, half) == pytest.approx(2 * memory_time_s(1e6, profile))
    assert slowed(profile, 1.0) is profile


def test_base_profiles():
    cpu = base_profile("fitted-x", CPU, 4)
    assert cpu.memory_bandwidth_Bps == CPU_MEMORY_BANDWIDTH_Bps and cpu.name == "fitted-x"
    gpu = base_profile("fitted-y", {"gpu_name": "NVIDIA A100-SXM4-80GB"}, 8)
    assert gpu.memory_bandwidth_Bps == load_profile("a100-sxm4-80gb").memory_bandwidth_Bps
    measured = base_profile("fitted-z", {**CPU, "memory_bandwidth_Bps": 1e10}, 4)
    assert measured.memory_bandwidth_Bps == 1e10 and measured.memory_efficiency == 1.0
    assert describe(CPU) == "cpu, AMD EPYC, gloo"


def test_cpu_ranks_overlap_comm_only_with_a_spare_core_each():
    from atpsim.calibrate.measurements.description import comm_overlaps_compute

    assert not comm_overlaps_compute(CPU, 2)  # 2 ranks, 2 cores: no spare core
    assert comm_overlaps_compute({**CPU, "cpu_count": 4}, 2)  # 2 ranks x (1 + 1) threads
    assert comm_overlaps_compute({"gpu_models": ["NVIDIA H100 80GB HBM3"], "cpu_count": 2}, 8)
