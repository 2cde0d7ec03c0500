"""A measurements folder of one GPU (validation/bench/one_gpu.sh): no collectives, layers on
DeviceMesh(1, 1). It validates on a single-GPU fabric; a layer on more ranks is refused by
name; its profiler trace checks the bundled H100 profile blind (``--profile``)."""

import csv
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.api.calibrate import validate_trace
from atpsim.calibrate.compare import read_check_points, single_gpu_topology
from atpsim.cli import main

FOLDER = Path(__file__).resolve().parents[2] / "validation" / "measurements" / "h100-sxm-1gpu"
TRACE = FOLDER / "trace.1x1.c1.rank0.json"


@pytest.fixture
def folder(tmp_path):
    copy = tmp_path / FOLDER.name
    shutil.copytree(FOLDER, copy)
    shutil.rmtree(copy / "fitted")
    return copy


def test_layers_of_one_rank_are_predicted_on_one_gpu_without_collectives(folder):
    checks = read_check_points(folder)
    assert checks.topology.n_gpus == 1 and not (folder / "fitted" / "topology.yaml").exists()
    assert {(p.d1, p.d2) for p in checks.layers} == {(1, 1)}
    assert single_gpu_topology().n_gpus == 1


def test_a_layer_on_two_ranks_without_collectives_is_refused_by_name(folder):
    path = folder / "layer.csv"
    rows = list(csv.DictReader(path.open()))
    rows.append({**rows[0], "d1": "2"})
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = CliRunner().invoke(main, ["validate", str(folder)])
    assert result.exit_code == 2, result.output
    assert "no collectives measured: the layers on more than one rank cannot be predicted" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_the_bundled_h100_profile_predicts_a_real_h100s_gemms_within_10_percent():
    """The blind check of the default H100 profile (fitted to measured-data.md, never to this
    GPU) against the kernels of the M2 layer on one H100: GEMMs per op and in total within
    10%; its memory-bound ops are faster than eager PyTorch's (README of the folder), and the
    step is simulated on one GPU rather than left unpredicted."""
    result = validate_trace(TRACE, profile="h100-sxm")
    assert result.median_abs_error("gemm") < 0.10
    gemms = [op for op in result.ops if op.kind == "gemm"]
    measured = sum(op.measured_s for op in gemms)
    predicted = sum(op.predicted_s for op in gemms)
    assert abs(predicted / measured - 1) < 0.10
    memory = [op for op in result.ops if op.kind == "memory"]
    assert sum(op.predicted_s for op in memory) < sum(op.measured_s for op in memory)
    assert result.step_predicted_s is not None and result.step_predicted_s < result.step_measured_s


def test_profile_and_fitted_together_are_refused():
    result = CliRunner().invoke(
        main, ["validate", str(TRACE), "--profile", "h100-sxm", "--fitted", str(FOLDER)]
    )
    assert result.exit_code == 2 and "not both" in result.output
