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
#: How a caption or a header names each unit of TFLOP/s.
UNIT_NAMES = {"si": "SI, 10^12", "paper": "paper unit, 2^40"}


def ok_rows(frame: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Rows with status ok (and a value for *metric*, when given)."""
    rows = frame[frame["status"] == "ok"]
    if metric is not None:
        rows = rows[rows[metric].notna()]
    return rows


def ordered(values: pd.Series) -> list:
    """Distinct values in order of first appearance (the sweep's order)."""
    return list(pd.unique(values.dropna()))


def varying(
    frame: pd.DataFrame, columns: Sequence[str], within: str | Sequence[str] | None = None
) -> list[str]:
    """Those of *columns* that take more than one value in *frame* (in some group of rows
    sharing the column(s) *within*, when given)."""
    within = [within] if isinstance(within, str) else list(within or ())
    columns = [c for c in columns if c not in within]
    if not within or not columns:
        return [c for c in columns if frame[c].nunique(dropna=False) > 1]
    counts = frame.groupby(within, sort=False, dropna=False)[columns].nunique(dropna=False)
    return [c for c in columns if len(counts) and counts[c].max() > 1]


#: Columns whose value alone labels a panel or table column (no ``name=`` before it).
BARE_LABELS = ("topology", "model", "placement", "algorithm", "hardware")


def value_labels(frame: pd.DataFrame, names: Sequence[str]) -> pd.Series:
    """A label per row naming its values of the columns *names*, e.g. ``ic5, 16 GPUs,
    algorithm=ring`` (:data:`BARE_LABELS` and the GPU count read without their name);
    empty for no names."""
    if not names:
        return pd.Series("", index=frame.index, dtype=object)
    named = pd.DataFrame({n: _named(frame[n]) for n in names}, index=frame.index)
    return named.agg(", ".join, axis=1)


def _named(values: pd.Series) -> pd.Series:
    text = values.astype(str)
    if values.name == "n_devices":
        return text + " GPUs"
    return text if values.name in BARE_LABELS else f"{values.name}=" + text


def panel_labels(
    frame: pd.DataFrame,
    facets: Sequence[str],
    columns: Sequence[str] | None = None,
    rows: Sequence[str] | None = None,
) -> tuple[pd.Series, pd.Series]:
    """(column label, row label) of each point's panel. Panel columns: the values of
    *columns* (default: the topology); rows: the values of *rows* (default none) followed by
    those of *facets* that still vary inside a panel, so no panel mixes points."""
    across = list(columns) if columns is not None else ["topology"]
    down = list(rows or ())
    rest = [f for f in facets if f not in across and f not in down]
    down += varying(frame, rest, within=across + down)
    return value_labels(frame, across), value_labels(frame, down)


def select_rows(frame: pd.DataFrame, select: Sequence[tuple[str, Sequence[str]]]) -> pd.DataFrame:
    """Rows whose column takes one of the given values, for every (column, values) pair of
    *select*; values compare as lower-cased text (``M4`` = ``m4``, ``1`` = 1)."""
    keep = pd.Series(True, index=frame.index)
    for name, values in select:
        text = frame[name].astype(str).str.lower()
        keep &= text.isin([str(v).lower() for v in values])
    return frame[keep]


def best_per_group(frame: pd.DataFrame, metric: str, *, maximize: bool) -> pd.DataFrame:
    """The best row (by *metric*) of each group key: the ATP-OPT rows."""
    grouped = frame[frame["group_key"].notna() & frame[metric].notna()]
    if grouped.empty:
        return grouped
    pick = grouped.groupby("group_key", sort=False)[metric]
    index = pick.idxmax() if maximize else pick.idxmin()
    return grouped.loc[list(index)]


def mesh_rows(frame: pd.DataFrame, atp_i: int) -> pd.DataFrame:
    """Rows of ATP-*atp_i*, i.e. DeviceMesh(N / i, i) (not a SUMMA grid's rows)."""
    atp = atp_rows(frame)
    return atp[(atp["atp_i"] == atp_i) & (atp["d1"] * atp["d2"] == atp["n_devices"])]


def atp_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of ATP's scheme (a table written before the ``scheme`` column has only those)."""
    if "scheme" not in frame.columns:
        return frame
    return frame[frame["scheme"].isna() | (frame["scheme"] == "atp")]
