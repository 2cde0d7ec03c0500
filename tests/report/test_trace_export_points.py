"""`atpsim run SCENARIO --trace SELECTOR`: selectors checked before simulating, and the chosen
points' timelines, read back by a real trace reader (HolisticTraceAnalysis's parser, skipped
where it is not installed; Perfetto's TraceProcessor downloads its binary at first use, which
this offline machine cannot)."""

import json

import pytest
from click.testing import CliRunner

from atpsim.api import expand_sweep, load_scenario, simulate_point
from atpsim.api.point_trace import select_trace_points, write_point_trace, write_point_traces
from atpsim.cli import main
from atpsim.errors import AtpsimError
from atpsim.parallel.atp import build_step_program

SCENARIO = """\
name: trace-points
topology: [nvswitch:4]
model: [{name: tiny, hidden: 256, heads: 8, layers: 1, batch: 2, seq: 64}]
parallelism: {devices: 4, meshes: [[2, 2], [4, 1]]}
chunks: [1, 2]
mode: [des, analytic]
"""


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "trace-points.yaml"
    path.write_text(SCENARIO)
    return path


@pytest.fixture
def points(scenario):
    return expand_sweep(load_scenario(scenario, expand=False))


def test_selectors_pick_points_by_results_columns(points):
    [mesh] = select_trace_points(points, ["mesh=2x2,chunks=2"])
    assert [(points[i].mesh_label, points[i].chunks, points[i].mode) for i in mesh.indices] == [
        ("2x2", 2, "des")]  # the analytic twin has no timeline
    [best] = select_trace_points(points, ["chunks=1,best"])
    assert best.best and len(best.indices) == 2
    [index] = select_trace_points(points, ["point_index=0"])
    assert index.indices == (0,)


@pytest.mark.parametrize(
    "selector, message",
    [
        ("meh=2x2", "unknown column 'meh'.*did you mean 'mesh'"),
        ("mesh", "expected COLUMN=VALUE or 'best'"),
        ("model=M9", "matches no point"),
        ("mode=analytic", "matches only analytic points"),
    ],
)
def test_bad_selectors_are_refused(points, selector, message):
    with pytest.raises(AtpsimError, match=message):
        select_trace_points(points, [selector])


def test_bad_selector_is_one_line_exit_2_before_simulating(scenario, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(scenario), "-o", str(out), "--trace", "meh=1"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert "--trace" in result.output and not out.exists()


def test_best_is_the_fastest_that_ran(points, tmp_path):
    """'best' among the selected rows that ran is the one with the shortest step."""
    import pandas as pd

    [selection] = select_trace_points(points, ["best"])
    rows = [{"point_index": i, "status": "ok", "step_time_s": t}
            for i, t in zip(selection.indices, [3.0, 1.0, 2.0, 0.5], strict=False)]
    rows[-1]["status"] = "failed"  # the fastest failed: not chosen
    written = write_point_traces(tmp_path, pd.DataFrame(rows), points, [selection])
    assert written == [tmp_path / "traces" / f"{points[selection.indices[1]].key()}.json"]


def test_exported_trace_is_the_points_step(points, tmp_path):
    point = points[next(iter(select_trace_points(points, ["mesh=2x2,chunks=2"])[0].indices))]
    path = write_point_trace(point, tmp_path)
    data = json.loads(path.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    end_us = max(e["ts"] + e["dur"] for e in events)
    assert end_us == pytest.approx(simulate_point(point)["step_time_s"] * 1e6, rel=1e-9)
    program = build_step_program(point.model, point.mesh, point.chunks)
    collectives = {e["name"] for e in events if e["tid"] != 0 and e["pid"] < 4}
    assert collectives == {op.name for op in program.comm_ops()}


@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_a_real_trace_reader_loads_the_exported_timeline(points, tmp_path):
    trace_module = pytest.importorskip("hta.common.trace", reason="HolisticTraceAnalysis not installed")
    point = points[select_trace_points(points, ["mesh=2x2,chunks=1"])[0].indices[0]]
    path = write_point_trace(point, tmp_path)
    trace = trace_module.Trace(trace_files={0: str(path)}, trace_dir=str(tmp_path))
    trace.parse_traces()
    frame = trace.get_trace(0)
    names = trace.symbol_table.sym_table
    program = build_step_program(point.model, point.mesh, point.chunks)
    rank0 = frame[frame["pid"] == 0]
    by_thread = {tid: [names[i] for i in part.sort_values("ts")["name"]]
                 for tid, part in rank0.groupby("tid")}
    assert by_thread[0] == [t.op.name for t in program.tasks if t.stream == "compute"]
    assert by_thread[1] == [t.op.name for t in program.tasks if t.stream == "comm"]
    step_us = simulate_point(point)["step_time_s"] * 1e6
    assert (frame["ts"] + frame["dur"]).max() == pytest.approx(step_us, abs=2.0)  # HTA rounds to us
