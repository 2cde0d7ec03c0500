"""The report of a large table (issue 15, atpsim/report/large.py): summarized from results.csv a
chunk at a time, the same whatever the chunk size; best configurations, Pareto fronts by hand,
failures grouped; `atpsim report` takes this path past LARGE_ROWS rows."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

import atpsim.report.large as large
from atpsim.report.build import rebuild_report
from atpsim.results.io import read_results
from atpsim.sweep import run_sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sweep"))
from sweep_fakes import failing_simulate, make_points  # noqa: E402


@pytest.fixture()
def table(tmp_path: Path) -> Path:
    """48 points of 8, 16 and 32 GPUs, 2 models; the 10 with d2 == 2 fail."""
    points = make_points(8) + make_points(16) + make_points(32, chunks=(1,))
    run_sweep(points, tmp_path, simulate=failing_simulate, progress=False, parquet=False)
    return tmp_path / "results.csv"


def test_a_front_keeps_each_row_faster_than_every_row_before_it():
    rows = pd.DataFrame({"n_devices": [8, 8, 16, 32, 32, 64], "step_time_s": [3.0, 2.0, 2.5, 1.0, 1.0, 1.5],
                         "point_index": [0, 1, 2, 3, 4, 5]})  # fmt: skip
    front = large.pareto_front(rows, "n_devices", "step_time_s")
    assert front["point_index"].tolist() == [1, 3]  # 16 GPUs is slower than 8; a tie keeps the first


def test_the_summary_does_not_depend_on_the_chunk_size(table, monkeypatch):
    whole = large.summarize(table)
    monkeypatch.setattr(large, "CHUNK_ROWS", 7)
    chunked = large.summarize(table)
    assert (chunked.rows, chunked.failed) == (whole.rows, whole.failed) == (48, 10)
    assert chunked.top is not None and whole.top is not None
    assert chunked.top["point_index"].tolist() == whole.top["point_index"].tolist()
    assert sorted(whole.workloads()) == [("M1",), ("M2",)]
    for workload in whole.workloads():
        front = whole.front("gpus", workload)
        assert chunked.front("gpus", workload)["point_index"].tolist() == front["point_index"].tolist()
        assert len(front) > 1
    assert chunked.failures == whole.failures


def test_the_best_configurations_are_the_table_s_fastest_per_gpu(table):
    frame = read_results(table)
    ok = frame[frame["status"] == "ok"].sort_values(["tflops_per_gpu", "point_index"],
                                                   ascending=[False, True], kind="stable")  # fmt: skip
    summary = large.summarize(table)
    assert summary.top is not None
    assert summary.top["point_index"].tolist() == ok["point_index"].head(large.TOP).tolist()
    m1 = ok[ok["model"] == "M1"]
    expected = large.pareto_front(m1, "n_devices", "step_time_s")["point_index"].tolist()
    assert summary.front("gpus", ("M1",))["point_index"].tolist() == expected


def test_a_table_past_large_rows_gets_the_summary_report(table, monkeypatch):
    monkeypatch.setattr(large, "LARGE_ROWS", 40)
    written = rebuild_report(table.parent)
    text = (table.parent / "report.md").read_text()
    assert "48 points: 38 simulated, 10 failed. More than 40 rows" in text
    assert "## Best configurations" in text and "## Pareto fronts" in text
    assert "| 16 | fake | ic3 " not in text  # no row-by-row table
    assert "ZeroDivisionError: fake failure on d2 == 2" in text
    assert table.parent / "figures" / f"{large.FIGURE_STEM}.png" in written


def test_a_table_within_large_rows_keeps_the_full_report(table, monkeypatch):
    monkeypatch.setattr(large, "LARGE_ROWS", 48)
    rebuild_report(table.parent)
    assert "## Pareto fronts" not in (table.parent / "report.md").read_text()
