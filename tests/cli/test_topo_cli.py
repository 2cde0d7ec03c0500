"""`atpsim topo show | route | list` through click's runner."""

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.topology.presets import preset_info
from atpsim.units import format_bandwidth, parse_bandwidth


def run(*args):
    return CliRunner().invoke(main, ["topo", *args])


def test_show_ic2_lists_pairs_over_pcie():
    result = run("show", "ic2")
    assert result.exit_code == 0, result.output
    assert "GPUs: 8" in result.output
    assert "4 pcie_switch" in result.output
    for a in (0, 2, 4, 6):
        assert f"gpu{a} -- gpu{a + 1} (nvlink)" in result.output


@pytest.mark.parametrize(
    "spec",
    [
        "ic1",
        "ic2",
        "ic3",
        "ic4",
        "ic5",
        "ic6",
        "dgx-a100",
        "dgx-h100",
        "torus:64x64",
        "torus:16x16x16",
        "nvswitch:8",
        "ib-cluster:4x8",
        "pcie-tree:8",
        "nvlink-network-switch:4096",
        "nvlink-pairs:8",
    ],
)
def test_show_every_preset_and_builder(spec):
    result = run("show", spec)
    assert result.exit_code == 0, result.output
    assert "links (full duplex" in result.output


@pytest.mark.parametrize("option", ["-n", "--devices"])
def test_show_scalable_preset_with_devices(option):
    result = run("show", "ic6", option, "32")
    assert result.exit_code == 0 and "GPUs: 32" in result.output


def test_route_sizes_with_devices():
    result = run("route", "ic6", "0", "31", "-n", "32")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ic6:32: GPU 0 -> GPU 31")


def test_gpu_count_is_spelled_devices_not_gpus():
    """One spelling per concept: the GPU count is -n/--devices in every command."""
    assert run("show", "ic6", "--gpus", "32").exit_code == 2


def test_route_ic1_through_the_sockets():
    """Staged through socket 0's host memory, then across the socket bridge and GPU 7's
    cross-socket lane (lane 7 mod 4 = 3; the calibration structure of atpsim.topology.builders.
    pcie) into socket 1; the narrowest link is the lane (fitted 0.787 GB/s < bridge 2.30 < host 13.8)."""
    result = run("route", "ic1", "0", "7")
    assert result.exit_code == 0, result.output
    assert "cpu0 -> host_mem0" in result.output
    assert "cpu0 -> socket_hub0" in result.output and "socket_hub1 -> cpu1" in result.output
    assert "remote_lane3" in result.output and "socket" in result.output
    lane = parse_bandwidth(preset_info("ic1")["params"]["cross_socket_gpu_bandwidth_Bps"])
    assert f"bottleneck bandwidth: {format_bandwidth(lane)}" in result.output


def test_list():
    result = run("list")
    assert result.exit_code == 0
    assert "ic1" in result.output and "nvlink-network-switch" in result.output


def _builder_sections(output):
    """{builder: {parameter: its line's words}} from `topo list`: a builder line is indented
    two spaces, its parameter lines six (click writes each line whole, whatever the width)."""
    sections, current = {}, None
    for line in output.split("builders (", 1)[1].splitlines()[2:]:
        if line.startswith("      "):
            words = line.split()
            sections[current][words[0]] = words[1:]
        else:
            current = line.split()[0]
            sections[current] = {}
    return sections


def test_list_shows_every_builder_parameter_with_type_and_default():
    from atpsim.topology.registry import builder_info, builder_names

    sections = _builder_sections(run("list").output)
    assert sorted(sections) == builder_names()
    for name, params in sections.items():
        assert list(params) == builder_info(name).param_names()


@pytest.mark.parametrize(
    "builder, param, words",
    [
        ("ib-cluster", "generation", ["a100", "|", "h100", "|", "b200", "a100", "NVLink"]),
        ("ib-cluster", "nic_bandwidth_Bps", ["bandwidth", "[B/s]", "none", "per", "NIC"]),
        ("ib-cluster", "ib_latency_s", ["time", "[s]", "0.3", "us"]),
        ("torus", "dims", ["list", "of", "int", "4x4"]),
        ("pcie-tree", "p2p", ["bool", "true"]),
        ("nvswitch", "gpu_bandwidth_Bps", ["bandwidth", "[B/s]", "none"]),
        ("custom", "routing", ["shortest", "|", "up-down", "shortest"]),
    ],
)
def test_list_shows_units_and_defaults(builder, param, words):
    line = _builder_sections(run("list").output)[builder][param]
    assert line[: len(words)] == words


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "icc1"], "did you mean 'ic1'"),
        (["route", "ic1", "0", "9"], "GPU rank 9 out of range"),
        (["show", "torus:4xZ"], "expected an integer"),
    ],
)
def test_errors_are_one_line_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("atpsim: error:") and message in lines[0]


def test_png(tmp_path):
    for spec, sampled in [("ic1", False), ("ic6", False), ("torus:64x64", True)]:
        out = tmp_path / f"{spec.replace(':', '_')}.png"
        result = run("show", spec, "--png", str(out))
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 1000
        assert ("sample" in result.output) == sampled
