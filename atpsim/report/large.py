"""The report of a results table too large to read row by row (issue 15): past
:data:`LARGE_ROWS` rows, a sweep or ``atpsim search`` of up to 100,000s of points is
summarized from ``results.csv``, read :data:`CHUNK_ROWS` rows at a time (so the table is never
held whole), instead of drawn as one bar or one table row per point.

What it shows:

- the count of points, simulated and failed, and the failures grouped by error;
- the best configurations: the :data:`TOP` simulated rows that fit in memory with the most
  model FLOP/s per GPU (``tflops_per_gpu``), which compares models and GPU counts; for one
  model, batch and GPU count it is the order of step (iteration) time;
- Pareto fronts, per *workload* (a model; for a whole job, a model and global batch): the
  configurations that no other beats on both time and GPUs, and on both time and memory per
  rank (a front keeps, in order of GPUs or memory, each row faster than every one before it),
  for the :data:`FRONT_WORKLOADS` workloads with the best rows;
- one figure: time against memory per rank of every simulated point (a dot each, at most
  :data:`MAX_DOTS`, every k-th beyond), the fronts drawn over them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as PlotFigure

from atpsim.report.document import (
    Code,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
)
from atpsim.report.pages import SCENARIO_COPY, write_pages
from atpsim.report.panels import save_figure
from atpsim.report.tables import fmt
from atpsim.report.workloads import WORKLOADS
from atpsim.results.io import RESULTS_CSV, schema_for
from atpsim.scenario.loader import load_report_sections

#: A table of more rows than this gets this report (the committed reports have at most 1,478).
LARGE_ROWS = 2_000
CHUNK_ROWS = 20_000
TOP = 20
FRONT_WORKLOADS = 5
MAX_DOTS = 200_000
FIGURE_STEM = "pareto_memory"
HEADERS = {"n_devices": "GPUs", "tp_mesh": "TP mesh", "micro_batch": "micro-batch",
           "step_time_s": "step s", "iteration_time_s": "iteration s",
           "tflops_per_gpu": "TFLOP/s/GPU", "memory_per_rank_bytes": "memory GB"}  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """What a table's rows are: the *time* column, the *workload* columns a front is drawn
    within, and the *describe* columns that name a configuration."""

    time: str
    workload: tuple[str, ...]
    describe: tuple[str, ...]

    @property
    def shown(self) -> tuple[str, ...]:
        return (*self.describe, self.time, "tflops_per_gpu", "memory_per_rank_bytes")


def row_count(path: Path) -> int:
    """Data rows of the CSV at *path* (its lines but the header), counted without parsing."""
    lines = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            lines += block.count(b"\n")
    return max(lines - 1, 0)


def is_large(out_dir: Path) -> bool:
    """Whether the run folder *out_dir* holds a results table of more than LARGE_ROWS rows."""
    path = Path(out_dir) / RESULTS_CSV
    return path.is_file() and row_count(path) > LARGE_ROWS


def layout_of(columns: list[str]) -> Layout:
    """The :class:`Layout` of a table with *columns*: its workload's time and front columns
    (:data:`atpsim.report.workloads.WORKLOADS`), its schema's describing columns."""
    schema = schema_for(columns)
    shown = WORKLOADS[schema.workload]
    return Layout(shown.time, shown.front_by, schema.describe)


