"""Reading and writing results tables: CSV always, Parquet where pyarrow is importable.

CSV is written by hand rather than by ``DataFrame.to_csv`` so that one function formats a value
whether it goes to the append-only partial file of a running sweep or to the final table:
floats with :data:`FLOAT_FORMAT` (10 significant digits), booleans as ``true``/``false``,
missing values as empty fields, ``\\n`` line ends, columns in schema order. The same rows
therefore always give the same bytes.

A table follows one :class:`~atpsim.results.schema.ResultsSchema`: the step table's by
default, a job scenario's (:data:`~atpsim.results.schema.JOB_SCHEMA`) when its writer says
so; a reader tells them apart by the header (:func:`schema_for`).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from atpsim.results.schema import (
    JOB_SCHEMA,
    JOB_UNCERTAINTY_SCHEMA,
    STEP_SCHEMA,
    STEP_UNCERTAINTY_SCHEMA,
    ResultsError,
    ResultsSchema,
)

log = logging.getLogger(__name__)

FLOAT_FORMAT = ".10g"
RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
PARTIAL_CSV = "results.partial.csv"
#: Every table a header may be, in the order it is matched: one that several could read is the
#: step table's.
TABLES: tuple[ResultsSchema, ...] = (STEP_SCHEMA, JOB_SCHEMA, STEP_UNCERTAINTY_SCHEMA, JOB_UNCERTAINTY_SCHEMA)


def schema_for(names: Iterable[str]) -> ResultsSchema:
    """The schema whose columns include every one of *names* (a header, a frame's columns);
    :class:`ResultsError` naming the first unknown column when none does."""
    names = list(names)
    for schema in TABLES:
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
    with RowAppender(path, schema, sync_every_s=0.0) as appender:
        appender.append(row)


#: Seconds between two fsyncs of a :class:`RowAppender` (each row is flushed at once).
SYNC_EVERY_S = 0.1


class RowAppender:
    """Appends rows to the CSV at *path* (the header first if the file is new or empty): each
    row is written and flushed to the operating system at once, so it survives the process
    being killed or interrupted right after, and fsync'ed at most every *sync_every_s* and on
    :meth:`close`, so a crash of the machine itself loses at most that much. An fsync per row
    costs 0.2-4 ms on the development machine's disk, more than a cheap point's simulation.
    The file is opened at the first row."""

    def __init__(self, path: Path, schema: ResultsSchema, sync_every_s: float = SYNC_EVERY_S):
        self.path, self.schema, self.sync_every_s = path, schema, sync_every_s
        self._handle: Any = None
        self._synced_s = 0.0

    def append(self, row: Mapping[str, Any]) -> None:
        if self._handle is None:
            if self.path.exists():
                drop_torn_line(self.path)
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._handle = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115
            self._handle.write(header_line(self.schema) if new else "")
        self._handle.write(row_line(row, self.schema))
        self._handle.flush()
        if time.monotonic() - self._synced_s >= self.sync_every_s:
            os.fsync(self._handle.fileno())
            self._synced_s = time.monotonic()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None

    def __enter__(self) -> RowAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_csv(
    path: Path, rows: Iterable[Mapping[str, Any]], schema: ResultsSchema = STEP_SCHEMA
) -> None:
    """Write *rows* (in the given order) as a complete CSV table of *schema*, atomically."""
    text = header_line(schema) + "".join(row_line(r, schema) for r in rows)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.replace(tmp, path)


def read_rows(path: Path, *, partial: bool = False) -> list[dict[str, Any]]:
    """Rows of the CSV at *path* as dicts of normalized values (:func:`iter_rows`)."""
    return list(iter_rows(path, partial=partial))


def iter_rows(path: Path, *, partial: bool = False) -> Iterator[dict[str, Any]]:
    """Rows of the CSV at *path* one at a time, as dicts of normalized values, so a table of
    any length is read in constant memory. With *partial* (the append-only file of a running
    sweep), a line that does not parse, or a last line without its newline (torn by a crash
    mid-write: it may parse and still hold a cut-off number), is skipped with a warning."""
    torn = partial and _ends_torn(path)
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(_text_lines(handle, path))
        header = next(reader, None)
        previous = next(reader, None)
        if header is None or previous is None:
            return
        schema = _check_header(path, header)
        for cells in reader:
            row = _parse(path, header, previous, partial, schema)
            if row:
                yield row
            previous = cells
        if previous is not None and torn:
            log.warning("%s: skipping the last line, cut off by a crash", path)
        elif previous is not None:
            row = _parse(path, header, previous, partial, schema)
            if row:
                yield row


def _text_lines(handle: Iterable[str], path: Path) -> Iterator[str]:
    """The lines of *handle*; binary data in the file is a ResultsError naming *path*."""
    try:
        yield from handle
    except UnicodeDecodeError as error:
        raise ResultsError(f"not a results table: expected UTF-8 text, found binary data "
                           f"at byte {error.start}", source=str(path)) from None  # fmt: skip


def drop_torn_line(path: Path) -> None:
    """Cut the last line of the CSV at *path* where a crash tore it (no newline at its end),
    so rows appended next start on a line of their own: glued to the torn text, the first of
    them would be unreadable and lost. The torn line is one :func:`iter_rows` skips anyway."""
    if not _ends_torn(path):
        return
    with open(path, "rb+") as handle:
        end = handle.seek(0, os.SEEK_END)
        while end > 0:
            start = max(end - 65536, 0)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                break
            end = start
        keep = start + found + 1 if end > 0 else 0
        handle.truncate(keep)
    log.warning("%s: dropped its last line, cut off by a crash", path)


def _ends_torn(path: Path) -> bool:
    """Whether the file at *path* ends without a newline (its last line was cut off)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


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
        header = next(csv.reader(_text_lines(handle, path)), [])
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
    ``results.parquet`` (:func:`write_parquet`); else an old results.parquet is removed.
    Returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / RESULTS_CSV]
    write_csv(written[0], frame_rows(frame), schema_for(frame.columns))
    return written + write_parquet_beside(written[0], parquet)


