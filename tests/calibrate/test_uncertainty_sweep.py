"""A scenario that asks for parameter draws (`uncertainty: {draws, seed}`): the point estimate's
columns as without draws, percentile columns after them, the same draws in every worker
process (common random numbers), and one clear line for a request that cannot be met."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from atpsim.api import run_scenario
from atpsim.cli import main
from atpsim.compute.hardware import load_profile, profile_to_dict
from atpsim.results.io import read_results
from atpsim.results.schema import STEP_SCHEMA, UNCERTAINTY_COLUMNS

SCENARIO = """\
name: drawn
topology: torus:2x2
model: M1
parallelism: {devices: 4, meshes: all}
chunks: [1, 2]
"""


def _write(folder: Path, extra: str = "") -> Path:
    path = folder / "drawn.yaml"
    path.write_text(SCENARIO + extra)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drawn")
    scenario = _write(root, "uncertainty: {draws: 3, seed: 1}\n")
    (root / "plain").mkdir()
    plain = _write(root / "plain")
    return {
        "j1": run_scenario(scenario, root / "j1", jobs=1, progress=False),
        "j2": run_scenario(scenario, root / "j2", jobs=2, progress=False),
        "plain": run_scenario(plain, root / "out-plain", jobs=1, progress=False),
    }


def test_rows_have_percentile_columns_around_the_point_estimate(runs):
    frame = runs["j1"].frame
    assert list(frame.columns)[-len(UNCERTAINTY_COLUMNS):] == [c.name for c in UNCERTAINTY_COLUMNS]
    assert (frame["draws"] == 3).all() and (frame["uncertainty_sources"] == "gemm:a100-sxm4-80gb").all()
    assert (frame["step_time_s_p10"] <= frame["step_time_s_p50"]).all()
    assert (frame["step_time_s_p50"] <= frame["step_time_s_p90"]).all()
    assert (frame["tflops_per_gpu_p10"] <= frame["tflops_per_gpu_p90"]).all()


def test_the_point_estimate_is_the_table_without_draws(runs):
    drawn, plain = runs["j1"].frame, runs["plain"].frame
    assert list(plain.columns) == list(STEP_SCHEMA.names)
    for column in ("step_time_s", "tflops_per_gpu", "comm_time_s", "mesh", "chunks"):
        assert drawn[column].tolist() == plain[column].tolist()


def test_worker_processes_draw_exactly_what_one_process_draws(runs):
    one = (runs["j1"].out_dir / "results.csv").read_bytes()
    two = (runs["j2"].out_dir / "results.csv").read_bytes()
    assert one == two
    assert read_results(runs["j2"].out_dir / "results.csv").shape == runs["j1"].frame.shape


@pytest.mark.parametrize("block", ["{draws: 0}", "{draws: -2}", "{draws: 4, seed: -1}", "{drawz: 4}"])
def test_a_bad_uncertainty_key_is_one_line_exit_2(tmp_path, block):
    path = _write(tmp_path, f"uncertainty: {block}\n")
    result = CliRunner().invoke(main, ["run", str(path), "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "uncertainty" in result.stderr and result.stderr.count("\n") == 1


def test_points_with_nothing_fitted_are_refused_before_simulating(tmp_path):
    profile = tmp_path / "custom.yaml"
    profile.write_text(yaml.safe_dump({**profile_to_dict(load_profile("a100-sxm4-80gb")),
                                       "name": "custom"}))  # fmt: skip
    path = _write(tmp_path, f"hardware: {profile}\nuncertainty: {{draws: 2}}\n")
    result = CliRunner().invoke(main, ["run", str(path), "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2 and "no fitted parameter" in result.stderr
    assert not (tmp_path / "out" / "results.csv").exists()


def test_run_uncertainty_option_sets_the_draws_of_a_scenario_without_them(tmp_path):
    path = _write(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(path), "-o", str(out), "--no-progress",
                                       "--uncertainty", "2", "--seed", "7"])  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = read_results(out / "results.csv")
    assert (frame["draws"] == 2).all() and (frame["draw_seed"] == 7).all()
    bad = CliRunner().invoke(main, ["run", str(path), "-o", str(tmp_path / "bad"), "--no-progress",
                                    "--uncertainty", "-4"])  # fmt: skip
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "--uncertainty" in bad.stderr
