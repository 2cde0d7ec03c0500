"""The sections of each workload's report page between the paper's claims and the raw rows
(:mod:`atpsim.report.workloads` names which is whose):

- a step table (:func:`step_sections`): the figures the scenario's ``report:`` section asks
  for, else those that suit the table (:func:`auto_figures`): throughput by mesh, communication
  against scale, the schemes side by side, and Table 3's chunk layout;
- a job table (:func:`job_sections`): the best configuration per TP scheme, a sentence per
  comparison on whether ATP's best 2D mesh beats Megatron-LM's 1D TP, the calls alone against
  one network, and the breakdown figure.

Each writes its blocks into the page's :class:`~atpsim.report.document.Document` and returns
the figure files it saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure as PlotFigure

from atpsim.report import chunk_table, figures, job_figures, job_tables
from atpsim.report.data import ok_rows, select_rows
from atpsim.report.document import Bullets, Details, Document, Figure, Heading, Paragraph, Table
from atpsim.report.pages import FIGURES_DIR
from atpsim.report.panels import save_figure
from atpsim.scenario.report import FigureSpec, Reference, ReportOptions


def auto_figures(frame: pd.DataFrame, reference: Reference | None) -> tuple[str, ...]:
    """Figure kinds that suit the table: scaling when a topology has several device counts,
    bars when the ATP-i varies at one device count per topology, the chunk table when chunks
    vary or the scenario holds Table 3 reference cells."""
    rows, kinds = ok_rows(frame), []
    scales = (rows.groupby("topology")["n_devices"].nunique() > 1).any()
    if rows["comm_over_delta"].notna().any() and scales:
        kinds.append("comm_scaling")
    one_size = (rows.groupby("topology")["n_devices"].nunique() <= 1).all()
    if rows["tflops_per_gpu"].notna().any() and rows["atp_i"].nunique() > 1 and one_size:
        kinds.append("atp_bars")
    has_table3 = bool(reference and reference.cells())
    if rows["tflops_per_gpu"].notna().any() and (rows["chunks"].nunique() > 1 or has_table3):
        kinds.append("chunk_table")
    return tuple(kinds)


def step_sections(
    document: Document, out_dir: Path, frame: pd.DataFrame, options: ReportOptions, unit: str,
    reference: Reference | None,
) -> list[Path]:  # fmt: skip
    """A step table's figures and Table 3 layouts: the scenario's ``report.figures``, else the
    kinds that suit the table (:func:`auto_figures`); TFLOP/s in *unit*."""
    specs = options.figure_specs()
    if specs is None:
        specs = tuple(options.default_spec(k) for k in auto_figures(frame, reference))
    return _figures(document, out_dir, frame, specs, options, unit, reference)


def _figures(
    document: Document,
    out_dir: Path,
    frame: pd.DataFrame,
    specs: Sequence[FigureSpec],
    options: ReportOptions,
    unit: str,
    reference: Reference | None,
) -> list[Path]:
    written: list[Path] = []
    stems = _stems(specs)
    for spec, stem in zip(specs, stems, strict=True):
        heading = Heading(_TITLES[spec.kind] + _selection(spec))
        if spec.kind == "chunk_table":
            _chunk_section(document, heading, select_rows(frame, spec.select), reference, unit)
            continue
        made = _make_figure(spec, frame, options, unit)
        if made is None:
            document.add(heading, Paragraph("No successful points to plot."))
            continue
        png, svg = save_figure(made, out_dir / FIGURES_DIR, stem)
        written += [png, svg]
        document.add(heading, _figure_block(spec, png, svg, out_dir, unit))
    return written


def _stems(specs: Sequence[FigureSpec]) -> list[str]:
    """File stems: the kind, then ``kind-2``, ``kind-3`` for further figures of one kind."""
    seen: dict[str, int] = {}
    stems = []
    for spec in specs:
        seen[spec.kind] = seen.get(spec.kind, 0) + 1
        stems.append(spec.kind if seen[spec.kind] == 1 else f"{spec.kind}-{seen[spec.kind]}")
    return stems


def _selection(spec: FigureSpec) -> str:
    """`` (chunks = 1, model = M4)`` for a figure that shows a selection, else empty."""
    if not spec.select:
        return ""
    return " (" + ", ".join(f"{name} = {' or '.join(v)}" for name, v in spec.select) + ")"


_TITLES = {
    "atp_bars": "Throughput by mesh (as the paper's Figure 11)",
    "comm_scaling": "Communication against scale (as the paper's Figure 12)",
    "chunk_table": "Chunk-based overlap (as the paper's Table 3)",
    "scheme_bars": "Tensor-parallel schemes (as the paper's Figure 10)",
}
_CAPTIONS = {
    "atp_bars": "TFLOP/s per GPU by model; one bar per ATP-i = DeviceMesh(N/i, i); "
    "the best row where several share a bar; where the table has analytic rows too, the bars "
    "are the simulated ones and a black tick on each marks the analytic model.",
    "comm_scaling": "Communication time in units of Delta = 2·L·b·s·h / GroupBW against the "
    "number of devices. Solid: simulated; dashed: the analytic rows, else the paper's closed "
    "form (14·d2 + 4·d1 − 18)/(d1·d2). ATP-OPT: the mesh with the least communication of "
    "each atp-opt group.",
    "scheme_bars": "TFLOP/s per GPU by model: Megatron-LM (ATP-1, chunks = 1), ATP (the best "
    "mesh and chunk count) and SUMMA-based 2D / 2.5D tensor parallelism (its best grid, "
    "labelled q x q or q x q x depth); simulated rows (des) only.",
}


def _make_figure(
    spec: FigureSpec, frame: pd.DataFrame, options: ReportOptions, unit: str
) -> PlotFigure | None:
    if spec.kind == "atp_bars":
        return figures.atp_bars(frame, unit, spec)
    if spec.kind == "scheme_bars":
        return figures.scheme_bars(frame, unit, spec)
    return figures.comm_scaling(frame, options.atp, spec)


def _figure_block(
    spec: FigureSpec, png: Path, svg: Path, out_dir: Path, unit: str
) -> Figure:
    caption = _CAPTIONS[spec.kind]
    if spec.kind in ("atp_bars", "scheme_bars"):
        caption += f" Unit: {'2^40' if unit == 'paper' else '10^12'} FLOP/s."
    if spec.log_y:
        caption += " Logarithmic y axis."
    return Figure(str(png.relative_to(out_dir)), str(svg.relative_to(out_dir)), caption)


def _chunk_section(
    document: Document,
    heading: Heading,
    frame: pd.DataFrame,
    reference: Reference | None,
    unit: str,
) -> None:
    """Table 3 per mode (des, the prediction, first), each with its errors against the paper."""
    document.add(heading)
    if not chunk_table.chunk_tables(frame, reference, unit):
        document.add(Paragraph("No successful points to tabulate."))
    for mode in chunk_table.modes(frame):
        table = chunk_table.chunk_table(frame, reference, mode, unit)
        document.add(*([table] if table is not None else []))
        errors = chunk_table.error_summary(frame, reference, mode, unit)
        document.add(*([Paragraph(errors)] if errors else []))


#: Rows (or sentences) a section shows open; a longer one is folded (<details>) under a line
#: naming it, so the page's figures stay near its top.
OPEN_ROWS = 12


def folded(table: Table) -> Table | Details:
    """*table* as it is up to :data:`OPEN_ROWS` rows, else folded under its caption."""
    if len(table.rows) <= OPEN_ROWS:
        return table
    return Details(f"{table.caption or 'Table'} ({len(table.rows)} rows)", [table])


def job_sections(
    document: Document, out_dir: Path, frame: pd.DataFrame, options: ReportOptions, unit: str,
    reference: Reference | None,
) -> list[Path]:  # fmt: skip
    """A job table's best configurations, verdicts, calls alone against one network and
    breakdown figure (the scenario's *options*, *unit* and *reference* do not change them)."""
    best = job_tables.best_table(frame)
    document.add(Heading("Best configurations"))
    document.add(folded(best) if best is not None else Paragraph("No simulated point fits in memory."))
    sentences = job_tables.verdicts(frame)
    if sentences:
        document.add(Heading("Does ATP's best 2D mesh beat Megatron-LM's 1D TP?"))
        document.add(Bullets(sentences) if len(sentences) <= OPEN_ROWS else
                     Details(f"One sentence per comparison ({len(sentences)})", [Bullets(sentences)]))  # fmt: skip
    shared = job_tables.contention(frame)
    if shared is not None:
        document.add(Heading("Calls alone against one network for every call"), Bullets(shared[1]),
                     folded(shared[0]))  # fmt: skip
    written: list[Path] = []
    made = job_figures.breakdown(frame)
    document.add(Heading("Where the iteration goes"))
    if made is None:
        document.add(Paragraph("No successful points to plot."))
    else:
        png, svg = save_figure(made, out_dir / FIGURES_DIR, "job_breakdown")
        written += [png, svg]
        document.add(Figure(str(png.relative_to(out_dir)), str(svg.relative_to(out_dir)),
                            _JOB_CAPTION))  # fmt: skip
    return written


_JOB_CAPTION = (
    "Seconds per iteration of the best configuration of each TP scheme at each GPU count "
    "(Megatron-LM 1D: mesh t x 1; ATP 2D: d2 > 1; each bar labelled with its TP mesh, "
    "pipeline stages and data-parallel replicas), split into compute, exposed TP and DP "
    "communication, pipeline bubble and other (optimizer step, ZeRO gather, waiting) on the "
    "critical pipeline stage."
)