@dataclass
class Summary:
    """A table summarized chunk by chunk (:meth:`add`): counts, failures, the best rows, the
    fronts of each workload and the dots of the figure."""

    layout: Layout
    stride: int = 1
    count: int = TOP
    rows: int = 0
    failed: int = 0
    failures: dict[str, list[object]] = field(default_factory=dict)
    top: pd.DataFrame | None = None
    gpu_front: pd.DataFrame | None = None
    memory_front: pd.DataFrame | None = None
    best: pd.Series | None = None
    dots: list[np.ndarray] = field(default_factory=list)

    def add(self, chunk: pd.DataFrame) -> None:
        """Count *chunk* in (the first pass): its failures, its simulated rows that fit, each
        workload's best, its dots."""
        self._count_failures(chunk)
        time, by = self.layout.time, list(self.layout.workload)
        good = self._good(chunk)
        self.top = _best(_concat(self.top, good), self.count)
        best = good.groupby(by)["tflops_per_gpu"].max()
        self.best = best if self.best is None else pd.concat([self.best, best]).groupby(level=by).max()
        picked = good[(good["point_index"] % self.stride == 0) & good["memory_per_rank_bytes"].notna()]
        self.dots.append(picked[["memory_per_rank_bytes", time]].to_numpy(dtype=np.float32))
        self.rows += len(chunk)

    def add_fronts(self, chunk: pd.DataFrame, workloads: list[tuple[object, ...]]) -> None:
        """Fold the rows of *workloads* in *chunk* into their fronts (the second pass: only
        the shown workloads' fronts are kept, however many workloads the table has)."""
        time, by = self.layout.time, list(self.layout.workload)
        good = self._good(chunk)
        good = good[pd.MultiIndex.from_frame(good[by]).isin(workloads)]
        self.gpu_front = pareto_fronts(_concat(self.gpu_front, good), by, "n_devices", time)
        self.memory_front = pareto_fronts(_concat(self.memory_front, good), by, "memory_per_rank_bytes", time)

    def _good(self, chunk: pd.DataFrame) -> pd.DataFrame:
        """The rows of *chunk* simulated, with a time, that fit in memory."""
        fits = chunk["fits_memory"].fillna(True).astype(bool)
        return chunk[(chunk["status"] == "ok") & chunk[self.layout.time].notna() & fits]

    def _count_failures(self, chunk: pd.DataFrame) -> None:
        failed = chunk[chunk["status"] == "failed"]
        self.failed += len(failed)
        counts = failed.groupby("error", sort=False).size()
        for _, row in failed.drop_duplicates("error").iterrows():
            entry = self.failures.setdefault(str(row["error"]), [0, _describe(row, self.layout)])
            entry[0] = int(entry[0]) + int(counts[row["error"]])  # type: ignore[call-overload]

    def workloads(self) -> list[tuple[object, ...]]:
        """The workloads whose best row is best, at most FRONT_WORKLOADS."""
        if self.best is None:
            return []
        ranked = self.best.sort_values(ascending=False, kind="stable").head(FRONT_WORKLOADS)
        return [w if isinstance(w, tuple) else (w,) for w in ranked.index]

    def front(self, kind: str, workload: tuple[object, ...]) -> pd.DataFrame:
        """The front of *workload* against ``gpus`` or ``memory``."""
        front = self.gpu_front if kind == "gpus" else self.memory_front
        if front is None:
            return pd.DataFrame()
        mask = np.ones(len(front), dtype=bool)
        for name, value in zip(self.layout.workload, workload, strict=True):
            mask &= (front[name] == value).to_numpy()
        return front[mask]

    @property
    def n_workloads(self) -> int:
        return 0 if self.best is None else len(self.best)


