"""`atpsim run` and `atpsim report` end to end (with a fake simulator where one is needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.api.workloads import WORKLOADS
from atpsim.cli import main
from atpsim.results.io import read_results
from atpsim.scenario.workload import JOB, STEP

SCENARIO = """name: tiny
description: Two meshes and two chunk counts on IC3.
topology: ic3
model: M1
parallelism: {meshes: [atp-1, atp-2]}
chunks: [1, 2]
"""


def fake_simulate(point):
    d1, d2 = point.shape.d1, point.shape.d2
    return {
        "step_time_s": 0.01 * d1 / d2 / point.chunks,
        "tflops_per_gpu": 100.0 * d2 / d1,
        "tflops_per_gpu_paper_unit": 90.0 * d2 / d1,
        "comm_over_delta": 1.0 + d1,
    }


def fake_simulate_job(point):
    """A job row from the layout alone (no simulation): every breakdown column filled."""
    seconds = 1.0 + 0.1 * point.pp + 0.01 * point.tp.d2
    return {"iteration_time_s": seconds, "samples_per_s": point.global_batch / seconds,
            "tflops_per_gpu": 100.0 / seconds, "hardware_tflops_per_gpu": 120.0 / seconds,
            "mfu": 0.3 / seconds, "compute_s": 0.6 * seconds, "exposed_tp_comm_s": 0.1 * seconds,
            "exposed_dp_comm_s": 0.1 * seconds, "pipeline_bubble_s": 0.1 * seconds,
            "other_s": 0.1 * seconds, "memory_per_rank_bytes": 1e9, "fits_memory": True}


@pytest.fixture
def fake_simulator(monkeypatch):
    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=fake_simulate))
    monkeypatch.setitem(WORKLOADS, JOB, replace(WORKLOADS[JOB], simulate=fake_simulate_job))


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_run_writes_table_and_report_to_the_default_folder(
    fake_simulator, scenario, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    result = run("run", str(scenario), "--no-progress")
    assert result.exit_code == 0, result.output
    out = Path("reports/tiny")
    assert "scenario tiny: 4 points" in result.stdout
    assert "results and report in reports/tiny/" in result.stdout
    for name in ("results.csv", "report.md", "report.html", "scenario.yaml"):
        assert (out / name).is_file()
    assert (out / "scenario.yaml").read_text() == SCENARIO
    frame = read_results(out)
    assert frame["mesh"].tolist() == ["8x1", "8x1", "4x2", "4x2"]
    assert set(frame["status"]) == {"ok"}


def test_run_twice_gives_the_same_bytes_and_report_rebuilds_them(
    fake_simulator, scenario, tmp_path
):
    for name in ("a", "b"):
        assert run("run", str(scenario), "-o", str(tmp_path / name), "--no-progress").exit_code == 0
    for name in ("results.csv", "report.md", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    before = (tmp_path / "a" / "report.html").read_bytes()
    (tmp_path / "a" / "report.html").unlink()
    result = run("report", str(tmp_path / "a"))
    assert result.exit_code == 0 and "report.html" in result.stdout
    assert (tmp_path / "a" / "report.html").read_bytes() == before


def test_parallel_and_resume_options(fake_simulator, scenario, tmp_path):
    out = str(tmp_path / "o")
    assert run("run", str(scenario), "-o", out, "-j", "2", "--no-progress").exit_code == 0
    first = (tmp_path / "o" / "results.csv").read_bytes()
    assert run("run", str(scenario), "-o", out, "--resume", "--no-progress").exit_code == 0
    assert (tmp_path / "o" / "results.csv").read_bytes() == first


def test_run_says_plainly_when_nothing_can_be_simulated_yet(scenario, tmp_path, monkeypatch):
    from atpsim.errors import SimulationError

    def not_yet(point):
        raise SimulationError("simulating a point is not implemented yet (issue 4)")

    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=not_yet))
    result = run("run", str(scenario), "-o", str(tmp_path / "o"), "--no-progress")
    assert result.exit_code == 1
    assert (
        "atpsim: error: nothing could be simulated: simulating a point is not implemented "
        "yet (issue 4)"
    ) in result.stderr
    assert "Traceback" not in result.output
    assert set(read_results(tmp_path / "o")["status"]) == {"failed"}


def test_some_failed_points_exit_1_after_writing_everything(scenario, tmp_path, monkeypatch):
    def half(point):
        if point.chunks == 2:
            raise ValueError("no chunks today")
        return fake_simulate(point)

    monkeypatch.setitem(WORKLOADS, STEP, replace(WORKLOADS[STEP], simulate=half))
    result = run("run", str(scenario), "-o", str(tmp_path / "o"), "--no-progress")
    assert result.exit_code == 1
    assert "atpsim: 2 of 4 points failed" in result.stderr
    assert "ValueError: no chunks today" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("topology: ic3\nmodel: M1\nchunk: 2\n", "unknown key 'chunk' (did you mean 'chunks'?)"),
        (
            "topology: ic3\nmodel: M1\nreport: {figures: [pie]}\n",
            "report.figures[0]: unknown figure 'pie'",
        ),
        (
            "topology: ic3\nmodel: M1\nreference: {table3: {M2: 3.4}}\n",
            "reference.table3.M2: expected a mapping, got 3.4",
        ),
    ],
)
def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = run("run", str(path), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert str(path) in result.stderr
    assert not (tmp_path / "o").exists()


def test_report_of_a_folder_without_results_is_a_clean_error(tmp_path):
    result = run("report", str(tmp_path))
    assert result.exit_code == 2
    assert (
        result.stderr == f"atpsim: error: {tmp_path}/results.csv: no results table here "
        "(expected results.csv)\n"
    )


SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.yaml"))


@pytest.mark.skipif(not SCENARIOS, reason="no scenarios/ files yet")
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_file_runs_and_reports_with_a_fake_simulator(fake_simulator, path, tmp_path):
    """Each file in scenarios/ loads, expands, runs (fake simulator) and builds its report;
    the real simulation of each is the job of the scenario tests and the committed reports."""
    result = run("run", str(path), "-o", str(tmp_path / "o"), "--no-progress")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "report.html").is_file()


def test_run_ends_with_what_it_found(fake_simulator, scenario, tmp_path, monkeypatch):
    """The terminal's last lines answer the question, as the report's first screen does: the
    points and the fastest configuration per machine and model (issue 26). Fake times:
    4x2 runs at 100 * 2 / 4 = 50 TFLOP/s per GPU, 8x1 at 12.5, so 4x2 is the fastest."""
    monkeypatch.chdir(tmp_path)
    result = run("run", str(scenario), "--no-progress")
    assert result.exit_code == 0, result.output
    tail = result.stdout.split("what it found (the top of reports/tiny/report.md):\n")[1]
    assert tail.splitlines()[0] == "- 4 points: 4 simulated."
    assert "ic3: M1 on 4x2 (best 50)" in tail
    report = (Path("reports/tiny") / "report.md").read_text()
    assert all(line[2:] in report for line in tail.splitlines())
    answer = result.stdout.split("the answer: ")[1].split("what it found")[0].splitlines()
    assert "An ATP 2D mesh (d2 > 1) in 1 of 1 cases" in answer[0]
    assert answer[1].startswith("  M1 on ic3") and ": 4x2, " in answer[1]
    assert answer[1].endswith("on N x 1, 1 chunk)")


JOB_SCENARIO = """name: tinyjob
topology: {builder: ib-cluster, gpus_per_node: 8, nodes: 2}
model: gpt3-1.3b
parallelism: {devices: 16, tp: [[8, 1], [4, 2]], pp: 2, dp: auto, micro_batch: 1,
              global_batch: 16, sequence_parallel: false}
"""


def test_a_job_run_ends_with_one_verdict_per_comparison(fake_simulator, tmp_path, monkeypatch):
    """A job sweep's last lines say whether ATP's best 2D mesh beats Megatron-LM's 1D TP.
    Fake times: 1 + 0.1 pp + 0.01 d2, so 8x1 (1.21 s) beats 4x2 (1.22 s) by 0.8%."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(JOB_SCENARIO)
    result = run("run", "job.yaml", "--no-progress")
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("- gpt3-1.3b on ") and last.endswith("Megatron-LM is 0.8% faster.")
