"""Reading and writing results tables: CSV always, Parquet where pyarrow is importable.

CSV is written by hand rather than by ``DataFrame.to_csv`` so that one function formats a value
whether it goes to the append-only partial file of a running sweep or to the final table:
floats with :data:`FLOAT_FORMAT` (10 significant digits), booleans as ``true``/``false``,
missing values as empty fields, ``\\n`` line ends, columns in schema order. The same rows
therefore always give the same bytes.

A table follows one :class:`~atpsim.results.schema.ResultsSchema`: the step table's by
default, a job scenario's (:data:`~atpsim.results.job_schema.JOB_SCHEMA`) when its writer says
so; a reader tells them apart by the header (:func:`schema_for`).
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from atpsim.results.job_schema import JOB_SCHEMA
from atpsim.results.schema import STEP_SCHEMA, STEP_UNCERTAINTY_SCHEMA, ResultsError, ResultsSchema

log = logging.getLogger(__name__)

FLOAT_FORMAT = ".10g"
RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
PARTIAL_CSV = "results.partial.csv"
#: Every results schema; a header that both could read is the step table's.
SCHEMAS: tuple[ResultsSchema, ...] = (STEP_SCHEMA, JOB_SCHEMA, STEP_UNCERTAINTY_SCHEMA)


def schema_for(names: Iterable[str]) -> ResultsSchema:
    """The schema whose columns include every one of *names* (a header, a frame's columns);
    :class:`ResultsError` naming the first unknown column when none does."""
    names = list(names)
    for schema in SCHEMAS:
        if set(names) <= set(schema.names):
            return schema
    unknown = [n for n in names if n not in STEP_SCHEMA.names]
    raise ResultsError(
        f"unknown column {unknown[0]!r}; expected the columns of atpsim.results.schema"
    )


def format_value(value: Any) -> str:
    """The CSV text of one cell."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return ""
        return format(value, FLOAT_FORMAT)
    return str(value)


def format_line(values: Iterable[Any]) -> str:
    """One CSV line (with its newline) from the cells *values*."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([format_value(v) for v in values])
    return buffer.getvalue()


def header_line(schema: ResultsSchema = STEP_SCHEMA) -> str:
    return format_line(schema.names)


def row_line(row: Mapping[str, Any], schema: ResultsSchema = STEP_SCHEMA) -> str:
    """The CSV line of *row* (normalized to *schema* first)."""
    full = schema.normalize_row(row)
    return format_line(full[name] for name in schema.names)


def append_row(path: Path, row: Mapping[str, Any], schema: ResultsSchema = STEP_SCHEMA) -> None:
    """Append *row* to the CSV at *path* (writing the header if the file is new), then flush
    and fsync, so the row survives a crash or Ctrl-C right after."""
    text = row_line(row, schema)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write((header_line(schema) if new else "") + text)
        handle.flush()
        os.fsync(handle.fileno())


def write_csv(
    path: Path, rows: Iterable[Mapping[str, Any]], schema: ResultsSchema = STEP_SCHEMA
) -> None:
    """Write *rows* (in the given order) as a complete CSV table of *schema*, atomically."""
    text = header_line(schema) + "".join(row_line(r, schema) for r in rows)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.replace(tmp, path)


def read_rows(path: Path, *, partial: bool = False) -> list[dict[str, Any]]:
    """Rows of the CSV at *path* as dicts of normalized values. With *partial*, a line that
    does not parse (the torn last line of a crashed sweep) is skipped with a warning."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return []
        schema = _check_header(path, header)
        rows = (_parse(path, header, cells, partial, schema) for cells in reader)
        return [row for row in rows if row]


def _check_header(path: Path, header: list[str]) -> ResultsSchema:
    try:
        return schema_for(header)
    except ResultsError as error:
        raise ResultsError(error.message, source=str(path)) from None


def _parse(
    path: Path, header: list[str], cells: list[str], partial: bool, schema: ResultsSchema
) -> dict[str, Any] | None:
    try:
        if len(cells) != len(header):
            raise ResultsError(f"expected {len(header)} fields, got {len(cells)}")
        return schema.normalize_row(
            {k: (v if v != "" else None) for k, v in zip(header, cells, strict=True)}
        )
    except ResultsError as error:
        if not partial:
            raise ResultsError(error.message, source=str(path)) from None
        log.warning("%s: skipping an unreadable line (%s)", path, error.message)
        return None


def to_frame(
    rows: Iterable[Mapping[str, Any]], schema: ResultsSchema | None = None
) -> pd.DataFrame:
    """A DataFrame with every column of *schema* (default: the one the first row's columns
    belong to, else the step table's), in order, with its nullable pandas dtype."""
    listed = list(rows)
    schema = schema or (schema_for(listed[0]) if listed else STEP_SCHEMA)
    normalized = [schema.normalize_row(r) for r in listed]
    frame = pd.DataFrame(normalized, columns=list(schema.names))
    return frame.astype(schema.pandas_dtypes())


def read_results(path: Path) -> pd.DataFrame:
    """The results table at *path* (a .csv or .parquet file, or a folder holding results.csv)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.exists():
        raise ResultsError("no results table here (expected results.csv)", source=str(path))
    if path.suffix == ".parquet":
        table = pd.read_parquet(path)
        return to_frame(table.to_dict("records"), schema_for(table.columns))
    with open(path, encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    return to_frame(read_rows(path), _check_header(path, header) if header else None)


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of *frame* as plain dicts (pandas NA -> None)."""
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{str(k): v for k, v in r.items()} for r in records]


def parquet_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_results(out_dir: Path, frame: pd.DataFrame, *, parquet: bool = True) -> list[Path]:
    """Write *frame* as ``out_dir/results.csv`` and, when *parquet* and pyarrow is importable,
    ``results.parquet`` holding exactly what the CSV holds (values rounded to the CSV's
    format), so both read back to the same table; else an old results.parquet is removed.
    Returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / RESULTS_CSV]
    write_csv(written[0], frame_rows(frame), schema_for(frame.columns))
    stale = out_dir / RESULTS_PARQUET
    if parquet and parquet_available():
        written.append(stale)
        read_results(written[0]).to_parquet(stale, index=False)
    else:
        stale.unlink(missing_ok=True)
    return written