def write_parquet_beside(csv_path: Path, parquet: bool = True) -> list[Path]:
    """``results.parquet`` beside the table at *csv_path* (:func:`write_parquet`) when
    *parquet* and pyarrow is importable, else remove a stale one; the paths written."""
    target = csv_path.with_name(RESULTS_PARQUET)
    if parquet and parquet_available():
        write_parquet(csv_path, target)
        return [target]
    target.unlink(missing_ok=True)
    return []


#: Rows per Parquet row group, and per chunk read while writing one (5,000 rows of the step
#: table take about 15 MB as dicts).
PARQUET_ROWS_PER_GROUP = 5_000


def write_parquet(csv_path: Path, parquet_path: Path, rows: int = PARQUET_ROWS_PER_GROUP) -> None:
    """Write the table at *csv_path* as Parquet at *parquet_path* (atomically), holding exactly
    what the CSV holds (values as the CSV rounds them, read through :func:`to_frame`, so both
    files read back to the same table), *rows* rows at a time: a row group each, so a table of
    any length is converted in constant memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(csv_path, encoding="utf-8", newline="") as handle:
        schema = _check_header(csv_path, next(csv.reader(handle), []))
    tmp = parquet_path.with_name(parquet_path.name + ".tmp")
    writer: Any = None
    try:
        for chunk in _chunks(iter_rows(csv_path), rows):
            columns = {name: [row[name] for row in chunk] for name in schema.names}
            frame = pd.DataFrame(columns).astype(schema.pandas_dtypes())
            table = pa.Table.from_pandas(frame, preserve_index=False,
                                         schema=writer.schema if writer else None)  # fmt: skip
            writer = writer or pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        if writer is None:
            to_frame([], schema).to_parquet(tmp, index=False)
    finally:
        if writer is not None:
            writer.close()
    os.replace(tmp, parquet_path)


def _chunks(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
