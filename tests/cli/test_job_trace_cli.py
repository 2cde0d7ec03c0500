"""A job's timeline from the command line: ``atpsim run JOB_SCENARIO --trace SELECTOR`` (the
step selectors' grammar over the job table's columns, ``best`` by iteration time) and
``atpsim plan --global-batch ... --trace FILE`` (the best layout's), each a Chrome trace of
the iteration's stages, micro-batches, collectives and busiest links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.api import expand_sweep, load_scenario
from atpsim.api.point_trace import select_trace_points
from atpsim.api.workloads import WORKLOADS
from atpsim.cli import main
from atpsim.results.io import read_results
from atpsim.scenario.workload import JOB

#: Two meshes of a 2-layer model on 16 GPUs of two nodes: tp 4x1 and 2x2, each pp 2 x dp 2;
#: three layouts, 4x1 with and without sequence parallelism (a job scenario's default).
SCENARIO = """\
name: job-trace
topology: "ib-cluster:2x8"
model: [{name: tiny, hidden: 1024, heads: 16, layers: 2, batch: 1, seq: 1024}]
parallelism: {tp: [[4, 1], [2, 2]], pp: [2], micro_batch: [1], global_batch: 8}
"""


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "job-trace.yaml"
    path.write_text(SCENARIO)
    return path


def events_of(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    assert data["displayTimeUnit"] == "ms"
    return data["traceEvents"]


def assert_iteration_trace(events: list[dict], iteration_s: float | None = None) -> None:
    """Stages (``r0 s0``...) with their micro-batches' passes, the gradient buckets and the
    sends as X events, and the busiest links' counters."""
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"r0 s0", "r0 s1", "busiest links"} <= names
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] > 0 for e in spans)
    assert {"F0", "B0", "F1", "B1"} <= {e["name"] for e in spans if e["cat"] == "r0"}
    assert {"bucket 0"} <= {e["name"] for e in spans if e["cat"] == "dp"}
    assert any(e["cat"] == "send" for e in spans)
    assert any(e["ph"] == "C" for e in events)
    if iteration_s is not None:
        end_us = max(e["ts"] + e["dur"] for e in spans)
        assert end_us == pytest.approx(iteration_s * 1e6, rel=1e-9)


def test_job_selectors_use_the_job_columns(scenario):
    points = expand_sweep(load_scenario(scenario, expand=False))
    timeline = WORKLOADS[JOB].timeline
    [mesh] = select_trace_points(points, ["tp_mesh=2x2,pp=2"], timeline)
    assert [points[i].tp.d2 for i in mesh.indices] == [2]
    [one_d] = select_trace_points(points, ["tp_mesh=4x1"], timeline)
    assert [points[i].sequence_parallel for i in one_d.indices] == [True, False]
    [plain] = select_trace_points(points, ["tp_mesh=4x1,sequence_parallel=false"], timeline)
    assert [(points[i].tp.d1, points[i].sequence_parallel) for i in plain.indices] == [(4, False)]
    [best] = select_trace_points(points, ["best"], timeline)
    assert best.best and best.indices == (0, 1, 2)


def test_run_trace_best_writes_the_fastest_iteration(scenario, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(scenario), "-o", str(out), "--no-progress",
                                       "--trace", "best"])  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = read_results(out / "results.csv")
    fastest = frame.loc[frame["iteration_time_s"].idxmin()]
    written = sorted((out / "traces").glob("*.json"))
    assert [p.stem for p in written] == [fastest["point_key"]]
    assert str(written[0]) in result.output
    assert_iteration_trace(events_of(written[0]), fastest["iteration_time_s"])


def test_an_unknown_column_is_one_line_exit_2_before_simulating(scenario, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(scenario), "-o", str(out), "--trace", "mesh=4x1"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert "--trace" in result.output and "did you mean 'tp_mesh'" in result.output
    assert not out.exists()


def test_an_isolated_network_has_no_timeline(tmp_path):
    path = tmp_path / "isolated.yaml"
    path.write_text(SCENARIO.replace("global_batch: 8}", "global_batch: 8, network: isolated}"))
    result = CliRunner().invoke(main, ["run", str(path), "-o", str(tmp_path / "o"), "--trace", "best"])
    assert result.exit_code == 2 and "matches only points without a timeline" in result.output


def test_plan_global_batch_trace_writes_the_best_layout(tmp_path):
    target = tmp_path / "best.json"
    result = CliRunner().invoke(main, ["plan", "-t", "ib-cluster:2x8", "-m", "gpt3-125m",
                                       "--global-batch", "16", "--micro-batch", "1", "--pp", "2",
                                       "--max-tp", "4", "--top", "2", "--trace", str(target)])  # fmt: skip
    assert result.exit_code == 0, result.output
    best = next(line for line in result.output.splitlines() if line.startswith("best: "))
    assert f"trace of the best layout, {best.removeprefix('best: ')}: {target}" in result.output
    assert_iteration_trace(events_of(target))


def test_plan_trace_needs_a_folder_before_planning(tmp_path):
    result = CliRunner().invoke(main, ["plan", "-t", "ib-cluster:2x8", "-m", "gpt3-125m", "--global-batch", "16",
                                       "--trace", str(tmp_path / "no" / "t.json")])  # fmt: skip
    assert result.exit_code == 2 and "no folder to write the trace into" in result.output
