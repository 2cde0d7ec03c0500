"""Hardware profiles: the bundled files load, cite every number, and bad files fail clearly."""

import pytest
import yaml

from atpsim.compute.hardware import (
    HardwareProfile,
    load_profile,
    profile_from_dict,
    profile_names,
    profile_to_dict,
)
from atpsim.errors import AtpsimError


def test_bundled_profiles_are_listed():
    assert profile_names() == [
        "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-sxm4-80gb-paper-stack", "b200", "gb200", "h100-sxm",
        "h200",
    ]


@pytest.mark.parametrize(
    "name, peak, bandwidth",
    [("a100-sxm4-80gb", 312e12, 2.039e12), ("h100-sxm", 989e12, 3.35e12)],
)
def test_vendor_numbers(name, peak, bandwidth):
    """Peak dense fp16 and HBM bandwidth are the datasheet figures of measured-data.md."""
    profile = load_profile(name)
    assert profile.peak_flops_for("fp16") == peak
    assert profile.peak_flops_for("bf16") == peak
    assert profile.memory_bandwidth_Bps == bandwidth
    assert profile.memory_capacity_bytes == 80 * 2**30


@pytest.mark.parametrize("name", ["a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm", "h200"])
def test_every_number_has_a_source(name):
    sources = dict(load_profile(name).sources)
    for key in (
        "peak_flops",
        "memory_bandwidth_Bps",
        "memory_capacity_bytes",
        "memory_efficiency",
        "launch_overhead_s",
        "gemm",
    ):
        assert sources.get(key), key


def test_a100_40gb_differs_from_80gb_in_memory_only():
    """The p4d's A100 40 GB: the datasheet's 1,555 GB/s and 40 GiB, the 80 GB fit otherwise."""
    small, large = load_profile("a100-sxm4-40gb"), load_profile("a100-sxm4-80gb")
    assert (small.memory_bandwidth_Bps, small.memory_capacity_bytes) == (1.555e12, 40 * 2**30)
    assert small.peak_flops_for("bf16") == large.peak_flops_for("bf16") == 312e12
    assert small.gemm == large.gemm


def test_h200_is_the_h100_with_its_memory():
    """The H200: the H100's GH100 die (same peaks and GEMM curve with its measured points), the
    datasheet's 4.8 TB/s HBM3e and the capacity nvidia-smi reported (143,771 MiB)."""
    h200, h100 = load_profile("h200"), load_profile("h100-sxm")
    assert h200.memory_bandwidth_Bps == 4.8e12
    assert h200.memory_capacity_bytes == 143_771 * 2**20
    assert h200.peak_flops == h100.peak_flops
    assert h200.gemm == h100.gemm
    assert dict(h200.provenance)["status"] == "derived"


def test_profile_is_hashable_and_frozen():
    profile = load_profile("a100-sxm4-80gb")
    assert hash(profile) == hash(load_profile("a100-sxm4-80gb"))
    with pytest.raises(AttributeError):
        profile.name = "x"  # type: ignore[misc]


def test_round_trip_through_yaml(tmp_path):
    """A fit can write a profile with profile_to_dict and read it back unchanged."""
    profile = load_profile("h100-sxm")
    path = tmp_path / "fitted.yaml"
    path.write_text(yaml.safe_dump(profile_to_dict(profile)))
    assert load_profile(path) == profile


def test_unknown_dtype_names_the_known_ones():
    with pytest.raises(AtpsimError, match=r"no peak FLOP/s for dtype 'fp8'.*fp16"):
        load_profile("a100-sxm4-80gb").peak_flops_for("fp8")


def test_unknown_profile_suggests_nearest():
    with pytest.raises(AtpsimError, match="did you mean 'h100-sxm'"):
        load_profile("h100-sxn")


def _minimal(**overrides):
    data = {
        "name": "x",
        "peak_flops": {"fp16": 1e12},
        "memory_bandwidth_Bps": 1e12,
        "memory_capacity_bytes": 1e9,
    }
    data.update(overrides)
    return data


def test_numbers_may_be_strings():
    """Plain YAML reads '312e12' as text; the loader takes it as a number."""
    profile = profile_from_dict(_minimal(peak_flops={"fp16": "312e12"}))
    assert isinstance(profile, HardwareProfile)
    assert profile.peak_flops_for("fp16") == 312e12


@pytest.mark.parametrize(
    "overrides, key, message",
    [
        ({"memory_bandwith_Bps": 1}, "memory_bandwith_Bps", "did you mean 'memory_bandwidth_Bps'"),
        ({"memory_bandwidth_Bps": -1}, "memory_bandwidth_Bps", "expected a positive number"),
        ({"memory_efficiency": 1.5}, "memory_efficiency", r"fraction in \(0, 1\]"),
        ({"gemm": {"model": "tabel"}}, "gemm.model", "expected one of"),
        ({"gemm": {"points": [[1, 2, 3]]}}, "gemm.points[0]", r"\[m, n, k, flops_per_s\]"),
        ({"peak_flops": {"fp16": "fast"}}, "peak_flops.fp16", "expected a number"),
    ],
)
def test_bad_values_name_the_key(overrides, key, message):
    with pytest.raises(AtpsimError, match=message) as info:
        profile_from_dict(_minimal(**overrides))
    assert info.value.key == key


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\npeak_flops: {fp16: 1.0e+12}\nmemory_bandwidth_Bps: 1.0e+12\n")
    with pytest.raises(AtpsimError) as info:
        load_profile(path)
    assert info.value.source == str(path)
    assert info.value.key == "memory_capacity_bytes"
