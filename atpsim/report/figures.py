"""The report's figures (matplotlib, Agg backend), saved as PNG and SVG with no timestamps or
version strings, so a committed report changes only when its numbers do.

- :func:`atp_bars` (the paper's Figure 11): TFLOP/s per GPU by model, one bar per ATP-i, one
  panel per topology.
- :func:`comm_scaling` (Figure 12): communication time in units of Delta against the number of
  devices (log2 axis), one line per ATP-i and ATP-OPT, one panel per topology, with the paper's
  closed form (or the table's analytic rows) dashed beside each simulated line.

Panels are laid out with topologies as columns and, as rows, the combinations of any other
parameter that varies in the table (model, algorithm, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from atpsim.analytic.model import closed_form_units  # noqa: E402
from atpsim.report.data import (  # noqa: E402
    TFLOPS_COLUMNS,
    TFLOPS_LABELS,
    best_per_group,
    facet_labels,
    mesh_rows,
    ok_rows,
    ordered,
)

RC: Any = {
    "svg.hashsalt": "atpsim",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
BARS_FACETS = ("hardware", "algorithm", "chunks", "mode")
SCALING_FACETS = ("model", "hardware", "algorithm", "chunks", "batch", "seq")
OPT_COLOR = "black"


def save_figure(figure: Figure, folder: Path, stem: str) -> tuple[Path, Path]:
    """Write *figure* as ``folder/stem.png`` and ``.svg`` and close it."""
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{stem}.png", folder / f"{stem}.svg"
    with matplotlib.rc_context(RC):
        figure.savefig(png, dpi=110, metadata={"Software": None})
        figure.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(figure)
    return png, svg


def _panels(
    frame: pd.DataFrame, facets: Sequence[str], panel_size: tuple[float, float]
) -> tuple[Figure, dict[tuple[str, str], Axes], pd.Series]:
    """A grid of axes: columns = topologies, rows = the combinations of the *facets* that vary
    within a topology; panels without data are hidden. Returns each row's facet label too."""
    labels = facet_labels(frame, facets, within="topology")
    topologies, rows = ordered(frame["topology"]), ordered(labels)
    width, height = panel_size
    with matplotlib.rc_context(RC):
        figure, axes = plt.subplots(
            len(rows),
            len(topologies),
            figsize=(width * len(topologies), height * len(rows)),
            squeeze=False,
            layout="constrained",
        )
    present = set(zip(frame["topology"], labels, strict=True))
    grid = {}
    for i, row in enumerate(rows):
        for j, topology in enumerate(topologies):
            if (topology, row) in present:
                grid[(topology, row)] = axes[i][j]
            else:
                axes[i][j].set_visible(False)
    return figure, grid, labels


def _title(topology: str, panel: pd.DataFrame, label: str, frame: pd.DataFrame) -> str:
    """The topology with its GPU count (when one in the panel) and its hardware (when the
    figure has several), then the facet label."""
    details = []
    counts = ordered(panel["n_devices"])
    if len(counts) == 1:
        details.append(f"{counts[0]} GPUs")
    if frame["hardware"].nunique() > 1:
        details.append(", ".join(map(str, ordered(panel["hardware"]))))
    title = f"{topology} ({', '.join(details)})" if details else topology
    return title + (f"\n{label}" if label else "")


def _color(index: int) -> str:
    return f"C{index % 10}"


def atp_bars(frame: pd.DataFrame, unit: str = "si") -> Figure | None:
    """Figure 11: grouped bars of TFLOP/s per GPU (model on x, one bar per ATP-i), one panel
    per topology; the best row where several share a bar. None without data."""
    metric = TFLOPS_COLUMNS[unit]
    rows = ok_rows(frame, metric)
    if rows.empty:
        return None
    atps = sorted(int(i) for i in rows["atp_i"].unique())
    figure, grid, labels = _panels(rows, BARS_FACETS, (4.2, 3.2))
    with matplotlib.rc_context(RC):
        for (topology, label), ax in grid.items():
            panel = rows[(rows["topology"] == topology) & (labels == label)]
            _bar_panel(ax, panel, atps, metric)
            ax.set_title(_title(topology, panel, label, rows))
            ax.set_ylabel(TFLOPS_LABELS[unit])
        _legend(figure, grid)
    return figure


