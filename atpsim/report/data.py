"""Selecting and grouping result rows for figures and tables (no plotting here).

ATP-OPT: points that share a ``group_key`` are the candidate meshes of one ATP-OPT choice
(see :meth:`atpsim.scenario.point.SweepPoint.group_key`); the report keeps the best of each
group *by the quantity it shows*: the lowest ``comm_over_delta`` in a communication plot, the
highest TFLOP/s in a throughput figure or table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

TFLOPS_COLUMNS = {"si": "tflops_per_gpu", "paper": "tflops_per_gpu_paper_unit"}
TFLOPS_LABELS = {
    "si": "TFLOP/s per GPU (10^12)",
    "paper": "TFLOP/s per GPU (paper unit, 2^40)",
}


def ok_rows(frame: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Rows with status ok (and a value for *metric*, when given)."""
    rows = frame[frame["status"] == "ok"]
    if metric is not None:
        rows = rows[rows[metric].notna()]
    return rows


def ordered(values: pd.Series) -> list:
    """Distinct values in order of first appearance (the sweep's order)."""
    return list(pd.unique(values.dropna()))


def varying(frame: pd.DataFrame, columns: Sequence[str], within: str | None = None) -> list[str]:
    """Those of *columns* that take more than one value in *frame* (in some group of rows
    sharing the column *within*, when given)."""
    if within is None:
        return [c for c in columns if frame[c].nunique(dropna=False) > 1]
    counts = frame.groupby(within, sort=False)[list(columns)].nunique(dropna=False)
    return [c for c in columns if len(counts) and counts[c].max() > 1]


def facet_labels(
    frame: pd.DataFrame, columns: Sequence[str], within: str | None = None
) -> pd.Series:
    """A label per row naming its values of the varying *columns* (e.g.
    ``model=M4, algorithm=ring``); empty when none varies."""
    names = varying(frame, columns, within)
    if not names:
        return pd.Series("", index=frame.index)
    named = pd.DataFrame({n: n + "=" + frame[n].astype(str) for n in names}, index=frame.index)
    return named.agg(", ".join, axis=1)


def best_per_group(frame: pd.DataFrame, metric: str, *, maximize: bool) -> pd.DataFrame:
    """The best row (by *metric*) of each group key: the ATP-OPT rows."""
    grouped = frame[frame["group_key"].notna() & frame[metric].notna()]
    if grouped.empty:
        return grouped
    pick = grouped.groupby("group_key", sort=False)[metric]
    index = pick.idxmax() if maximize else pick.idxmin()
    return grouped.loc[list(index)]


def mesh_rows(frame: pd.DataFrame, atp_i: int) -> pd.DataFrame:
    """Rows of ATP-*atp_i*, i.e. DeviceMesh(N / i, i)."""
    return frame[(frame["atp_i"] == atp_i) & (frame["d1"] * frame["d2"] == frame["n_devices"])]
