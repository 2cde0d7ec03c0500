"""The step workload's plain tables (its entry in :mod:`atpsim.report.workloads`), built from a
results frame into formatted :class:`Table` blocks (the Table 3 layout is
:mod:`atpsim.report.chunk_table`; the job workload's tables :mod:`atpsim.report.job_tables`),
and the cell format (:func:`fmt`) every report table shares.

- :func:`all_rows`: every row, main columns with readable headers (the full table is
  results.csv).
- :func:`failures`: failed points grouped by error message.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from atpsim.report.data import TFLOPS_COLUMNS
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


def all_rows(frame: pd.DataFrame, unit: str = "si") -> Table:
    """Every row of the table, main columns (units in the header), TFLOP/s in *unit*
    (:data:`~atpsim.report.data.TFLOPS_COLUMNS`); the columns of :data:`IF_VARYING` only
    where they take several values."""
    names = [TFLOPS_COLUMNS[unit] if c == "tflops_per_gpu" else c for c in ALL_ROWS_COLUMNS]
    names = [c for c in names if c not in IF_VARYING or frame[c].nunique(dropna=False) > 1]
    header = [header_text(c) for c in names]
    body = [[fmt(v) for v in row] for row in frame[names].astype(object).values]
    return Table(header, body)


#: Column headers a reader can take in; units in brackets (one unit per quantity and page:
#: seconds, GPUs, TFLOP/s in the unit the header names, Delta).
HEADERS = {
    "n_devices": "GPUs",
    "step_time_s": "step time [s]",
    "compute_time_s": "compute [s]",
    "comm_time_s": "communication [s]",
    "exposed_comm_s": "exposed comm. [s]",
    "tflops_per_gpu": "TFLOP/s per GPU [10^12]",
    "tflops_per_gpu_paper_unit": "TFLOP/s per GPU [2^40]",
    "comm_over_delta": "communication [Delta]",
    "memory_per_rank_bytes": "memory per GPU [B]",
    "fits_memory": "fits memory",
    "atp_i": "ATP-i",
}


def header_text(name: str) -> str:
    """The header of results column *name*: :data:`HEADERS`, else its words."""
    return HEADERS.get(name, name.replace("_", " "))


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
