"""The final table is sorted from the rows on disk in bounded memory (issue 15): the bucket
sort gives every committed report's results.csv back byte for byte from its rows shuffled,
picks the row resuming keeps, and Parquet written a row group at a time reads back as the CSV."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
from sweep_fakes import fake_simulate, make_points

import atpsim.sweep.table as table_module
from atpsim.results.io import (
    format_line,
    header_line,
    read_results,
    read_rows,
    schema_for,
    write_parquet,
)
from atpsim.results.schema import ResultsError
from atpsim.sweep import run_sweep, simulate_row
from atpsim.sweep.table import PointIndex, write_table

REPORTS = Path(__file__).resolve().parents[2] / "reports"
COMMITTED = sorted(p for p in REPORTS.glob("*/results.csv"))


def index_of(keys: list[str]) -> PointIndex:
    index = PointIndex()
    for key in keys:
        index.add(key)
    return index


@pytest.mark.parametrize("table", COMMITTED, ids=lambda p: p.parent.name)
def test_every_committed_table_comes_back_byte_for_byte_from_its_rows_shuffled(
    tmp_path, monkeypatch, table
):
    """Buckets of 100 rows, so the larger tables take several."""
    monkeypatch.setattr(table_module, "ROWS_PER_BUCKET", 100)
    lines = table.read_text(encoding="utf-8").splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    random.Random(15).shuffle(body)
    (tmp_path / "partial.csv").write_text(header + "".join(body), encoding="utf-8")
    rows = read_rows(table)
    written = write_table(tmp_path, [(tmp_path / "partial.csv", True)],
                          index_of([r["point_key"] for r in rows]), schema_for(header.strip().split(",")),
                          parquet=False)  # fmt: skip
    assert written.path.read_bytes() == table.read_bytes()
    assert written.n_failed == sum(r["status"] == "failed" for r in rows)


def test_a_point_keeps_its_last_successful_row_else_its_last_row(tmp_path):
    a, b, c = make_points()[:3]
    schema = a.schema
    ok_a, ok_b = simulate_row(fake_simulate, a, 7), simulate_row(fake_simulate, b, 8)
    failed = {"status": "failed", "error": "boom"}
    old = [ok_a, {**ok_b, **failed, "step_time_s": None}]
    new = [{**ok_a, **failed}, {**simulate_row(fake_simulate, c, 9), **failed, "error": "late"},
           ok_b, {**simulate_row(fake_simulate, make_points()[5], 3)}]  # fmt: skip
    for name, rows in (("old.csv", old), ("new.csv", new)):
        text = header_line(schema) + "".join(format_line(r[n] for n in schema.names) for r in rows)
        (tmp_path / name).write_text(text, encoding="utf-8")
    index = index_of([a.key(), b.key(), c.key(), a.key()])
    written = write_table(tmp_path, [(tmp_path / "old.csv", False), (tmp_path / "new.csv", True)],
                          index, schema, parquet=False)  # fmt: skip
    got = read_rows(written.path)
    assert [r["point_key"] for r in got] == [a.key(), b.key(), c.key(), a.key()]
    assert [r["point_index"] for r in got] == [0, 1, 2, 3]
    assert [r["status"] for r in got] == ["ok", "ok", "failed", "ok"]
    assert written.n_failed == 1 and written.errors == ("late",)


def test_a_point_without_a_saved_row_is_an_error(tmp_path):
    point = make_points()[0]
    (tmp_path / "p.csv").write_text(header_line(point.schema), encoding="utf-8")
    with pytest.raises(ResultsError, match="no saved row for point 0"):
        write_table(tmp_path, [(tmp_path / "p.csv", True)], index_of([point.key()]),
                    point.schema, parquet=False)  # fmt: skip


def test_a_torn_last_line_of_the_partial_file_is_not_kept(tmp_path, caplog):
    """A crash mid-write can leave a line that parses but holds a cut-off number."""
    points = make_points()[:2]
    run_sweep(points, tmp_path / "full", simulate=fake_simulate, progress=False)
    text = (tmp_path / "full" / "results.csv").read_text()
    (tmp_path / "cut.csv").write_text(text[:-4], encoding="utf-8")  # ends inside a number
    assert len(read_rows(tmp_path / "cut.csv", partial=True)) == 1
    assert "skipping the last line, cut off by a crash" in caplog.text
    assert len(read_rows(tmp_path / "full" / "results.csv", partial=True)) == 2


def test_parquet_written_in_row_groups_reads_back_as_the_csv(tmp_path):
    import pyarrow.parquet as pq

    points = make_points(n_devices=16)
    run_sweep(points, tmp_path, simulate=fake_simulate, progress=False)
    write_parquet(tmp_path / "results.csv", tmp_path / "groups.parquet", rows=7)
    assert pq.ParquetFile(tmp_path / "groups.parquet").num_row_groups == 3  # 20 rows
    pd.testing.assert_frame_equal(read_results(tmp_path / "groups.parquet"),
                                  read_results(tmp_path / "results.csv"))  # fmt: skip
    pd.testing.assert_frame_equal(read_results(tmp_path / "results.parquet"),
                                  read_results(tmp_path / "results.csv"))  # fmt: skip
