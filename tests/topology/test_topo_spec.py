"""load_topology: spec strings, presets, mappings, memoization, errors."""

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.spec import load_topology, topology_label


@pytest.mark.parametrize(
    "spec, n",
    [
        ("torus:32x32", 1024),
        ("torus:16x16x16", 4096),
        ("nvlink-network-switch:4096", 4096),
        ("nvswitch:8", 8),
        ("ic3", 8),
        ("ic5", 256),
        ("ic6", 16),
        ("dgx-a100", 8),
        ("dgx-h100", 8),
    ],
)
def test_spec_strings(spec, n):
    assert load_topology(spec).n_gpus == n


def test_memoized():
    assert load_topology("torus:8x8") is load_topology("torus:8x8")


def test_n_gpus_sizes_open_specs():
    assert load_topology("torus", n_gpus=32).meta["dims"] == (4, 8)
    assert load_topology("nvlink-network-switch", n_gpus=512).n_gpus == 512
    assert load_topology("ic5", n_gpus=128).n_gpus == 128
    assert load_topology("ic6", n_gpus=64).meta["dims"] == (8, 8)
    assert load_topology("ic3", n_gpus=4).n_gpus == 8  # fixed size: n_gpus ignored


def test_mappings():
    topo = load_topology({"preset": "ic5", "gpus": 256})
    assert topo.n_gpus == 256 and topo.meta["hardware"] == "h100-sxm"
    topo = load_topology({"builder": "torus", "dims": [2, 8], "link_bandwidth_Bps": "50 GB/s"})
    assert topo.n_gpus == 16 and set(topo.links.bandwidth_Bps) == {50e9}
    assert load_topology({"builder": "torus:4x4"}).n_gpus == 16


def test_extra_parameters_in_spec_string():
    topo = load_topology("torus:4x4,link_bandwidth_Bps=50 GB/s")
    assert set(topo.links.bandwidth_Bps) == {50e9}


def test_fixed_preset_overrides_go_to_the_builder():
    assert load_topology({"preset": "ic3", "gpus": 16}).n_gpus == 16


def test_preset_hardware():
    """The paper's machines run the calibrated paper-stack A100 profile (atpsim.calibrate.paper);
    generic presets the spec-sheet profiles."""
    assert load_topology("ic3").meta["hardware"] == "a100-sxm4-80gb-paper-stack"
    assert load_topology("dgx-a100").meta["hardware"] == "a100-sxm4-80gb"
    assert load_topology("dgx-h100").meta["hardware"] == "h100-sxm"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("torsu:4x4", "did you mean 'torus'"),
        ("ic9", "did you mean"),
        ("torus:4xA", "expected an integer"),
        ({"builder": "torus", "dimz": [4]}, "dimz: unknown parameter.*did you mean 'dims'"),
        ({"preset": "ic3", "builder": "torus"}, "exactly one of"),
        (42, "expected a preset name"),
    ],
)
def test_errors(spec, message):
    with pytest.raises(TopologyError, match=message):
        load_topology(spec)


def test_error_names_the_source():
    with pytest.raises(TopologyError, match="^scen.yaml: .*torsu"):
        load_topology("torsu:4x4", source="scen.yaml")


def test_labels():
    assert topology_label("ic3") == "ic3"
    assert topology_label("torus:32x32") == "torus:32x32"
    assert topology_label({"preset": "ic5", "gpus": 256}) == "ic5:256"
    assert topology_label("my/dir/fabric.yaml") == "fabric"
