"""Reading and writing results tables: CSV always, Parquet where pyarrow is importable.

CSV is written by hand rather than by ``DataFrame.to_csv`` so that one function formats a value
whether it goes to the append-only partial file of a running sweep or to the final table:
floats with :data:`FLOAT_FORMAT` (10 significant digits), booleans as ``true``/``false``,
missing values as empty fields, ``\\n`` line ends, columns in schema order. The same rows
therefore always give the same bytes.
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

from atpsim.results.schema import COLUMN_NAMES, ResultsError, normalize_row, pandas_dtypes

log = logging.getLogger(__name__)

FLOAT_FORMAT = ".10g"
RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
PARTIAL_CSV = "results.partial.csv"


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


def header_line() -> str:
    return format_line(COLUMN_NAMES)


def row_line(row: Mapping[str, Any]) -> str:
    """The CSV line of *row* (normalized to the schema first)."""
    full = normalize_row(row)
    return format_line(full[name] for name in COLUMN_NAMES)


def append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Append *row* to the CSV at *path* (writing the header if the file is new), then flush
    and fsync, so the row survives a crash or Ctrl-C right after."""
    text = row_line(row)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write((header_line() if new else "") + text)
        handle.flush()
        os.fsync(handle.fileno())


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write *rows* (in the given order) as a complete CSV table, atomically."""
    text = header_line() + "".join(row_line(r) for r in rows)
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
        _check_header(path, header)
        return [row for row in (_parse(path, header, cells, partial) for cells in reader) if row]


def _check_header(path: Path, header: list[str]) -> None:
    unknown = [name for name in header if name not in COLUMN_NAMES]
    if unknown:
        raise ResultsError(
            f"unknown column {unknown[0]!r}; expected the columns of atpsim.results.schema",
            source=str(path),
        )


def _parse(path: Path, header: list[str], cells: list[str], partial: bool) -> dict[str, Any] | None:
    try:
        if len(cells) != len(header):
            raise ResultsError(f"expected {len(header)} fields, got {len(cells)}")
        return normalize_row(
            {k: (v if v != "" else None) for k, v in zip(header, cells, strict=True)}
        )
    except ResultsError as error:
        if not partial:
            raise ResultsError(error.message, source=str(path)) from None
        log.warning("%s: skipping an unreadable line (%s)", path, error.message)
        return None


def to_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A DataFrame with every schema column, in order, with its nullable pandas dtype."""
    normalized = [normalize_row(r) for r in rows]
    frame = pd.DataFrame(normalized, columns=list(COLUMN_NAMES))
    return frame.astype(pandas_dtypes())


def read_results(path: Path) -> pd.DataFrame:
    """The results table at *path* (a .csv or .parquet file, or a folder holding results.csv)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.exists():
        raise ResultsError("no results table here (expected results.csv)", source=str(path))
    if path.suffix == ".parquet":
        return to_frame(pd.read_parquet(path).to_dict("records"))
    return to_frame(read_rows(path))


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
    write_csv(written[0], frame_rows(frame))
    stale = out_dir / RESULTS_PARQUET
    if parquet and parquet_available():
        written.append(stale)
        read_results(written[0]).to_parquet(stale, index=False)
    else:
        stale.unlink(missing_ok=True)
    return written
