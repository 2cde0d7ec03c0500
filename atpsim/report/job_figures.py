"""The job workload's figure: where the iteration goes, for the best configuration of each TP
scheme (:func:`atpsim.report.job_tables.best_rows`) at each GPU count.

One panel per topology (columns) and model (rows, with the hardware and global batch when
they vary); in each, a pair of stacked bars per GPU count, Megatron-LM 1D then ATP 2D, split
into compute, exposed TP communication, exposed DP communication, pipeline bubble and other
(they add up to the iteration time), each bar labelled with its layout.
"""

from __future__ import annotations

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from atpsim.report.job_tables import SCHEMES, best_rows
from atpsim.report.panels import RC, color, legend, panel_grid

#: (column, legend label) of each part of a bar, bottom first.
PARTS = (
    ("compute_s", "compute"),
    ("exposed_tp_comm_s", "exposed TP comm."),
    ("exposed_dp_comm_s", "exposed DP comm."),
    ("pipeline_bubble_s", "pipeline bubble"),
    ("other_s", "other"),
    ("exposed_offload_s", "exposed host copies"),
)
FACETS = ("model", "hardware", "global_batch")
BAR_WIDTH = 0.38
SHORT = {"megatron-1d": "Megatron 1D", "atp-2d": "ATP 2D"}


def breakdown(frame: pd.DataFrame) -> Figure | None:
    """The stacked bars of the best rows (see the module docstring); None without any."""
    rows = best_rows(frame)
    if rows.empty:
        return None
    counts = rows.groupby(["topology", *FACETS], dropna=False)["n_devices"].nunique().max()
    width_in = min(9.0, max(3.2, 1.4 + 1.5 * counts))
    figure, panels = panel_grid(rows, FACETS, (width_in, 3.4))
    with matplotlib.rc_context(RC):
        for panel in panels:
            _panel(panel.ax, panel.rows)
            panel.ax.set_title(panel.title)
            panel.ax.set_ylabel("seconds per iteration")
        legend(figure, panels)
    return figure


def _panel(ax: Axes, rows: pd.DataFrame) -> None:
    counts = sorted(int(n) for n in rows["n_devices"].unique())
    ticks, labels = [], []
    for i, count in enumerate(counts):
        for k, scheme in enumerate(SCHEMES):
            match = rows[(rows["n_devices"] == count) & (rows["tp_scheme"] == scheme)]
            if match.empty:
                continue
            x = i + (k - 0.5) * (BAR_WIDTH + 0.02)
            _stack(ax, x, match.iloc[0])
            ticks.append(x)
            labels.append(f"{count} GPUs\n{SHORT[scheme]}\n{_short(match.iloc[0])}")
    ax.set_xticks(ticks, labels, fontsize=6)
    ax.set_xlim(-0.7, len(counts) - 0.3)
    ax.set_axisbelow(True)
    ax.set_ylim(bottom=0)


def _stack(ax: Axes, x: float, row: pd.Series) -> None:
    bottom = 0.0
    for k, (name, label) in enumerate(PARTS):
        if name == "exposed_offload_s" and not (row.get(name, 0.0) or 0.0) > 0:
            continue  # a table before activation offloading, or none exposed: no bar, no legend
        value = max(float(row[name]), 0.0)
        ax.bar([x], [value], BAR_WIDTH, bottom=bottom, color=color(k), label=label)
        bottom += value


def _short(row: pd.Series) -> str:
    return f"TP {row['tp_mesh']}\npp{row['pp']} dp{row['dp']}"
