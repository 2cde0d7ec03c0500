"""Issue 11: every bad input gets one line naming the file, key and what was expected, and an
exit code that says what kind of failure it was (2 bad input, 3 bug, 5 out of memory). Each
case runs the real CLI in-process; none simulates a step, so the file stays fast."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.commands._common import clean_errors

LOG = Path(__file__).resolve().parents[1] / "calibrate" / "data" / "azure_nd_a100_v4_all_reduce_perf.log"


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def one_line(result) -> str:
    """The command's stderr: exactly one line, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def binary(tmp_path) -> Path:
    path = tmp_path / "blob.yaml"
    path.write_bytes(bytes(range(256)) * 8)
    return path


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A saved run folder (results table and scenario copy) as `atpsim run` leaves it."""
    folder = tmp_path / "run"
    folder.mkdir()
    committed = Path(__file__).resolve().parents[2] / "reports" / "quickstart"
    for name in ("results.csv", "scenario.yaml"):
        (folder / name).write_bytes((committed / name).read_bytes())
    return folder


# --- section 3: file-system and decoding errors -------------------------------------------


def test_binary_scenario_names_the_file(binary):
    result = run("run", str(binary))
    assert result.exit_code == 2
    line = one_line(result)
    assert str(binary) in line and "UTF-8" in line


def test_binary_nccl_log_names_the_file(binary):
    result = run("validate", str(binary))
    assert result.exit_code == 2
    assert str(binary) in one_line(result)


def test_unwritable_png_is_one_line(tmp_path):
    target = tmp_path / "missing-folder" / "x.png"
    result = run("topo", "show", "ic3", "--png", str(target))
    assert result.exit_code == 2
    assert "x.png" in one_line(result)


def test_report_on_a_corrupt_scenario_copy(run_dir):
    (run_dir / "scenario.yaml").write_text("name: x\nmodel: [\n")
    result = run("report", str(run_dir))
    assert result.exit_code == 2
    line = one_line(result)
    assert "scenario.yaml" in line and "line 3" in line


def test_report_on_a_binary_scenario_copy(run_dir):
    (run_dir / "scenario.yaml").write_bytes(b"\xff\xfe\x00" * 50)
    result = run("report", str(run_dir))
    assert result.exit_code == 2
    assert "scenario.yaml" in one_line(result)


def test_report_where_report_md_is_a_folder(run_dir):
    (run_dir / "report.md").mkdir()
    result = run("report", str(run_dir))
    assert result.exit_code == 2
    line = one_line(result)
    assert "report.md" in line and "folder" in line


def test_usage_errors_are_one_line_naming_the_option():
    result = run("plan", "-t", "ic1", "-n", "0")
    assert result.exit_code == 2
    assert "--devices" in one_line(result)


def test_an_internal_error_is_one_line_with_its_own_code():
    @click.command()
    @clean_errors
    def broken() -> None:
        raise ZeroDivisionError("a bug")

    result = CliRunner().invoke(broken, [])
    assert result.exit_code == 3
    assert "internal error: ZeroDivisionError: a bug" in one_line(result)


def test_a_memory_error_is_one_line_exit_5():
    @click.command()
    @clean_errors
    def hungry() -> None:
        raise MemoryError

    result = CliRunner().invoke(hungry, [])
    assert result.exit_code == 5
    assert "out of memory" in one_line(result)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["topo", "show", "--help"]])
def test_help_lists_the_exit_codes(args):
    result = run(*args)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for fragment in ("Exit status", "2 bad input", "3 internal error", "4 a worker process",
                     "5 this machine ran out of memory", "130 interrupted"):  # fmt: skip
        assert fragment in text, fragment


# --- section 2: every option validated ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["plan", "-t", "ic1", "--algorithm", "foo"], "--algorithm"),
        (["hcm", "ic1", "-n", "16"], "--devices"),
        (["topo", "show", "ic1", "-n", "4"], "--devices"),
        (["topo", "show", "ic1", "-n", "0"], "--devices"),
        (["validate", str(LOG), "--ranks", "0"], "--ranks"),
        (["validate", str(LOG), "--ranks", "4"], "--ranks"),
        (["topo", "show", "torus:4x4,link_bandwidth_Bps=25"], "bare number"),
        (["topo", "show", "torus:4x4,link_bandwidth_Bps=1e-300 GB/s"], "1 MB/s to 100 TB/s"),
        (["topo", "show", "torus:4x4,link_latency_s=-1 us"], ">= 0"),
        (["topo", "show", "torus:4x4,link_latency_s=5 s"], "0 s to 1 s"),
    ],
)
def test_bad_options_are_refused(args, fragment):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert fragment in one_line(result)


def test_force_accepts_a_value_outside_the_range():
    result = run("topo", "show", "torus:2x2,link_bandwidth_Bps=0.5 MB/s,force=true")
    assert result.exit_code == 0, result.output


def test_calibration_of_another_machine_is_said(caplog):
    from atpsim.api.planner import _calibration

    assert _calibration("paper-ic1", "dgx-h100") is not None  # allowed, but the plan says so


# --- section 1: sizes with bounds -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["topo", "show", "nvlink-network-switch:1000000000"],
        ["hcm", "ic5", "-n", "100000000"],
        ["plan", "-t", "ic5", "-n", "1000000000"],
        ["collective", "-t", "torus:1000x1000", "--bytes", "1M"],
    ],
)
def test_oversized_topologies_are_refused_before_building(args):
    result = run(*args)
    assert result.exit_code == 2, result.output
    line = one_line(result)
    assert "GPUs" in line and "ATPSIM_MAX_GPUS" in line


def test_the_gpu_limit_can_be_raised(monkeypatch):
    result = run("topo", "show", "torus:4x4", env={"ATPSIM_MAX_GPUS": "8"})
    assert result.exit_code == 2 and "limit is 8 GPUs" in one_line(result)
    assert run("topo", "show", "torus:4x4", env={"ATPSIM_MAX_GPUS": "16"}).exit_code == 0


# --- section 5: output independent of terminal width and path length -----------------------


def test_a_log_summary_survives_a_narrow_terminal_and_a_long_path(tmp_path):
    folder = tmp_path.joinpath(*["a" * 50] * 4)
    folder.mkdir(parents=True)
    log = folder / "all_reduce_perf.log"
    log.write_bytes(LOG.read_bytes())
    result = run("validate", str(log), env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    summary = [line for line in result.stdout.splitlines() if line.startswith(str(log))]
    assert len(summary) == 1 and "largest-message busbw 231.58 GB/s" in summary[0]


def test_a_dead_worker_is_not_bad_input():
    from atpsim.errors import WorkerDiedError

    @click.command()
    @clean_errors
    def sweep() -> None:
        raise WorkerDiedError("a worker process died (killed, out of memory?)")

    result = CliRunner().invoke(sweep, [])
    assert result.exit_code == 4
    assert "worker process died" in one_line(result)
