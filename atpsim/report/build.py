"""Build a run's report from its results table and scenario: ``report.md``, a self-contained
``report.html``, and ``figures/*.png|svg``. :func:`rebuild_report` does it from a run folder
alone (``results.csv`` + ``scenario.yaml``), which is what ``atpsim report DIR`` calls.

The scenario's free-form ``report:`` section chooses what is drawn (see
:class:`ReportOptions`); without ``figures`` the kinds are chosen from the table's columns.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from atpsim.errors import ScenarioError
from atpsim.report import figures, tables
from atpsim.report.data import TFLOPS_COLUMNS, ok_rows
from atpsim.report.document import (
    Code,
    Document,
    Figure,
    Heading,
    Paragraph,
    to_html,
    to_markdown,
)
from atpsim.results.io import read_results

FIGURE_KINDS = ("atp_bars", "comm_scaling", "chunk_table")
SCENARIO_COPY = "scenario.yaml"
REPORT_MD, REPORT_HTML, FIGURES_DIR = "report.md", "report.html", "figures"


@dataclass(frozen=True)
class ReportOptions:
    """The scenario's ``report:`` section. *figures*: kinds to draw, from
    :data:`FIGURE_KINDS` (None: chosen from the table); *title*; *notes*: paragraphs of text
    (Markdown) for the report, e.g. what the results show; *tflops_unit*: ``si`` (10^12) or
    ``paper`` (2^40) for the bar figure; *atp*: the ATP-i lines of the scaling figure."""

    figures: tuple[str, ...] | None = None
    title: str | None = None
    notes: str = ""
    tflops_unit: str = "si"
    atp: tuple[int, ...] = (1, 2, 4)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, source: str | None) -> ReportOptions:
        """Options from the ``report:`` mapping *raw*; bad keys/values raise ScenarioError."""
        from atpsim.topology.registry import did_you_mean

        raw = dict(raw or {})
        for key in raw:
            if key not in cls.__dataclass_fields__:
                hint = did_you_mean(key, cls.__dataclass_fields__)
                raise ScenarioError(f"unknown key {key!r}{hint}", source=source, key="report")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        options = cls(**values)
        options.check(source)
        return options

    def check(self, source: str | None) -> None:
        """Raise ScenarioError (naming the key under ``report``) for a value of the wrong kind."""
        for key, (kind, text) in _KINDS.items():
            if not isinstance(getattr(self, key), kind):
                message = f"expected {text}, got {getattr(self, key)!r}"
                raise ScenarioError(message, source=source, key=f"report.{key}")
        if not all(isinstance(i, int) and i >= 1 for i in self.atp):
            raise ScenarioError(
                f"expected a list of positive integers, got {list(self.atp)}",
                source=source,
                key="report.atp",
            )
        for k, kind in enumerate(self.figures or ()):
            if kind not in FIGURE_KINDS:
                expected = f"expected one of {', '.join(FIGURE_KINDS)}"
                raise ScenarioError(
                    f"unknown figure {kind!r}; {expected}",
                    source=source,
                    key=f"report.figures[{k}]",
                )
        if self.tflops_unit not in TFLOPS_COLUMNS:
            raise ScenarioError(
                f"expected 'si' or 'paper', got {self.tflops_unit!r}",
                source=source,
                key="report.tflops_unit",
            )


_KINDS: dict[str, tuple[Any, str]] = {
    "figures": ((tuple, type(None)), "a list of figure kinds"),
    "title": ((str, type(None)), "a string"),
    "notes": (str, "a string"),
    "tflops_unit": (str, "'si' or 'paper'"),
    "atp": (tuple, "a list of positive integers"),
}


def auto_figures(frame: pd.DataFrame, reference: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Figure kinds that suit the table: scaling when a topology has several device counts, bars when the
    ATP-i varies at one device count per topology, the chunk table when chunks vary or the
    scenario holds Table 3 reference cells."""
    rows, kinds = ok_rows(frame), []
    scales = (rows.groupby("topology")["n_devices"].nunique() > 1).any()
    if rows["comm_over_delta"].notna().any() and scales:
        kinds.append("comm_scaling")
    one_size = (rows.groupby("topology")["n_devices"].nunique() <= 1).all()
    if rows["tflops_per_gpu"].notna().any() and rows["atp_i"].nunique() > 1 and one_size:
        kinds.append("atp_bars")
    has_table3 = bool(tables.reference_cells(reference))
    if rows["tflops_per_gpu"].notna().any() and (rows["chunks"].nunique() > 1 or has_table3):
        kinds.append("chunk_table")
    return tuple(kinds)


