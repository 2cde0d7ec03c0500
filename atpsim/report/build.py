"""Build a run's report from its results table and scenario: ``report.md``, a self-contained
``report.html``, and ``figures/*.png|svg``. :func:`rebuild_report` does it from a run folder
alone (``results.csv`` + ``scenario.yaml``), which is what ``atpsim report DIR`` calls.

A job scenario's table (:mod:`atpsim.results.job_schema`) gets the job report instead
(:func:`_job_sections`): the best configuration per TP scheme, a sentence per comparison on
whether ATP's best 2D mesh beats Megatron-LM's 1D TP, and the breakdown figure.

The scenario's ``report:`` section chooses what is drawn and how, and its ``reference:``
section gives published numbers to compare with (both typed and checked by the scenario
layer, :mod:`atpsim.scenario.report`); without ``figures`` the kinds are chosen from the
table's columns.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure as PlotFigure

from atpsim.errors import AtpsimError, read_text
from atpsim.report import (
    chunk_table,
    claims,
    figures,
    findings,
    job_figures,
    job_tables,
    large,
    tables,
)
from atpsim.report.data import ok_rows, select_rows
from atpsim.report.document import (
    Bullets,
    Code,
    Details,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
)
from atpsim.report.pages import FIGURES_DIR, SCENARIO_COPY, write_pages
from atpsim.report.panels import save_figure
from atpsim.report.provenance import RESULTS, Provenance, provenance, sentence
from atpsim.results.io import read_results
from atpsim.scenario.loader import load_report_sections
from atpsim.scenario.report import FIGURE_KINDS, FigureSpec, Reference, ReportOptions

__all__ = ["FIGURE_KINDS", "ReportOptions", "build_report", "rebuild_report", "auto_figures"]


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


@dataclass(frozen=True)
class Page:
    """What a report's page says before its figures: *title*, the scenario's *description*,
    the page's TFLOP/s *unit* (:func:`page_unit`), the paper's claims as checked
    (*verdicts*), the key findings (*findings*) and where the numbers come from
    (*provenance*). The index of reports (:mod:`atpsim.report.index`) lists the same."""

    title: str
    description: str
    unit: str
    verdicts: list[claims.Verdict]
    findings: list[str]
    provenance: Provenance


def page_unit(options: ReportOptions, reference: Reference | None, frame: pd.DataFrame) -> str:
    """The one TFLOP/s unit of a page: the ``report.tflops_unit`` the scenario sets; else the
    paper's 2^40 where the scenario compares with the paper's Table 3 cells, else SI. A job
    table has SI only."""
    if job_tables.is_job_table(frame):
        return "si"
    if "tflops_unit" in options.model_fields_set:
        return options.tflops_unit
    return "paper" if reference is not None and reference.cells() else "si"


def read_page(out_dir: Path, frame: pd.DataFrame, scenario_text: str, prov: Provenance) -> Page:
    """The :class:`Page` of the report of *frame* in *out_dir* (*scenario_text*: its YAML)."""
    scenario = load_report_sections(scenario_text, str(out_dir / SCENARIO_COPY))
    options, reference = scenario.report, scenario.reference
    unit = page_unit(options, reference, frame)
    name = str(scenario.name or out_dir.name)
    if job_tables.is_job_table(frame):
        checked: list[claims.Verdict] = []
        found = findings.findings(findings.Context(frame, reference, unit), findings.JOB_FINDINGS)
    else:
        checked = claims.verdicts(frame, reference)
        found = findings.findings(findings.Context(frame, reference, unit, checked))
        found += [n for n in [tables.uneven_heads_note(frame)] if n]
    description = str(scenario.description).strip() if scenario.description else ""
    return Page(options.title or f"atpsim report: {name}", description, unit, checked, found, prov)


def build_report(out_dir: Path, frame: pd.DataFrame, scenario_text: str) -> list[Path]:
    """Write the report of *frame* (the run's results) into *out_dir*, reading options from
    *scenario_text* (the scenario YAML, copied into the report). Returns the files written."""
    scenario = load_report_sections(scenario_text, str(out_dir / SCENARIO_COPY))
    options, reference = scenario.report, scenario.reference
    shutil.rmtree(out_dir / FIGURES_DIR, ignore_errors=True)
    prov, record = provenance(out_dir, len(frame))
    page = read_page(out_dir, frame, scenario_text, prov)
    document = Document(page.title)
    _intro(document, page, frame)
    _claims(document, frame, reference, page.verdicts)
    if options.notes:
        document.add(Heading("What the results show"))
        document.add(*(Paragraph(p.strip()) for p in options.notes.split("\n\n") if p.strip()))
    if job_tables.is_job_table(frame):
        written = _job_sections(document, out_dir, frame)
    else:
        specs = options.figure_specs()
        if specs is None:
            specs = tuple(options.default_spec(k) for k in auto_figures(frame, reference))
        written = _figures(document, out_dir, frame, specs, options, page.unit, reference)
        _tables(document, frame, page.unit)
    document.add(Heading("Scenario"), Details("scenario.yaml, as run", [Code(scenario_text, "yaml")]))
    _files_note(document)
    return [*write_pages(document, out_dir), *written, *([record] if record else [])]


def rebuild_report(out_dir: Path | str) -> list[Path]:
    """Rebuild the report of the run folder *out_dir* from its results.csv and scenario.yaml."""
    out = Path(out_dir)
    if large.is_large(out):  # past large.LARGE_ROWS rows: summarized from the file
        return large.build_large_report(out, scenario_text(out))
    frame = read_results(out)
    if frame.empty:  # a torn or emptied copy: keep the report it has rather than one of nothing
        raise AtpsimError("holds no rows (expected a header line and a row per point, as "
                          "`atpsim run` writes it)", source=str(out / RESULTS))  # fmt: skip
    return build_report(out, frame, scenario_text(out))


def scenario_text(out: Path) -> str:
    """The scenario copy of the run folder *out* (a name-only scenario where it has none)."""
    scenario = out / SCENARIO_COPY
    return read_text(scenario, "the run's scenario copy") if scenario.exists() else f"name: {out.name}\n"


#: What the page's units line says of each TFLOP/s unit.
UNIT_SENTENCES = {
    "si": "TFLOP/s are 10^12 FLOP/s",
    "paper": "TFLOP/s are the paper's unit, 2^40 FLOP/s (1.0995 x 10^12 FLOP/s)",
}


def _intro(document: Document, page: Page, frame: pd.DataFrame) -> None:
    """The description, provenance and units lines, and the key findings."""
    if page.description:
        document.add(Paragraph(page.description))
    units = [UNIT_SENTENCES[page.unit], "times in seconds"]
    if "comm_over_delta" in frame and frame["comm_over_delta"].notna().any():
        units.append("communication also in Delta = 2·L·b·s·h / GroupBW")
    if job_tables.is_job_table(frame):
        units.append("memory in GB = 10^9 B")
    document.add(
        Paragraph(sentence(page.provenance), note=True),
        Paragraph("Units, one per quantity on this page: " + "; ".join(units) + ".", note=True),
        Heading("Key findings"),
        Bullets(page.findings),
    )


def _claims(
    document: Document, frame: pd.DataFrame, reference: Reference | None,
    checked: list[claims.Verdict],
) -> None:  # fmt: skip
    """The paper's claims about this figure, each with what the simulation shows and whether
    it agrees (:mod:`atpsim.report.claims`), and Table 3's rank agreement where it applies."""
    taus = claims.rank_agreement(frame, reference)
    if not checked and not taus:
        return
    document.add(Heading("Against the paper"))
    if checked:
        agreed = sum(v.agrees is True for v in checked)
        verdict = {True: "yes", False: "**no**", None: "no data"}
        rows = [[v.claim.text, v.shown, verdict[v.agrees]] for v in checked]
        header = ["the paper says", "simulated", "agrees"]
        if any(v.claim.why for v in checked):
            rows = [[*r, v.claim.why or ""] for r, v in zip(rows, checked, strict=True)]
            header.append("why (tested)")
        caption = (f"The paper's claims, checked on the simulated rows: {agreed} of "
                   f"{len(checked)} agree")
        document.add(Table(header, rows, caption))
    if taus:
        text = ", ".join(f"{topology} {tau:.2f}" for topology, tau in taus.items())
        document.add(Paragraph(
            "Rank agreement with the paper's Table 3 (Kendall's tau of the simulated against "
            f"the paper's cells of each interconnect, 1 = the same order): {text}."))


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


def _job_sections(document: Document, out_dir: Path, frame: pd.DataFrame) -> list[Path]:
    """A job scenario's report: best configurations, verdicts, breakdown figure, all rows."""
    best = job_tables.best_table(frame)
    document.add(Heading("Best configurations"))
    document.add(best if best is not None else Paragraph("No simulated point fits in memory."))
    sentences = job_tables.verdicts(frame)
    if sentences:
        document.add(Heading("Does ATP's best 2D mesh beat Megatron-LM's 1D TP?"))
        document.add(Bullets(sentences))
    shared = job_tables.contention(frame)
    if shared is not None:
        document.add(Heading("Calls alone against one network for every call"), Bullets(shared[1]), shared[0])
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
    _raw_rows(document, job_tables.failures(frame), replace(job_tables.all_rows(frame), caption=""))
    return written


_JOB_CAPTION = (
    "Seconds per iteration of the best configuration of each TP scheme at each GPU count "
    "(Megatron-LM 1D: mesh t x 1; ATP 2D: d2 > 1; each bar labelled with its TP mesh, "
    "pipeline stages and data-parallel replicas), split into compute, exposed TP and DP "
    "communication, pipeline bubble and other (optimizer step, ZeRO gather, waiting) on the "
    "critical pipeline stage."
)


def _tables(document: Document, frame: pd.DataFrame, unit: str) -> None:
    _raw_rows(document, tables.failures(frame), tables.all_rows(frame, unit))


def _raw_rows(document: Document, failed: Table | None, rows: Table) -> None:
    """The failures, then every row folded (a long table scrolls inside its box)."""
    if failed is not None:
        document.add(Heading("Failures"), failed)
    summary = f"All {len(rows.rows)} points (main columns; every column is in results.csv)"
    document.add(Heading("All points"), Details(summary, [rows]))


def _files_note(document: Document) -> None:
    document.add(
        Heading("Files"),
        Paragraph(
            "[results.csv](results.csv) (and results.parquet where pyarrow is installed) holds "
            "every column of the results schema (`atpsim.results.schema`) in point order; "
            "figures/ holds each figure as PNG and SVG; provenance.json records when these "
            "results were first reported and by which atpsim. Rebuild this report from those "
            "files alone with `atpsim report <this folder>`; `atpsim report --index <folder of "
            "reports>` writes the index page of several."
        ),
    )
