"""The paper's Table 3 layout: rows model x chunks (Baseline, Chunk=2, ...), columns topology,
TFLOP/s per GPU in the report's unit (the paper's 2^40 by default, ``si``: 10^12), with the
paper's value (converted to that unit) and the relative error beside each cell the scenario's
``reference`` holds.

One table per mode: the simulated rows (des) are the prediction; the analytic model's rows,
when the table has them, get a table of their own (never mixed into the prediction).

Each cell belongs to one *configuration*: every point column except the mesh and the chunk
count (topology, device count, hardware, algorithm, model and its sizes, mode). The mesh of a
configuration is the one with the highest TFLOP/s at its smallest chunk count (the paper:
"the baseline represents the performance under the optimal ATP strategy, and then we add
chunk optimization"); its chunked rows use that mesh. A column is one topology, with the
device count, hardware, algorithm or batch/sequence when they vary within the topology; a row
is one model.

Reference cells come from the scenario's ``reference.table3`` (model -> topology label ->
chunks -> the paper's TFLOP/s per GPU in its 2^40 unit; topology labels match
case-insensitively), typed as :class:`~atpsim.scenario.report.Reference`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from atpsim.report.data import TFLOPS_COLUMNS, UNIT_NAMES, ok_rows, ordered, value_labels, varying
from atpsim.report.document import Table
from atpsim.scenario.report import Reference

METRIC = "tflops_per_gpu_paper_unit"
COLUMN_KEYS = ("topology", "n_devices", "hardware", "algorithm", "batch", "seq", "dtype")
ROW_KEYS = ("model", "hidden", "heads", "layers")
CONFIG_COLUMNS = (*COLUMN_KEYS, *ROW_KEYS, "mode")
MODE_ORDER = ("des", "analytic")
MODE_NAMES = {"des": "simulated (des)", "analytic": "analytic model (Eq. 2)"}
#: The paper's cells are in 2^40 FLOP/s; this many of them make one 10^12 FLOP/s.
PAPER_TO_SI = 2.0**40 / 1e12


def chunk_label(chunks: int, baseline: int) -> str:
    return "Baseline" if chunks == baseline else f"Chunk={chunks}"


def reference_cells(
    reference: Reference | None, unit: str = "paper"
) -> dict[tuple[str, str, int], float]:
    """(model, topology lower-cased, chunks) -> the paper's value from *reference*'s Table 3,
    in *unit* (the paper's own 2^40, or converted to 10^12 for ``si``)."""
    scale = PAPER_TO_SI if unit == "si" else 1.0
    return {k: v * scale for k, v in reference.cells().items()} if reference is not None else {}


def modes(frame: pd.DataFrame) -> list[str]:
    """The modes with Table 3 data, des first (the prediction), then analytic, then others."""
    present = ordered(ok_rows(frame, METRIC)["mode"])
    return [m for m in MODE_ORDER if m in present] + [m for m in present if m not in MODE_ORDER]


def config_keys(rows: pd.DataFrame) -> pd.Series:
    """Each row's configuration: its values of :data:`CONFIG_COLUMNS` as one text key."""
    return rows[list(CONFIG_COLUMNS)].astype(str).agg("|".join, axis=1)


def chosen_rows(rows: pd.DataFrame, metric: str = METRIC) -> pd.DataFrame:
    """The rows on the mesh chosen for their configuration: the mesh (and placement) with the
    highest TFLOP/s (*metric*) at the configuration's smallest chunk count, at every chunk
    count."""
    if rows.empty:
        return rows
    config = config_keys(rows)
    smallest = rows["chunks"] == rows.groupby(config)["chunks"].transform("min")
    best = rows[smallest].groupby(config[smallest], sort=False)[metric].idxmax()
    on_mesh = config + "|" + rows["mesh"].astype(str) + "|" + rows["placement"].astype(str)
    return rows[on_mesh.isin(set(on_mesh.loc[list(best)]))]


def cells(frame: pd.DataFrame, mode: str, unit: str = "paper") -> pd.DataFrame:
    """The table's cells of *mode*, one per (row label, chunks, column label): the model,
    the topology, the chosen mesh (with its placement when the table has several) and the
    value in *unit* (:data:`~atpsim.report.data.TFLOPS_COLUMNS`; the largest where several
    points share a cell); ``best_mesh_text`` and ``best_value`` are the fastest of *every*
    mesh at that chunk count, which a chunked row on the Baseline's mesh may miss."""
    metric = TFLOPS_COLUMNS[unit]
    rows = ok_rows(frame, metric)
    rows = rows[rows["mode"] == mode]
    chosen = chosen_rows(rows, metric)
    if chosen.empty:
        return chosen.assign(row="", column="", mesh_text="", best_mesh_text="", best_value=0.0)
    across = ["topology", *varying(chosen, COLUMN_KEYS[1:], within="topology")]
    down = ["model", *varying(chosen, ROW_KEYS[1:], within="model")]
    placed = rows["placement"].nunique() > 1
    keys = ["row", "chunks", "column"]
    best = _best(_labelled(chosen, across, down, placed), keys, metric)
    overall = _best(_labelled(rows, across, down, placed), keys, metric)
    overall = overall[[*keys, "mesh_text", metric]].rename(
        columns={"mesh_text": "best_mesh_text", metric: "best_value"})
    merged = best[[*keys, "model", "topology", "mesh_text", metric]].merge(overall, on=keys)
    return merged.reset_index(drop=True)


def _labelled(rows: pd.DataFrame, across: list[str], down: list[str], placed: bool) -> pd.DataFrame:
    mesh_text = rows["mesh"] + (" " + rows["placement"].astype(str) if placed else "")
    return rows.assign(
        row=value_labels(rows, down), column=value_labels(rows, across), mesh_text=mesh_text
    )


def _best(labelled: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    return labelled.loc[labelled.groupby(keys, sort=False)[metric].idxmax()]


def chunk_tables(
    frame: pd.DataFrame, reference: Reference | None = None, unit: str = "paper"
) -> list[Table]:
    """Table 3's layout, one table per mode (des first); empty without data."""
    tables = (chunk_table(frame, reference, m, unit) for m in modes(frame))
    return [t for t in tables if t is not None]


def chunk_table(
    frame: pd.DataFrame, reference: Reference | None = None, mode: str = "des", unit: str = "paper"
) -> Table | None:
    """Table 3's layout for the rows of *mode*, TFLOP/s in *unit* (see the module
    docstring); None without data."""
    table = cells(frame, mode, unit)
    if table.empty:
        return None
    paper, baseline = reference_cells(reference, unit), int(table["chunks"].min())
    metric = TFLOPS_COLUMNS[unit]
    columns = ordered(table["column"])
    lookup = {(r.row, r.chunks, r.column): r for r in table.itertuples()}
    body = []
    for row in ordered(table["row"]):
        for chunks in sorted(int(c) for c in table.loc[table["row"] == row, "chunks"].unique()):
            texts = [_cell_text(lookup.get((row, chunks, c)), paper, metric) for c in columns]
            body.append([str(row), chunk_label(chunks, baseline), *texts])
    caption = f"TFLOP/s per GPU ({UNIT_NAMES[unit]}), {MODE_NAMES.get(mode, mode)}: value [mesh]"
    if paper:
        caption += ", paper value and relative error where the paper has the cell"
    if len(body) > len(ordered(table["row"])):
        caption += (
            "; the Chunk rows keep the Baseline's mesh (the paper's method), and 'best' gives "
            "the fastest mesh at that chunk count where it differs"
        )
    return Table(["model", "", *map(str, columns)], body, caption)


def _cell_text(cell: Any, paper: Mapping[tuple[str, str, int], float], metric: str) -> str:
    if cell is None:
        return ""
    value = getattr(cell, metric)
    text = f"{value:.2f} [{cell.mesh_text}]"
    if cell.best_mesh_text != cell.mesh_text and cell.best_value > value:
        text += f" · best {cell.best_value:.2f} [{cell.best_mesh_text}]"
    published = paper.get((str(cell.model), str(cell.topology).lower(), int(cell.chunks)))
    if published is not None:
        text += f" · paper {published:.2f} ({(value - published) / published:+.1%})"
    return text


@dataclass(frozen=True)
class Comparison:
    """One cell the paper has: where it is (*model*, *chunk_label*, *column*), the value of
    the mode compared and the paper's, in the same unit, and the relative *error*."""

    model: str
    chunk_label: str
    column: str
    value: float
    paper: float

    @property
    def error(self) -> float:
        return (self.value - self.paper) / self.paper


def reference_comparison(
    frame: pd.DataFrame, reference: Reference | None, mode: str = "des", unit: str = "paper"
) -> list[Comparison]:
    """Every cell of *mode* that the paper's Table 3 has, beside the paper's value."""
    paper = reference_cells(reference, unit)
    table = cells(frame, mode, unit) if paper else pd.DataFrame()
    if table.empty:
        return []
    baseline, metric = int(table["chunks"].min()), TFLOPS_COLUMNS[unit]
    found = []
    for cell in table.itertuples():
        published = paper.get((str(cell.model), str(cell.topology).lower(), int(cell.chunks)))
        if published is not None:
            label = chunk_label(int(cell.chunks), baseline)
            found.append(Comparison(str(cell.row), label, str(cell.column),
                                    float(getattr(cell, metric)), published))  # fmt: skip
    return found


def reference_errors(
    frame: pd.DataFrame, reference: Reference | None, mode: str = "des"
) -> list[float]:
    """Relative errors (value - paper) / paper of every cell of *mode* the paper has."""
    return [c.error for c in reference_comparison(frame, reference, mode)]


def error_summary(
    frame: pd.DataFrame, reference: Reference | None, mode: str = "des", unit: str = "paper"
) -> str | None:
    """A sentence on *mode*'s errors against the paper's cells: the mean |error| and the worst
    cell, named (None without cells to compare)."""
    found = reference_comparison(frame, reference, mode, unit)
    if not found:
        return None
    mean = sum(abs(c.error) for c in found) / len(found)
    worst = max(found, key=lambda c: abs(c.error))
    name = MODE_NAMES.get(mode, mode)
    return (
        f"{name[0].upper() + name[1:]} against the paper's {len(found)} Table 3 cells: mean "
        f"|error| {mean:.1%}, worst {worst.error:+.1%} ({worst.model} {worst.chunk_label} on "
        f"{worst.column}: {worst.value:.2f} against the paper's {worst.paper:.2f} TFLOP/s per "
        f"GPU, {UNIT_NAMES[unit]})."
    )
