"""The step workload's figures (matplotlib, Agg backend; layout and saving in
:mod:`atpsim.report.panels`; the job workload's is :mod:`atpsim.report.job_figures`).

- :func:`atp_bars` (the paper's Figure 11): TFLOP/s per GPU by model, one bar per ATP-i; the
  bars are the simulated rows (des), and where the table also has analytic rows a black tick
  on each bar marks the analytic model's value.
- :func:`comm_scaling` (Figure 12): communication time in units of Delta against the number of
  devices (log2 axis), one line per ATP-i and ATP-OPT, with the paper's closed form (or the
  table's analytic rows) dashed beside each simulated line.
- :func:`scheme_bars` (Figure 10): TFLOP/s per GPU by model, one bar per tensor-parallel
  scheme (Megatron-LM, ATP at its best mesh and chunk count, SUMMA 2D / 2.5D, and SageMaker
  where the table has it).

Where the table has parameter draws (``uncertainty:`` in the scenario, columns
``tflops_per_gpu_p10`` / ``_p90``), each bar of :func:`atp_bars` and :func:`scheme_bars` carries
an error bar from the p10 to the p90 of its row over the draws.

Both take a :class:`~atpsim.scenario.report.FigureSpec`: the points to keep (*select*), the
panel columns and rows (default: topologies as columns, and as rows the combinations of any
other parameter that varies: model, algorithm, chunks, placement, ...), and a log y axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from atpsim.analytic.model import closed_form_units
from atpsim.report.data import (
    TFLOPS_COLUMNS,
    TFLOPS_LABELS,
    atp_rows,
    best_per_group,
    mesh_rows,
    ok_rows,
    ordered,
    select_rows,
)
from atpsim.report.panels import RC, color, legend, log_y_axis, panel_grid
from atpsim.scenario.report import FigureSpec

SCHEME_SERIES = (
    "Megatron-LM (ATP-1)",
    "ATP (best mesh, chunks)",
    "2D / 2.5D (SUMMA)",
    "SageMaker (TP over DP ranks)",
)
SCHEME_FACETS = ("hardware", "algorithm", "placement", "batch", "seq")
BARS_FACETS = ("n_devices", "hardware", "algorithm", "chunks", "placement", "batch", "seq")
SCALING_FACETS = ("model", "hardware", "algorithm", "chunks", "placement", "batch", "seq")
OPT_COLOR = "black"
ANALYTIC = "analytic"


def atp_bars(
    frame: pd.DataFrame, unit: str = "si", spec: FigureSpec | None = None
) -> Figure | None:
    """Figure 11: grouped bars of TFLOP/s per GPU (model on x, one bar per ATP-i) per panel;
    the best row where several share a bar. None without data."""
    spec = spec or FigureSpec("atp_bars")
    metric = TFLOPS_COLUMNS[unit]
    rows = select_rows(ok_rows(frame, metric), spec.select)
    if rows.empty:
        return None
    atps = sorted(int(i) for i in rows["atp_i"].unique())
    bars_per_panel = rows["model"].nunique() * len(atps)
    width_in = min(4.2, max(2.6, 1.2 + 0.25 * bars_per_panel))
    figure, panels = panel_grid(rows, BARS_FACETS, (width_in, 3.2), spec.columns, spec.rows)
    with matplotlib.rc_context(RC):
        for panel in panels:
            _bar_panel(panel.ax, panel.rows, atps, metric)
            panel.ax.set_title(panel.title)
            panel.ax.set_ylabel(TFLOPS_LABELS[unit])
            if spec.log_y:
                log_y_axis(panel.ax)
        both_modes = rows["mode"].nunique() > 1 and (rows["mode"] == ANALYTIC).any()
        legend(figure, panels, [*(_bar_handles() if both_modes else ()), *_draws_handle(rows)])
    return figure


def _bar_panel(ax: Axes, panel: pd.DataFrame, atps: list[int], metric: str) -> None:
    """Bars of the simulated rows (else the analytic ones), analytic ticks over them."""
    models = ordered(panel["model"])
    simulated, analytic = panel[panel["mode"] != ANALYTIC], panel[panel["mode"] == ANALYTIC]
    bars = simulated if not simulated.empty else analytic
    ticks = analytic if not simulated.empty else analytic.iloc[:0]
    width = 0.8 / max(1, len(atps))
    for k, atp in enumerate(atps):
        xs = pd.Series([m + (k - (len(atps) - 1) / 2) * width for m in range(len(models))])
        values = _by_model(bars, atp, metric, models)
        if values.notna().any():
            ax.bar(xs, values, width, label=f"ATP-{atp}", color=color(k))
            best = mesh_rows(bars, atp)
            best = best.loc[best.groupby("model")[metric].idxmax()] if not best.empty else best
            _error_bars(ax, xs, best, models, metric)
        marks = _by_model(ticks, atp, metric, models)
        if marks.notna().any():
            ax.hlines(marks, xs - width / 2, xs + width / 2, colors=OPT_COLOR, lw=1.5)
    ax.set_xticks(range(len(models)), [str(m) for m in models])
    ax.set_axisbelow(True)


def _by_model(rows: pd.DataFrame, atp: int, metric: str, models: list) -> pd.Series:
    """The best *metric* of ATP-*atp* per model, in the order of *models* (NaN if none)."""
    best = mesh_rows(rows, atp).groupby("model")[metric].max()
    return pd.Series([best.get(model, float("nan")) for model in models], dtype=float)


def scheme_bars(
    frame: pd.DataFrame, unit: str = "si", spec: FigureSpec | None = None
) -> Figure | None:
    """Figure 10: bars of TFLOP/s per GPU by model, one series per scheme (Megatron-LM,
    ATP, SUMMA 2D / 2.5D) per topology panel; simulated rows only. None without data."""
    spec = spec or FigureSpec("scheme_bars")
    metric = TFLOPS_COLUMNS[unit]
    rows = select_rows(ok_rows(frame, metric), spec.select)
    rows = rows[rows["mode"] != ANALYTIC]
    if rows.empty:
        return None
    series = scheme_series(rows, metric)
    width_in = min(4.2, max(2.6, 1.2 + 0.25 * rows["model"].nunique() * len(series)))
    figure, panels = panel_grid(rows, SCHEME_FACETS, (width_in, 3.2), spec.columns, spec.rows)
    with matplotlib.rc_context(RC):
        for panel in panels:
            _scheme_panel(panel.ax, panel.rows, metric)
            panel.ax.set_title(panel.title)
            panel.ax.set_ylabel(TFLOPS_LABELS[unit])
            if spec.log_y:
                log_y_axis(panel.ax)
        legend(figure, panels, _draws_handle(rows))
    return figure


def scheme_series(rows: pd.DataFrame, metric: str) -> dict[str, pd.DataFrame]:
    """The rows of each Figure 10 series: Megatron-LM is ATP-1 without chunking, ATP every
    ATP row (the bar is the best mesh and chunk count), SUMMA every SUMMA row (its best grid),
    SageMaker every SageMaker row (its best chunk count); series without rows are left out."""
    atp = atp_rows(rows)
    others = rows.drop(atp.index)
    parts = (
        mesh_rows(atp[atp["chunks"] == 1], 1),
        atp,
        others[others["scheme"] == "summa"],
        others[others["scheme"] == "sagemaker"],
    )
    return {name: part for name, part in zip(SCHEME_SERIES, parts, strict=True) if not part.empty}


def _scheme_panel(ax: Axes, panel: pd.DataFrame, metric: str) -> None:
    """One bar per series and model (the best row), the SUMMA bar labelled with its grid."""
    models = ordered(panel["model"])
    series = scheme_series(panel, metric)
    width = 0.8 / max(1, len(series))
    for k, (name, part) in enumerate(series.items()):
        best = part.loc[part.groupby("model")[metric].idxmax()].set_index("model")
        for m, model in enumerate(models):
            if model not in best.index:
                continue
            x, value = m + (k - (len(series) - 1) / 2) * width, best.loc[model, metric]
            label = name if m == 0 else None
            ax.bar([x], [value], width, color=color(SCHEME_SERIES.index(name)), label=label)
            _error_bars(ax, pd.Series([x]), best.loc[[model]].reset_index(), [model], metric)
            if name == SCHEME_SERIES[2]:
                grid = str(best.loc[model, "mesh"])
                ax.text(x, value, grid, ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(models)), [str(m) for m in models])
    ax.set_axisbelow(True)


#: Percentile columns of the draws (SI TFLOP/s), and the paper unit's factor from SI.
DRAWN_TFLOPS = ("tflops_per_gpu_p10", "tflops_per_gpu_p90")
PAPER_PER_SI = 1e12 / 2.0**40


def _error_bars(ax: Axes, xs: pd.Series, best: pd.DataFrame, models: list, metric: str) -> None:
    """A p10-p90 error bar over each bar whose row (*best*: one per model) has draws."""
    if not set(DRAWN_TFLOPS) <= set(best.columns) or best.empty:
        return
    scale = PAPER_PER_SI if metric == TFLOPS_COLUMNS["paper"] else 1.0
    by_model = best.set_index("model")
    for x, model in zip(xs, models, strict=True):
        if model not in by_model.index or pd.isna(by_model.loc[model, DRAWN_TFLOPS[0]]):
            continue
        lo, hi = (float(by_model.loc[model, c]) * scale for c in DRAWN_TFLOPS)
        value = float(by_model.loc[model, metric])
        ax.errorbar([x], [value], yerr=[[max(value - lo, 0.0)], [max(hi - value, 0.0)]],
                    fmt="none", ecolor=OPT_COLOR, elinewidth=0.8, capsize=2)  # fmt: skip


def _draws_handle(rows: pd.DataFrame) -> list[Line2D]:
    """The legend entry of the error bars, where the rows have draws."""
    if "draws" not in rows.columns or rows["draws"].isna().all():
        return []
    n = int(rows["draws"].max())
    return [Line2D([], [], color=OPT_COLOR, lw=0.8, marker="|", label=f"p10-p90 over {n} parameter draws")]


def _bar_handles() -> list:
    """Legend entries for bars (simulated) and ticks (analytic)."""
    return [
        Patch(color="gray", label="bars: simulated (des)"),
        Line2D([], [], color=OPT_COLOR, lw=1.5, label="ticks: analytic model"),
    ]


def comm_scaling(
    frame: pd.DataFrame, atps: Sequence[int] = (1, 2, 4), spec: FigureSpec | None = None
) -> Figure | None:
    """Figure 12: comm_over_delta against n_devices, one line per ATP-i in *atps* and ATP-OPT
    (solid: simulated; dashed: analytic rows of the table, else the paper's closed form).
    None without data."""
    spec = spec or FigureSpec("comm_scaling")
    rows = select_rows(ok_rows(frame, "comm_over_delta"), spec.select)
    if rows.empty:
        return None
    figure, panels = panel_grid(rows, SCALING_FACETS, (4.6, 3.4), spec.columns, spec.rows)
    with matplotlib.rc_context(RC):
        for panel in panels:
            for k, atp in enumerate(atps):
                _atp_line(panel.ax, panel.rows, atp, color(k))
            _opt_line(panel.ax, panel.rows)
            _scaling_axes(panel.ax, panel.rows, spec.log_y)
            panel.ax.set_title(panel.title)
        legend(figure, panels, _style_handles())
    return figure


def _atp_line(ax: Axes, panel: pd.DataFrame, atp: int, line_color: str) -> None:
    rows = mesh_rows(panel, atp)
    simulated = rows[rows["mode"] != ANALYTIC].groupby("n_devices")["comm_over_delta"].min()
    analytic = rows[rows["mode"] == ANALYTIC].groupby("n_devices")["comm_over_delta"].min()
    if analytic.empty:
        analytic = pd.Series(
            {n: closed_form_units(n // atp, atp) for n in simulated.index}, dtype=float
        )
    _lines(ax, simulated, analytic, f"ATP-{atp}", line_color)


def _opt_line(ax: Axes, panel: pd.DataFrame) -> None:
    simulated_rows = panel[panel["mode"] != ANALYTIC]
    simulated = best_per_group(simulated_rows, "comm_over_delta", maximize=False)
    analytic = best_per_group(panel[panel["mode"] == ANALYTIC], "comm_over_delta", maximize=False)
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


def _scaling_axes(ax: Axes, panel: pd.DataFrame, log_y: bool) -> None:
    counts = sorted(int(n) for n in panel["n_devices"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlabel("devices N")
    ax.set_ylabel("communication time / Delta")
    if log_y:
        log_y_axis(ax)
    else:
        ax.set_ylim(bottom=0)