def build_report(out_dir: Path, frame: pd.DataFrame, scenario_text: str) -> list[Path]:
    """Write the report of *frame* (the run's results) into *out_dir*, reading options from
    *scenario_text* (the scenario YAML, copied into the report). Returns the files written."""
    source = str(out_dir / SCENARIO_COPY)
    scenario = yaml.safe_load(scenario_text) or {}
    options = ReportOptions.from_mapping(scenario.get("report"), source)
    reference = scenario.get("reference")
    tables.reference_cells(reference, source)
    kinds = options.figures if options.figures is not None else auto_figures(frame, reference)
    shutil.rmtree(out_dir / FIGURES_DIR, ignore_errors=True)
    name = str(scenario.get("name") or out_dir.name)
    document = Document(options.title or f"atpsim report: {name}")
    _intro(document, scenario, frame, options)
    written = _figures(document, out_dir, frame, kinds, options, reference)
    _tables(document, frame, reference)
    document.add(
        Heading("Scenario"), Paragraph(f"`{SCENARIO_COPY}`, as run:"), Code(scenario_text, "yaml")
    )
    _files_note(document)
    (out_dir / REPORT_MD).write_text(to_markdown(document), encoding="utf-8")
    (out_dir / REPORT_HTML).write_text(to_html(document, out_dir), encoding="utf-8")
    return [out_dir / REPORT_MD, out_dir / REPORT_HTML, *written]


def rebuild_report(out_dir: Path | str) -> list[Path]:
    """Rebuild the report of the run folder *out_dir* from its results.csv and scenario.yaml."""
    out = Path(out_dir)
    frame = read_results(out)
    scenario = out / SCENARIO_COPY
    text = scenario.read_text(encoding="utf-8") if scenario.exists() else f"name: {out.name}\n"
    return build_report(out, frame, text)


def _intro(
    document: Document, scenario: Mapping[str, Any], frame: pd.DataFrame, options: ReportOptions
) -> None:
    if scenario.get("description"):
        document.add(Paragraph(str(scenario["description"]).strip()))
    ok = int((frame["status"] == "ok").sum())
    summary = f"{len(frame)} points: {ok} simulated, {len(frame) - ok} failed."
    document.add(Paragraph(summary))
    if options.notes:
        document.add(Heading("What the results show"))
        document.add(*(Paragraph(p.strip()) for p in options.notes.split("\n\n") if p.strip()))


def _figures(
    document: Document,
    out_dir: Path,
    frame: pd.DataFrame,
    kinds: Sequence[str],
    options: ReportOptions,
    reference: Mapping[str, Any] | None,
) -> list[Path]:
    written: list[Path] = []
    for kind in kinds:
        if kind == "chunk_table":
            _chunk_section(document, frame, reference)
            continue
        made = _make_figure(kind, frame, options)
        if made is None:
            document.add(Heading(_TITLES[kind]), Paragraph("No successful points to plot."))
            continue
        png, svg = figures.save_figure(made, out_dir / FIGURES_DIR, kind)
        written += [png, svg]
        document.add(Heading(_TITLES[kind]), _figure_block(kind, png, svg, out_dir, options))
    return written


_TITLES = {
    "atp_bars": "Throughput by mesh (as the paper's Figure 11)",
    "comm_scaling": "Communication against scale (as the paper's Figure 12)",
    "chunk_table": "Chunk-based overlap (as the paper's Table 3)",
}
_CAPTIONS = {
    "atp_bars": "TFLOP/s per GPU by model; one bar per ATP-i = DeviceMesh(N/i, i); "
    "the best row where several share a bar.",
    "comm_scaling": "Communication time in units of Delta = 2·L·b·s·h / GroupBW against the "
    "number of devices. Solid: simulated; dashed: the analytic rows, else the paper's closed "
    "form (14·d2 + 4·d1 − 18)/(d1·d2). ATP-OPT: the mesh with the least communication of "
    "each atp-opt group.",
}


def _make_figure(kind: str, frame: pd.DataFrame, options: ReportOptions):
    if kind == "atp_bars":
        return figures.atp_bars(frame, options.tflops_unit)
    return figures.comm_scaling(frame, options.atp)


def _figure_block(kind: str, png: Path, svg: Path, out_dir: Path, options: ReportOptions) -> Figure:
    caption = _CAPTIONS[kind]
    if kind == "atp_bars":
        caption += f" Unit: {'2^40' if options.tflops_unit == 'paper' else '10^12'} FLOP/s."
    return Figure(str(png.relative_to(out_dir)), str(svg.relative_to(out_dir)), caption)


def _chunk_section(
    document: Document, frame: pd.DataFrame, reference: Mapping[str, Any] | None
) -> None:
    document.add(Heading(_TITLES["chunk_table"]))
    table = tables.chunk_table(frame, reference)
    if table is None:
        document.add(Paragraph("No successful points to tabulate."))
        return
    document.add(table)
    errors = tables.reference_errors(frame, reference)
    if errors:
        mean = sum(abs(e) for e in errors) / len(errors)
        worst = max(errors, key=abs)
        document.add(
            Paragraph(
                f"Against the paper's {len(errors)} cells: mean |error| "
                f"{mean:.1%}, worst {worst:+.1%}."
            )
        )


def _tables(document: Document, frame: pd.DataFrame, reference: Mapping[str, Any] | None) -> None:
    failed = tables.failures(frame)
    if failed is not None:
        document.add(Heading("Failures"), failed)
    document.add(Heading("All points"), tables.all_rows(frame))


def _files_note(document: Document) -> None:
    document.add(
        Heading("Files"),
        Paragraph(
            "results.csv (and results.parquet where pyarrow is installed) holds every column "
            "of the results schema (atpsim.results.schema) in point order; figures/ holds each "
            "figure as PNG and SVG. Rebuild this report from those files alone with "
            "`atpsim report <this folder>`."
        ),
    )