def pareto_front(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows no other row beats on both *x* and *y* (less is better for both): in order of
    *x* (then *y*, then point index), each row whose *y* is below every earlier one's."""
    ordered = rows[rows[x].notna()].sort_values([x, y, "point_index"], kind="stable")
    best_before = ordered[y].cummin().shift(fill_value=math.inf)
    return ordered[ordered[y] < best_before]


def pareto_fronts(rows: pd.DataFrame, by: list[str], x: str, y: str) -> pd.DataFrame:
    """:func:`pareto_front` of each group of *rows* with equal *by* columns, in one pass."""
    ordered = rows[rows[x].notna()].sort_values([*by, x, y, "point_index"], kind="stable")
    keys = [ordered[name] for name in by]
    running = ordered.groupby(keys, sort=False)[y].cummin()
    best_before = running.groupby(keys, sort=False).shift(fill_value=math.inf)
    return ordered[ordered[y] < best_before]


def _best(rows: pd.DataFrame, count: int) -> pd.DataFrame:
    return rows.sort_values(["tflops_per_gpu", "point_index"], ascending=[False, True],
                            kind="stable").head(count)  # fmt: skip


def _concat(first: pd.DataFrame | None, second: pd.DataFrame) -> pd.DataFrame:
    return second if first is None or first.empty else pd.concat([first, second], ignore_index=True)


def _describe(row: pd.Series, layout: Layout) -> str:
    return " ".join(f"{name}={row[name]}" for name in layout.describe)


def chunks(path: Path, extra: Iterable[str] = ()) -> Iterator[pd.DataFrame]:
    """The columns of the table at *path* that the report uses (and the *extra* ones), in
    frames of CHUNK_ROWS rows (strings kept as written)."""
    header = pd.read_csv(path, nrows=0).columns.tolist()
    layout, schema = layout_of(header), schema_for(header)
    used = {*layout.shown, *layout.workload, "status", "error", "fits_memory", "point_index"}
    used |= set(extra) & set(header)
    text = {c.name: "string" for c in schema.columns if c.dtype == "string" and c.name in used}
    yield from pd.read_csv(path, chunksize=CHUNK_ROWS, usecols=sorted(used), dtype=text,
                           keep_default_na=False, na_values=[""], true_values=["true"],
                           false_values=["false"])  # fmt: skip


def summarize(path: Path, top: int = TOP, extra: Iterable[str] = ()) -> Summary:
    """The :class:`Summary` of the table at *path* (its *top* best rows, with the *extra*
    columns too), read a chunk at a time, twice: once to count and rank, once for the fronts
    of the best workloads."""
    header = pd.read_csv(path, nrows=0).columns.tolist()
    stride = max(math.ceil(row_count(path) / MAX_DOTS), 1)
    summary = Summary(layout_of(header), stride=stride, count=top)
    for chunk in chunks(path, extra):
        summary.add(chunk)
    workloads = summary.workloads()
    for chunk in chunks(path) if workloads else ():
        summary.add_fronts(chunk, workloads)
    return summary


def build_large_report(out_dir: Path, scenario_text: str) -> list[Path]:
    """Write report.md and report.html of the large table in *out_dir* (module docstring),
    and the figure; the files written."""
    sections = load_report_sections(scenario_text, str(out_dir / SCENARIO_COPY))
    summary = summarize(out_dir / RESULTS_CSV)
    name = str(sections.name or out_dir.name)
    document = Document(sections.report.title or f"atpsim report: {name}")
    _intro(document, sections.description, summary)
    _best_section(document, summary)
    written = _front_sections(document, out_dir, summary)
    _failures(document, summary)
    document.add(Heading("Scenario"), Paragraph(f"`{SCENARIO_COPY}`, as run:"), Code(scenario_text, "yaml"))
    return [*write_pages(document, out_dir), *written]


def _intro(document: Document, description: object, summary: Summary) -> None:
    if description:
        document.add(Paragraph(str(description).strip()))
    ok = summary.rows - summary.failed
    document.add(Paragraph(
        f"{summary.rows} points: {ok} simulated, {summary.failed} failed. More than "
        f"{LARGE_ROWS} rows are too many to show one by one: this report shows the best "
        "configurations and the Pareto fronts; every row is in results.csv (and "
        "results.parquet), and `atpsim report` rebuilds this page from it."))


def _best_section(document: Document, summary: Summary) -> None:
    document.add(Heading("Best configurations"))
    if summary.top is None or summary.top.empty:
        document.add(Paragraph("No simulated point fits in memory."))
        return
    caption = (f"The {len(summary.top)} simulated configurations that fit in memory with the "
               "most model FLOP/s per GPU (for one model, batch and GPU count: the fastest)")
    document.add(_table(summary.top, summary.layout.shown, caption, rank=True))


def _front_sections(document: Document, out_dir: Path, summary: Summary) -> list[Path]:
    layout, workloads = summary.layout, summary.workloads()
    if not workloads:
        return []
    document.add(Heading("Pareto fronts"))
    for workload in workloads:
        where = ", ".join(f"{n} {v}" for n, v in zip(layout.workload, workload, strict=True))
        gpus, memory = summary.front("gpus", workload), summary.front("memory", workload)
        if len(gpus) > 1:
            document.add(_table(gpus, layout.shown, f"{where}: the fastest configuration at each "
                                "GPU count that beats every smaller count"))  # fmt: skip
        if len(memory):
            document.add(_table(memory, layout.shown, f"{where}: "
                                "no configuration is both faster and lighter per rank"))  # fmt: skip
    others = summary.n_workloads - len(workloads)
    if others:
        document.add(Paragraph(f"The fronts of {others} other workloads are not shown."))
    if not sum(len(dots) for dots in summary.dots):
        return []
    png, svg = save_figure(_scatter(summary, workloads), out_dir / "figures", FIGURE_STEM)
    caption = (f"{HEADERS[layout.time]} against memory per rank (GB = 10^9 B) of every simulated "
               f"point that fits (grey; every {summary.stride}th where there are more than "
               f"{MAX_DOTS}), and the memory fronts above, log axes.")
    document.add(Figure(str(png.relative_to(out_dir)), str(svg.relative_to(out_dir)), caption))
    return [png, svg]


def _scatter(summary: Summary, workloads: list[tuple[object, ...]]) -> PlotFigure:
    figure = PlotFigure(figsize=(7.0, 4.5), layout="constrained")
    ax = figure.add_subplot()
    dots = np.concatenate(summary.dots) if summary.dots else np.empty((0, 2))
    ax.scatter(dots[:, 0] / 1e9, dots[:, 1], s=2, color="0.6", alpha=0.4, rasterized=True,
               label="every point")  # fmt: skip
    for workload in workloads:
        front = summary.front("memory", workload)
        ax.plot(front["memory_per_rank_bytes"] / 1e9, front[summary.layout.time], marker="o",
                markersize=3, drawstyle="steps-post", label=" ".join(map(str, workload)))  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="memory per rank (GB)",
           ylabel=HEADERS[summary.layout.time])  # fmt: skip
    ax.legend(fontsize=7)
    return figure


def _failures(document: Document, summary: Summary) -> None:
    if not summary.failures:
        return
    ranked = sorted(summary.failures.items(), key=lambda item: -int(item[1][0]))  # type: ignore[call-overload]
    body = [[str(count), str(first), error] for error, (count, first) in ranked[:TOP]]
    caption = f"Failed points by error ({len(ranked)} distinct; the first {min(TOP, len(ranked))})"
    document.add(Heading("Failures"), Table(["points", "first point", "error"], body, caption))


def _table(rows: pd.DataFrame, names: tuple[str, ...], caption: str, rank: bool = False) -> Table:
    header = [HEADERS.get(n, n) for n in names]
    body = [[_cell(n, row[n]) for n in names] for _, row in rows.iterrows()]
    if rank:
        header, body = ["#", *header], [[str(i), *cells] for i, cells in enumerate(body, 1)]
    return Table(header, body, caption)


def _cell(name: str, value: object) -> str:
    if name == "memory_per_rank_bytes":
        return fmt(None if pd.isna(value) else float(value) / 1e9)  # type: ignore[arg-type]
    return fmt(value.item() if isinstance(value, np.generic) else value)
