"""The report's tables, built from a results frame into formatted :class:`Table` blocks.

- :func:`chunk_table`: the paper's Table 3 layout: rows model x chunk (Baseline, Chunk=2, ...),
  columns topology, predicted TFLOP/s per GPU in the paper's 2^40 unit, and the paper's value
  with the relative error beside each prediction when the scenario's ``reference`` holds it.
- :func:`all_rows`: every row, main columns (the full table is results.csv).
- :func:`failures`: failed points grouped by error message.

Reference cells (scenario key ``reference.table3``: model -> topology label -> chunks ->
the paper's TFLOP/s per GPU in its 2^40 unit; topology labels match case-insensitively)::

    reference:
      table3:                     # ATP paper, Table 3
        M2: {ic1: {1: 3.45, 2: 3.46, 4: 3.51}, ic2: {1: 42.82, 2: 43.59, 4: 43.73}}

The mesh of each (model, topology) is the one with the highest TFLOP/s at the smallest chunk
count (the paper: "the baseline represents the performance under the optimal ATP strategy,
and then we add chunk optimization"); the chunked rows use the same mesh.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from atpsim.errors import ScenarioError
from atpsim.report.data import ok_rows, ordered
from atpsim.report.document import Table

METRIC = "tflops_per_gpu_paper_unit"
ALL_ROWS_COLUMNS = (
    "topology",
    "n_devices",
    "model",
    "mesh",
    "chunks",
    "algorithm",
    "mode",
    "step_time_s",
    "comm_time_s",
    "exposed_comm_s",
    "tflops_per_gpu",
    "comm_over_delta",
    "fits_memory",
    "status",
)


def fmt(value: Any, digits: int = 4) -> str:
    """A cell: numbers to *digits* significant digits, missing values as an empty cell."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, f".{digits}g")
    return str(value)


def chunk_label(chunks: int, baseline: int) -> str:
    return "Baseline" if chunks == baseline else f"Chunk={chunks}"


def reference_cells(
    reference: Mapping[str, Any] | None, source: str | None = None
) -> dict[tuple[str, str, int], float]:
    """(model, topology lower-cased, chunks) -> the paper's value from ``reference.table3``;
    a malformed entry raises ScenarioError naming its key."""
    cells: dict[tuple[str, str, int], float] = {}
    table = (reference or {}).get("table3") or {}
    for model, topos in _mapping(table, "reference.table3", source).items():
        where = f"reference.table3.{model}"
        for topo, by_chunks in _mapping(topos, where, source).items():
            for chunks, value in _mapping(by_chunks, f"{where}.{topo}", source).items():
                key = f"{where}.{topo}.{chunks}"
                cells[(str(model), str(topo).lower(), _number(chunks, int, key, source))] = _number(
                    value, float, key, source
                )
    return cells


def _mapping(value: Any, key: str, source: str | None) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"expected a mapping, got {value!r}", source=source, key=key)
    return value


def _number(value: Any, kind: type, key: str, source: str | None) -> Any:
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError):
        what = "a chunk count" if kind is int else "a number"
        raise ScenarioError(f"expected {what}, got {value!r}", source=source, key=key) from None


def chosen_meshes(rows: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(model, topology) -> mesh with the best TFLOP/s at the smallest chunk count."""
    base = rows[rows["chunks"] == rows["chunks"].min()]
    best = base.loc[base.groupby(["model", "topology"], sort=False)[METRIC].idxmax()]
    return {(r.model, r.topology): r.mesh for r in best.itertuples()}


def chunk_table(frame: pd.DataFrame, reference: Mapping[str, Any] | None = None) -> Table | None:
    """Table 3's layout (see the module docstring); None without data."""
    rows = ok_rows(frame, METRIC)
    if rows.empty:
        return None
    meshes, paper = chosen_meshes(rows), reference_cells(reference)
    topologies, baseline = ordered(rows["topology"]), int(rows["chunks"].min())
    body = []
    for model in ordered(rows["model"]):
        for chunks in sorted(int(c) for c in rows["chunks"].unique()):
            cells = [_cell(rows, paper, meshes, model, t, chunks) for t in topologies]
            body.append([str(model), chunk_label(chunks, baseline), *cells])
    caption = "TFLOP/s per GPU (paper unit, 2^40); predicted [mesh]"
    if paper:
        caption += ", paper value and relative error where the paper has the cell"
    return Table(["model", "", *map(str, topologies)], body, caption)


def _cell(rows, paper, meshes, model: str, topology: str, chunks: int) -> str:
    mesh = meshes.get((model, topology))
    predicted = _predicted(rows, mesh, model, topology, chunks)
    if predicted is None:
        return ""
    text = f"{predicted:.2f} [{mesh}]"
    value = paper.get((model, topology.lower(), chunks))
    if value is not None:
        text += f" · paper {value:.2f} ({(predicted - value) / value:+.1%})"
    return text


def _predicted(rows, mesh: str | None, model: str, topology: str, chunks: int) -> float | None:
    match = rows[(rows["model"] == model) & (rows["topology"] == topology)]
    match = match[(match["mesh"] == mesh) & (match["chunks"] == chunks)]
    return None if match.empty else float(match[METRIC].max())


def reference_errors(frame: pd.DataFrame, reference: Mapping[str, Any] | None) -> list[float]:
    """Relative errors (predicted - paper) / paper of every Table 3 cell the paper has."""
    rows, paper = ok_rows(frame, METRIC), reference_cells(reference)
    if rows.empty or not paper:
        return []
    meshes, errors = chosen_meshes(rows), []
    for (model, topology), mesh in meshes.items():
        for chunks in sorted(int(c) for c in rows["chunks"].unique()):
            value = paper.get((model, topology.lower(), chunks))
            predicted = _predicted(rows, mesh, model, topology, chunks)
            if value is not None and predicted is not None:
                errors.append((predicted - value) / value)
    return errors


def all_rows(frame: pd.DataFrame) -> Table:
    """Every row of the table, main columns (units in the header)."""
    header = [_header(c) for c in ALL_ROWS_COLUMNS]
    body = [[fmt(v) for v in row] for row in frame[list(ALL_ROWS_COLUMNS)].astype(object).values]
    return Table(header, body, "All points (every column: results.csv)")


def _header(name: str) -> str:
    from atpsim.results.schema import column

    unit = column(name).unit
    return f"{name} [{unit}]" if unit and not name.endswith(("_s", "_Bps", "_bytes")) else name


def failures(frame: pd.DataFrame) -> Table | None:
    """Failed points grouped by error: count, an example point, the message. None if none."""
    failed = frame[frame["status"] == "failed"]
    if failed.empty:
        return None
    body = []
    for error, group in failed.groupby("error", sort=False, dropna=False):
        first = group.iloc[0]
        example = (
            f"{first['topology']} {first['model']} mesh {first['mesh']} chunks {first['chunks']}"
        )
        body.append([str(len(group)), example, fmt(error)])
    return Table(["points", "first point", "error"], body, "Failed points")
