"""The declared results schema: required columns in order, rows normalized to it."""

from __future__ import annotations

import math
import pathlib

import pandas as pd
import pytest

from atpsim.results.io import schema_for
from atpsim.results.schema import (
    COLUMN_NAMES,
    COLUMNS,
    JOB_SCHEMA,
    POINT_COLUMNS,
    SCHEMAS,
    STEP_SCHEMA,
    STEP_UNCERTAINTY_SCHEMA,
    WORKLOADS,
    ResultsError,
    column,
    describe_schema,
    normalize_row,
    pandas_dtypes,
    workload_of,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]

REQUIRED = (
    "scenario point_key topology n_devices model hidden heads layers batch seq dtype d1 d2 mesh "
    "atp_i chunks algorithm mode step_time_s compute_time_s comm_time_s exposed_comm_s "
    "tflops_per_gpu tflops_per_gpu_paper_unit comm_over_delta group_bw_Bps "
    "memory_per_rank_bytes fits_memory status error"
).split()


def test_required_columns_come_first_in_order():
    assert COLUMN_NAMES[: len(REQUIRED)] == tuple(REQUIRED)


def test_every_column_is_declared_once_with_a_dtype_and_description():
    assert len(set(COLUMN_NAMES)) == len(COLUMNS)
    assert all(c.dtype in ("string", "int", "float", "bool") and c.description for c in COLUMNS)
    assert set(POINT_COLUMNS) <= set(COLUMN_NAMES)
    assert set(pandas_dtypes()) == set(COLUMN_NAMES)


def test_units_follow_the_house_style():
    assert column("step_time_s").unit == "s"
    assert column("group_bw_Bps").unit == "B/s"
    assert column("memory_per_rank_bytes").unit == "B"


def test_normalize_fills_missing_columns_and_coerces():
    row = normalize_row({"n_devices": "8", "step_time_s": 1, "fits_memory": "false"})
    assert list(row) == list(COLUMN_NAMES)
    assert row["n_devices"] == 8 and row["step_time_s"] == 1.0 and row["fits_memory"] is False
    assert row["status"] == "ok" and row["error"] is None


def test_nan_becomes_missing():
    assert normalize_row({"comm_over_delta": math.nan})["comm_over_delta"] is None


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ({"step_time": 1.0}, "unknown results column 'step_time' (did you mean 'step_time_s'?)"),
        ({"n_devices": 2.5}, "'n_devices' expects int"),
        ({"step_time_s": "fast"}, "'step_time_s' expects float"),
        ({"status": "maybe"}, "'status' must be one of"),
    ],
)
def test_bad_rows_are_rejected_with_the_column(values, text):
    with pytest.raises(ResultsError, match=None) as info:
        normalize_row(values)
    assert text in str(info.value)


def test_describe_schema_is_a_markdown_table():
    text = describe_schema()
    assert text.count("\n") == len(COLUMNS) + 1
    assert "| step_time_s | float | s |" in text


def test_each_workload_has_one_schema_and_is_told_by_its_columns():
    """``step`` and ``job`` tables are declared here side by side; a table is a job's exactly
    when it has the job schema's ``iteration_time_s`` (a step table with draws is a step's)."""
    assert tuple(SCHEMAS) == WORKLOADS == ("step", "job")
    assert SCHEMAS["step"] is STEP_SCHEMA and SCHEMAS["job"] is JOB_SCHEMA
    assert [s.workload for s in (STEP_SCHEMA, JOB_SCHEMA, STEP_UNCERTAINTY_SCHEMA)] == [
        "step", "job", "step"]  # fmt: skip
    assert workload_of(pd.DataFrame(columns=list(JOB_SCHEMA.names))) == "job"
    assert workload_of(["status", "iteration_time_s"]) == "job"
    assert workload_of(pd.DataFrame(columns=["status"])) == "step"


def test_every_committed_table_has_the_workload_its_schema_says():
    """The workload of each committed results.csv (by its header) is that of the schema that
    reads it: the job reports are the job scenarios'."""
    found = {}
    for path in sorted((ROOT / "reports").glob("*/results.csv")):
        header = pd.read_csv(path, nrows=0).columns.tolist()
        found[path.parent.name] = workload_of(header)
        assert schema_for(header).workload == found[path.parent.name], path
    assert {"gpt-scale": "job", "joint-network": "job", "fig11": "step"}.items() <= found.items()