def _bar_panel(ax: Axes, panel: pd.DataFrame, atps: list[int], metric: str) -> None:
    models = ordered(panel["model"])
    width = 0.8 / max(1, len(atps))
    for k, atp in enumerate(atps):
        best = mesh_rows(panel, atp).groupby("model")[metric].max()
        xs = [m + (k - (len(atps) - 1) / 2) * width for m in range(len(models))]
        values = [best.get(model, float("nan")) for model in models]
        if any(v == v for v in values):
            ax.bar(xs, values, width, label=f"ATP-{atp}", color=_color(atps.index(atp)))
    ax.set_xticks(range(len(models)), [str(m) for m in models])
    ax.set_axisbelow(True)


def _legend(figure: Figure, grid: dict[tuple[str, str], Axes], extra: Sequence[Any] = ()) -> None:
    """One legend below the panels: each labelled artist once, then the *extra* handles."""
    handles: dict[str, Any] = {}
    for ax in grid.values():
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(name, handle)
    handles.update({h.get_label(): h for h in extra})
    if handles:
        figure.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=min(len(handles), 6),
            frameon=False,
        )


def comm_scaling(frame: pd.DataFrame, atps: Sequence[int] = (1, 2, 4)) -> Figure | None:
    """Figure 12: comm_over_delta against n_devices, one line per ATP-i in *atps* and ATP-OPT
    (solid: simulated; dashed: analytic rows of the table, else the paper's closed form).
    None without data."""
    rows = ok_rows(frame, "comm_over_delta")
    if rows.empty:
        return None
    figure, grid, labels = _panels(rows, SCALING_FACETS, (4.6, 3.4))
    with matplotlib.rc_context(RC):
        for (topology, label), ax in grid.items():
            panel = rows[(rows["topology"] == topology) & (labels == label)]
            for k, atp in enumerate(atps):
                _atp_line(ax, panel, atp, _color(k))
            _opt_line(ax, panel)
            _scaling_axes(ax, panel)
            ax.set_title(_title(topology, panel, label, rows))
        _legend(figure, grid, _style_handles())
    return figure


def _atp_line(ax: Axes, panel: pd.DataFrame, atp: int, color: str) -> None:
    rows = mesh_rows(panel, atp)
    simulated = rows[rows["mode"] != "analytic"].groupby("n_devices")["comm_over_delta"].min()
    analytic = rows[rows["mode"] == "analytic"].groupby("n_devices")["comm_over_delta"].min()
    if analytic.empty:
        analytic = pd.Series(
            {n: closed_form_units(n // atp, atp) for n in simulated.index}, dtype=float
        )
    _lines(ax, simulated, analytic, f"ATP-{atp}", color)


def _opt_line(ax: Axes, panel: pd.DataFrame) -> None:
    simulated_rows = panel[panel["mode"] != "analytic"]
    simulated = best_per_group(simulated_rows, "comm_over_delta", maximize=False)
    analytic = best_per_group(panel[panel["mode"] == "analytic"], "comm_over_delta", maximize=False)
    sim = simulated.groupby("n_devices")["comm_over_delta"].min()
    if analytic.empty:
        candidates = simulated_rows[simulated_rows["group_key"].notna()]
        forms = candidates.apply(lambda r: closed_form_units(r["d1"], r["d2"]), axis=1)
        ana = forms.groupby(candidates["n_devices"]).min() if len(candidates) else sim.iloc[:0]
    else:
        ana = analytic.groupby("n_devices")["comm_over_delta"].min()
    _lines(ax, sim, ana, "ATP-OPT", OPT_COLOR)


def _lines(ax: Axes, simulated: pd.Series, analytic: pd.Series, name: str, color: str) -> None:
    if not simulated.empty:
        ax.plot(simulated.index, simulated.values, "-o", color=color, ms=3, label=name)
    if not analytic.empty:
        ax.plot(analytic.index, analytic.values, "--", color=color, lw=1, label=f"_{name}")


def _style_handles() -> list[Line2D]:
    """Legend entries for the line styles: solid simulated, dashed the paper's formula."""
    return [
        Line2D([], [], color="gray", ls="-", marker="o", ms=3, label="simulated"),
        Line2D([], [], color="gray", ls="--", lw=1, label="paper's formula / analytic"),
    ]


def _scaling_axes(ax: Axes, panel: pd.DataFrame) -> None:
    counts = sorted(int(n) for n in panel["n_devices"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlabel("devices N")
    ax.set_ylabel("communication time / Delta")
    ax.set_ylim(bottom=0)
