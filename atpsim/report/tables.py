"""The report's plain tables, built from a results frame into formatted :class:`Table` blocks
(the Table 3 layout is :mod:`atpsim.report.chunk_table`).

- :func:`all_rows`: every row, main columns (the full table is results.csv).
- :func:`failures`: failed points grouped by error message.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from atpsim.report.document import Table

ALL_ROWS_COLUMNS = (
    "topology",
    "n_devices",
    "model",
    "mesh",
    "scheme",
    "placement",
    "chunks",
    "algorithm",
    "hardware",
    "mode",
    "step_time_s",
    "comm_time_s",
    "exposed_comm_s",
    "tflops_per_gpu",
    "comm_over_delta",
    "fits_memory",
    "status",
)

IF_VARYING = ("scheme", "placement", "hardware")


def fmt(value: Any, digits: int = 4) -> str:
    """A cell: numbers to *digits* significant digits, missing values as an empty cell."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, f".{digits}g")
    return str(value)


def all_rows(frame: pd.DataFrame) -> Table:
    """Every row of the table, main columns (units in the header); the columns of
    :data:`IF_VARYING` only where they take several values."""
    names = [
        c for c in ALL_ROWS_COLUMNS if c not in IF_VARYING or frame[c].nunique(dropna=False) > 1
    ]
    header = [_header(c) for c in names]
    body = [[fmt(v) for v in row] for row in frame[names].astype(object).values]
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


def uneven_heads_note(frame: pd.DataFrame) -> str | None:
    """A sentence on the ATP rows whose attention heads do not divide over the mesh (d1·d2),
    which the simulator splits evenly anyway (``heads_not_divisible_by_mesh`` in
    :mod:`atpsim.parallel.atp`); None when there are none."""
    needed = {"heads", "d1", "d2", "status"}
    if not needed <= set(frame.columns):
        return None
    rows = frame[(frame["status"] == "ok") & frame["d1"].notna() & frame["d2"].notna()]
    size = rows["d1"].astype("int64") * rows["d2"].astype("int64")
    uneven = rows[(rows["heads"].astype("int64") % size) != 0]
    if uneven.empty:
        return None
    first = uneven.iloc[0]
    return (
        f"Note: {len(uneven)} of the {len(rows)} simulated mesh points have attention heads "
        f"that do not divide over d1·d2 (e.g. {int(first['heads'])} heads on "
        f"{int(first['d1'])}x{int(first['d2'])}); the simulator splits the attention core's "
        "work evenly anyway, so those rows approximate a run that would need padded heads."
    )
