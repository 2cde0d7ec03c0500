"""CSV/Parquet round trips: fixed formatting, byte-stable rewrites, torn partial lines."""

from __future__ import annotations

import pytest

from atpsim.results.io import (
    append_row,
    format_value,
    frame_rows,
    parquet_available,
    read_results,
    read_rows,
    to_frame,
    write_csv,
    write_results,
)
from atpsim.results.schema import COLUMN_NAMES, ResultsError

ROWS = [
    {"scenario": "s", "point_key": "a", "n_devices": 8, "d1": 8, "d2": 1, "mesh": "8x1",
     "step_time_s": 0.1 + 0.2, "tflops_per_gpu": 123.456789012345, "fits_memory": True,
     "point_index": 0},
    {"scenario": "s", "point_key": "b", "n_devices": 8, "d1": 4, "d2": 2, "mesh": "4x2",
     "status": "failed", "error": "boom, with a comma and \"quotes\"", "point_index": 1},
]  # fmt: skip


def test_values_have_one_fixed_format():
    assert format_value(0.1 + 0.2) == "0.3"
    assert format_value(1 / 3) == "0.3333333333"
    assert format_value(2.5e-7) == "2.5e-07"
    assert format_value(True) == "true"
    assert format_value(None) == ""
    assert format_value(float("nan")) == ""


def test_csv_round_trip_is_byte_identical(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    write_csv(first, ROWS)
    write_csv(second, read_rows(first))
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().splitlines()[0] == ",".join(COLUMN_NAMES)


def test_frame_has_schema_columns_and_nullable_dtypes(tmp_path):
    write_results(tmp_path, to_frame(ROWS), parquet=False)
    frame = read_results(tmp_path)
    assert list(frame.columns) == list(COLUMN_NAMES)
    assert str(frame["n_devices"].dtype) == "Int64"
    assert frame["step_time_s"].isna().tolist() == [False, True]
    assert frame_rows(frame)[1]["error"] == ROWS[1]["error"]


@pytest.mark.skipif(not parquet_available(), reason="pyarrow not installed")
def test_parquet_matches_csv(tmp_path):
    written = write_results(tmp_path, to_frame(ROWS))
    assert [p.name for p in written] == ["results.csv", "results.parquet"]
    from_parquet = read_results(tmp_path / "results.parquet")
    assert frame_rows(from_parquet) == frame_rows(read_results(tmp_path))


def test_append_writes_header_once_and_keeps_rows(tmp_path):
    path = tmp_path / "partial.csv"
    for row in ROWS:
        append_row(path, row)
    assert path.read_text().count("scenario,point_key") == 1
    assert [r["point_key"] for r in read_rows(path)] == ["a", "b"]


def test_a_torn_last_line_is_skipped_only_in_partial_files(tmp_path):
    path = tmp_path / "partial.csv"
    append_row(path, ROWS[0])
    with open(path, "a") as handle:
        handle.write("s,c,ic1,8")
    assert [r["point_key"] for r in read_rows(path, partial=True)] == ["a"]
    with pytest.raises(ResultsError, match="partial.csv: expected"):
        read_rows(path)


def test_unknown_columns_in_a_file_are_reported(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("scenario,speed\ns,1\n")
    with pytest.raises(ResultsError, match="unknown column 'speed'"):
        read_rows(path)


def test_missing_table_is_a_clean_error(tmp_path):
    with pytest.raises(ResultsError, match="no results table"):
        read_results(tmp_path)
