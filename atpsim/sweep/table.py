"""A sweep's final table, sorted by point from the rows saved on disk, in bounded memory.

Rows reach ``results.partial.csv`` in the order their points finish (and a resumed run's
rows sit in the previous ``results.csv`` too); ``results.csv`` holds one row per point in
point order, each with its point's index. :func:`write_table` puts them in order with a bucket
sort: each saved row goes, as its CSV text, to the bucket file of its point's position
(:func:`bucket_rows` positions a bucket); then each bucket is read back alone, ordered and
appended to the table. The driver holds the :class:`PointIndex` (a key and a position per
point, about 0.1 KB) and one bucket's rows, never the whole table; ``results.parquet`` is then
written from the CSV a row group at a time (:func:`atpsim.results.io.write_parquet`).

Which row a point gets: its last successful row, else its last row (the previous results.csv
first, then the partial file in append order): what resuming keeps, since successful points
are never simulated again and failed ones are. Points with equal keys were simulated once and
share the row, each under its own index.
"""

from __future__ import annotations

import csv
import io
import math
import os
import pickle
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from atpsim.results.io import (
    RESULTS_CSV,
    format_line,
    header_line,
    iter_rows,
    write_parquet_beside,
)
from atpsim.results.schema import ResultsError, ResultsSchema

#: Positions per bucket at least; more when the sweep would need over MAX_BUCKETS buckets.
ROWS_PER_BUCKET = 10_000
MAX_BUCKETS = 256
#: Distinct errors of failed rows a :class:`SweepTable` keeps.
MAX_ERRORS = 20


@dataclass
class PointIndex:
    """Where each point of a sweep goes in its table: the first position of each key, and
    the later positions of points with the same key (simulated once, a row each)."""

    first: dict[str, int] = field(default_factory=dict)
    repeats: dict[int, list[int]] = field(default_factory=dict)
    count: int = 0

    def add(self, key: str) -> bool:
        """Index the next point by its *key*; whether it is the first point with this key."""
        position, self.count = self.count, self.count + 1
        first = self.first.setdefault(key, position)
        if first != position:
            self.repeats.setdefault(first, []).append(position)
        return first == position

    def positions(self, key: str) -> list[int]:
        """The positions of the points with *key* (none for a key not in the sweep)."""
        first = self.first.get(key)
        return [] if first is None else [first, *self.repeats.get(first, ())]

    @property
    def unique(self) -> int:
        return len(self.first)


@dataclass(frozen=True)
class SweepTable:
    """What a finished sweep wrote: its tables' *files* (results.csv first), *n_points* rows
    of which *n_failed* failed, and the first :data:`MAX_ERRORS` distinct *errors*."""

    files: tuple[Path, ...]
    n_points: int
    n_failed: int
    errors: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.files[0]


def write_table(
    out: Path,
    sources: Sequence[tuple[Path, bool]],
    index: PointIndex,
    schema: ResultsSchema,
    parquet: bool = True,
) -> SweepTable:
    """Write ``out/results.csv`` (atomically) from the saved rows of *sources* (``(path,
    partial)`` pairs, oldest first), one row per point of *index* in point order, then
    results.parquet beside it when *parquet*. A point without a saved row is a ResultsError."""
    target = out / RESULTS_CSV
    with tempfile.TemporaryDirectory(dir=out, prefix=".results-sort-") as scratch:
        buckets = _distribute(sources, index, schema, Path(scratch))
        counts = _write_sorted(target, buckets, index.count, schema)
    return SweepTable((target, *write_parquet_beside(target, parquet)), index.count, *counts)


def bucket_rows(count: int) -> int:
    """Positions per bucket for a sweep of *count* points."""
    return max(ROWS_PER_BUCKET, math.ceil(count / MAX_BUCKETS))


def _distribute(
    sources: Sequence[tuple[Path, bool]], index: PointIndex, schema: ResultsSchema, folder: Path
) -> list[Path]:
    """Each saved row of a point in *index*, as ``(position, sequence, ok, CSV line)``, into
    the bucket file of each of its positions; the bucket files in position order."""
    per = bucket_rows(index.count)
    paths = [folder / f"{b}.pickle" for b in range(max(math.ceil(index.count / per), 1))]
    handles = [open(path, "wb") for path in paths]  # noqa: SIM115 (closed below)
    try:
        sequence = 0
        for path, partial in sources:
            for row in iter_rows(path, partial=partial) if path.exists() else ():
                line = format_line(row.get(name) for name in schema.names)
                ok = row["status"] == "ok"
                for position in index.positions(str(row["point_key"])):
                    pickle.dump((position, sequence, ok, line), handles[position // per])
                sequence += 1
    finally:
        for handle in handles:
            handle.close()
    return paths


def _write_sorted(
    target: Path, buckets: Sequence[Path], count: int, schema: ResultsSchema
) -> tuple[int, tuple[str, ...]]:
    """The table at *target* from the bucket files: (failed rows, distinct errors)."""
    point_index = schema.names.index("point_index")
    status, error = schema.names.index("status"), schema.names.index("error")
    failed, start = 0, 0
    errors: dict[str, None] = {}
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        handle.write(header_line(schema))
        for bucket in buckets:
            best = _best_rows(bucket)
            for position in range(start, min(start + bucket_rows(count), count)):
                if position not in best:
                    raise ResultsError(f"no saved row for point {position}", source=str(target))
                cells = next(csv.reader(io.StringIO(best[position][2])))
                cells[point_index] = str(position)
                handle.write(format_line(cells))
                if cells[status] == "failed":
                    failed += 1
                    if len(errors) < MAX_ERRORS:
                        errors.setdefault(cells[error])
            start += bucket_rows(count)
    os.replace(tmp, target)
    return failed, tuple(errors)


def _best_rows(bucket: Path) -> dict[int, tuple[bool, int, str]]:
    """Position -> (ok, sequence, line) of the row each position keeps: the last successful
    one, else the last one."""
    best: dict[int, tuple[bool, int, str]] = {}
    for position, sequence, ok, line in _entries(bucket):
        candidate = (ok, sequence, line)
        if position not in best or candidate[:2] > best[position][:2]:
            best[position] = candidate
    return best


def _entries(bucket: Path) -> Iterator[Any]:
    with open(bucket, "rb") as handle:
        yield from _unpickled(handle)


def _unpickled(handle: IO[bytes]) -> Iterator[Any]:
    while True:
        try:
            yield pickle.load(handle)
        except EOFError:
            return
