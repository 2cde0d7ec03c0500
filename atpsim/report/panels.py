"""Figure plumbing shared by the report's figures: the matplotlib style, a grid of panels
faceted by results columns, panel titles, one legend under the grid, and deterministic
saving (PNG and SVG without timestamps or version strings, so a committed report changes
only when its numbers do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter  # noqa: E402

from atpsim.report.data import ordered, panel_labels  # noqa: E402

RC: Any = {
    "svg.hashsalt": "atpsim",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
#: Estimated legend entry width at 9 pt (inches): handle and padding, and per character.
LEGEND_HANDLE_IN, LEGEND_CHAR_IN = 0.55, 0.065


@dataclass(frozen=True)
class Panel:
    """One panel of a grid: its axes and the points it shows (*rows*, a frame)."""

    ax: Axes
    rows: pd.DataFrame
    title: str


#: Resolution of the PNGs (dots per inch).
PNG_DPI = 110
#: Width of a report's figure box (px) in a 1280 px window: the page body's 72 rem.
BOX_PX = 1152
#: The smallest text a figure shows in that box (px; issue 26).
MIN_TEXT_PX = 10.0


def save_figure(figure: Figure, folder: Path, stem: str) -> tuple[Path, Path]:
    """Write *figure* as ``folder/stem.png`` and ``.svg`` and close it, its text made
    legible first (:func:`legible`)."""
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{stem}.png", folder / f"{stem}.svg"
    legible(figure)
    with matplotlib.rc_context(RC):
        figure.savefig(png, dpi=PNG_DPI, metadata={"Software": None})
        figure.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(figure)
    return png, svg


def min_font_pt(width_in: float) -> float:
    """The smallest font (pt) that shows at :data:`MIN_TEXT_PX` in the report's figure box
    when a figure *width_in* inches wide is drawn there: a PNG at :data:`PNG_DPI` wider than
    :data:`BOX_PX` is shrunk to it, its text with it."""
    scale = min(1.0, BOX_PX / (width_in * PNG_DPI))
    return MIN_TEXT_PX * 72.0 / PNG_DPI / scale


def legible(figure: Figure) -> None:
    """Raise every text of *figure* smaller than :func:`min_font_pt` of its width to that
    size (tick labels, legends, annotations, titles); larger text is left as it is."""
    floor = min_font_pt(float(figure.get_figwidth()))
    for text in figure.findobj(Text):
        if isinstance(text, Text) and float(text.get_fontsize()) < floor:
            text.set_fontsize(floor)


def panel_grid(
    frame: pd.DataFrame,
    facets: Sequence[str],
    panel_size_in: tuple[float, float],
    columns: Sequence[str] | None = None,
    rows: Sequence[str] | None = None,
) -> tuple[Figure, list[Panel]]:
    """A grid of axes, one per panel of :func:`atpsim.report.data.panel_labels` (columns:
    the values of *columns*, default the topology; rows: *rows*, then the *facets* that
    vary inside a panel); grid cells without points are hidden. *panel_size_in*: (width,
    height) of one panel in inches."""
    across, down = panel_labels(frame, facets, columns, rows)
    col_names, row_names = ordered(across), ordered(down)
    width, height = panel_size_in
    with matplotlib.rc_context(RC):
        figure, axes = plt.subplots(
            len(row_names),
            len(col_names),
            figsize=(width * len(col_names), height * len(row_names)),
            squeeze=False,
            layout="constrained",
        )
    panels = []
    for i, row in enumerate(row_names):
        for j, col in enumerate(col_names):
            points = frame[(across == col) & (down == row)]
            if points.empty:
                axes[i][j].set_visible(False)
                continue
            title = _title(col, row, points, frame, on_row=_topology_in_rows(columns, rows))
            panels.append(Panel(axes[i][j], points, title))
    return figure, panels


def _topology_in_rows(columns: Sequence[str] | None, rows: Sequence[str] | None) -> bool:
    return columns is not None and "topology" not in columns and "topology" in (rows or ())


def _title(column: str, row: str, points: pd.DataFrame, frame: pd.DataFrame, on_row: bool) -> str:
    """The column label over the row label; the panel's GPU count (when it has one) and its
    hardware (when the figure has several) go in brackets after the line that names the
    topology (the row line when *on_row*)."""
    details = []
    counts = ordered(points["n_devices"])
    if len(counts) == 1 and " GPUs" not in column + row:
        details.append(f"{counts[0]} GPUs")
    hardware = ordered(points["hardware"])
    if frame["hardware"].nunique() > 1 and not set(map(str, hardware)) & _words(column, row):
        details.append(", ".join(map(str, hardware)))
    lines = [column, row] if row else [column]
    if details:
        k = 1 if on_row and row else 0
        lines[k] = f"{lines[k]} ({', '.join(details)})".strip()
    return "\n".join(lines)


def _words(*labels: str) -> set[str]:
    return {word.strip() for label in labels for word in label.split(",")}


def color(index: int) -> str:
    """The *index*-th colour of the default cycle."""
    return f"C{index % 10}"


def log_y_axis(ax: Axes) -> None:
    """A logarithmic y axis with ticks at 1, 2 and 5 times the powers of ten, labelled as
    plain numbers (0.5, 1, 2) rather than powers."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def legend(figure: Figure, panels: Sequence[Panel], extra: Sequence[Artist] = ()) -> None:
    """One legend below the panels: each labelled artist once, then the *extra* handles."""
    handles: dict[str, Artist] = {}
    for panel in panels:
        for handle, name in zip(*panel.ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(name, handle)
    handles.update({str(h.get_label()): h for h in extra})
    if handles:
        figure.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=_legend_columns(list(handles), figure.get_figwidth()),
            frameon=False,
        )


def _legend_columns(labels: list[str], width_in: float) -> int:
    """The most entries per legend row that fit in *width_in*. Matplotlib fills the legend
    column by column, the first ``n % ncols`` columns one entry longer; each column is as
    wide as its widest entry (:data:`LEGEND_HANDLE_IN` plus :data:`LEGEND_CHAR_IN` per
    character)."""
    widths = [LEGEND_HANDLE_IN + LEGEND_CHAR_IN * len(label) for label in labels]
    for ncols in range(min(len(widths), 6), 1, -1):
        total, start = 0.0, 0
        for i in range(ncols):
            size = len(widths) // ncols + (1 if i < len(widths) % ncols else 0)
            total += max(widths[start : start + size])
            start += size
        if total <= width_in:
            return ncols
    return 1
