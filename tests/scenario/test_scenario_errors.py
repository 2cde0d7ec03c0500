"""Every bad scenario file fails with one line naming the file, the key path and what was
expected (issue 2, item 5), and the CLI turns it into exit code 2 without a traceback."""

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from atpsim.commands._common import clean_errors
from atpsim.errors import ScenarioError
from atpsim.scenario.loader import load_scenario

BAD = Path(__file__).parent / "data" / "bad"

#: fixture -> (key path or None, fragments the message must contain).
CASES = {
    "syntax_error.yaml": (None, ["line 5, column 7", "invalid YAML"]),
    "duplicate_key.yaml": (None, ["line 4, column 1", "invalid YAML", "duplicate key 'chunks'"]),
    "not_a_mapping.yaml": (None, ["expected a mapping of scenario keys"]),
    "unknown_key.yaml": ("chunk", ["unknown key 'chunk' (did you mean 'chunks'?)"]),
    "unknown_nested_key.yaml": (
        "parallelism.mesh",
        ["unknown key 'mesh' (did you mean 'meshes'?)"],
    ),
    "unknown_model_key.yaml": ("model.hiden", ["unknown key 'hiden' (did you mean 'hidden'?)"]),
    "missing_model.yaml": ("model", ["missing required key"]),
    "wrong_type_chunks.yaml": ("chunks", ["expected an integer, got 'two'"]),
    "wrong_type_in_list.yaml": ("chunks[1]", ["expected an integer, got 'two'"]),
    "wrong_type_parallelism.yaml": ("parallelism", ["expected a mapping, got 8"]),
    "empty_axis.yaml": ("chunks", ["expected at least one value"]),
    "bad_name.yaml": ("name", ["expected a name of letters, digits"]),
    "negative_bandwidth_topology.yaml": (
        "topology.link_bandwidth",
        ["expected a positive bandwidth", "'-25 GB/s'"],
    ),
    "negative_bandwidth_number.yaml": (
        "topology.link_bandwidth_Bps",
        ["expected a positive bandwidth", "'-2.5e10'"],
    ),
    "negative_bandwidth_inline_graph.yaml": (
        "topology[1].links[0].bandwidth",
        ["expected a positive bandwidth", "'-1 GB/s'"],
    ),
    "negative_bandwidth_calibration.yaml": (
        "calibration.2x4.B2",
        ["expected a positive bandwidth", "'-4.95 GB/s'"],
    ),
    "bad_latency.yaml": ("topology.link_latency", ["expected a non-negative time", "'fast'"]),
    "two_topology_kinds.yaml": (
        "topology",
        ["expected exactly one of 'preset', 'builder' or 'file'"],
    ),
    "mesh_wrong_product.yaml": (
        "parallelism.meshes[1]",
        ["DeviceMesh(2, 3) has 6 devices; expected 8"],
    ),
    "mesh_not_dividing_hidden.yaml": (
        "parallelism.meshes[0]",
        [
            "DeviceMesh(3, 2) splits model.hidden = 4096",
            "3 ways on dimension 1",
            "expected d1 and d2 to divide the hidden size",
        ],
    ),
    "atp_not_divisor.yaml": (
        "parallelism.meshes[1]",
        ["ATP-3", "expected a divisor of the device count 8"],
    ),
    "bad_mesh_item.yaml": (
        "parallelism.meshes[0]",
        ["expected [d1, d2], 'D1xD2', 'atp-I' or 'atp-opt'", "got 'atp-x'"],
    ),
    "hidden_not_multiple_of_heads.yaml": (
        "model.hidden",
        ["expected a multiple of heads (3), got 1000"],
    ),
    "too_many_devices.yaml": (
        "parallelism.devices[1]",
        ["16 devices, but topology 'ic3' has 8 GPUs", "expected at most 8"],
    ),
    "chunks_zero.yaml": ("chunks", ["expected a value >= 1, got 0"]),
    "chunks_not_dividing_batch.yaml": (
        "chunks[1]",
        ["3 chunks split model.batch = 4", "expected a divisor of the batch"],
    ),
    "unknown_model_preset.yaml": ("model", ["unknown model preset 'M5'; expected one of ['M1'"]),
    "unknown_topology_preset.yaml": ("topology", ["unknown topology preset 'ic9'", "did you mean"]),
    "unknown_builder_param.yaml": (
        "topology.dimz",
        ["unknown parameter", "(did you mean 'dims'?)"],
    ),
    "unknown_algorithm.yaml": (
        "algorithm",
        ["unknown algorithm 'rabenseifer' (did you mean 'rabenseifner'?)"],
    ),
    "unknown_mode.yaml": ("mode[1]", ["unknown mode 'analitic' (did you mean 'analytic'?)"]),
    "unknown_placement.yaml": (
        "parallelism.placement",
        ["unknown placement 'row-majr' (did you mean 'row-major'?)"],
    ),
    "unknown_hardware.yaml": ("hardware", ["unknown hardware profile 'a100'"]),
    "unknown_dtype.yaml": ("model.dtype", ["unknown dtype 'fp61'"]),
    "calibration_without_analytic.yaml": (
        "calibration",
        ["used only in analytic mode", "expected 'analytic' in mode"],
    ),
    "calibration_unknown_topology.yaml": (
        "calibration.ic33",
        ["unknown topology label 'ic33' (did you mean 'ic3'?)"],
    ),
    "calibration_unknown_key.yaml": (
        "calibration.8x1.B3",
        ["unknown key 'B3'; expected one of ['B1', 'B2']"],
    ),
    "missing_topology_file.yaml": (
        "topology.file",
        ["expected an existing file", "'graphs/nope.yaml'"],
    ),
    "disconnected_custom_graph.yaml": ("topology", ["two_islands.yaml", "disconnected"]),
    "case_mesh_wrong_product.yaml": (
        "cases[1].parallelism.meshes[1]",
        ["DeviceMesh(4, 2) has 8 devices; expected 16"],
    ),
    "case_missing_topology.yaml": ("cases[1].topology", ["missing required key"]),
    "case_null_topology.yaml": ("cases[1].topology", ["missing required key"]),
    "case_unknown_key.yaml": ("cases[1].calibration", ["unknown key 'calibration'"]),
    "unknown_output_format.yaml": ("output.formats[1]", ["unknown output format 'xlsx'"]),
}


def test_every_bad_fixture_has_a_case():
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_scenario_names_file_key_and_expectation(name):
    key, fragments = CASES[name]
    with pytest.raises(ScenarioError) as caught:
        load_scenario(BAD / name)
    error = caught.value
    line = error.format()
    assert "\n" not in line
    assert error.source == str(BAD / name)
    assert line.startswith(f"{BAD / name}: ")
    assert error.key == key
    if key:
        assert f": {key}: " in line
    for fragment in fragments:
        assert fragment in error.message


@click.command()
@click.argument("path")
@clean_errors
def _load_command(path: str) -> None:
    load_scenario(path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_reports_one_line_and_exit_code_2(name):
    result = CliRunner().invoke(_load_command, [str(BAD / name)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"atpsim: error: {BAD / name}: ")
