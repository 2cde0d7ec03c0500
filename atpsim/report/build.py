"""Build a run's report from its results table and scenario: ``report.md``, a self-contained
``report.html``, and ``figures/*.png|svg``. :func:`rebuild_report` does it from a run folder
alone (``results.csv`` + ``scenario.yaml``), which is what ``atpsim report DIR`` calls.

Every page has the same parts: the description, the answer (a paragraph and a small table), provenance, the machines and units, the key findings, the
paper's claims, the scenario's notes, the sections of the table's workload, the raw rows, the
scenario and the files. What differs between a step table and a job scenario's table
(:mod:`atpsim.results.schema`) is the workload's entry in :mod:`atpsim.report.workloads`: its
TFLOP/s unit, claims, findings, units and sections (for a job: the best configuration per TP
scheme, a sentence per comparison on whether ATP's best 2D mesh beats Megatron-LM's 1D TP,
and the breakdown figure).

The scenario's ``report:`` section chooses what is drawn and how, and its ``reference:``
section gives published numbers to compare with (both typed and checked by the scenario
layer, :mod:`atpsim.scenario.report`); without ``figures`` the kinds are chosen from the
table's columns (:func:`atpsim.report.sections.auto_figures`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from atpsim.errors import AtpsimError, read_text
from atpsim.report import answer, claims, findings, large
from atpsim.report.document import (
    Bullets,
    Code,
    Details,
    Document,
    Heading,
    Paragraph,
    Table,
)
from atpsim.report.machine import machine_lines
from atpsim.report.pages import FIGURES_DIR, SCENARIO_COPY, write_pages
from atpsim.report.provenance import RESULTS, Provenance, provenance, sentence
from atpsim.report.workloads import Workload, workload
from atpsim.results.io import read_results
from atpsim.scenario.loader import load_report_sections
from atpsim.scenario.report import FIGURE_KINDS, Reference, ReportOptions

__all__ = ["FIGURE_KINDS", "ReportOptions", "build_report", "rebuild_report"]


@dataclass(frozen=True)
class Page:
    """What a report's page says before its figures: *title*, the scenario's *description*,
    the page's TFLOP/s *unit* (its workload's :attr:`Workload.unit`), the paper's claims as
    checked (*verdicts*), the key findings (*findings*) and where the numbers come from
    (*provenance*). The index of reports (:mod:`atpsim.report.index`) lists the same."""

    title: str
    description: str
    unit: str
    verdicts: list[claims.Verdict]
    findings: list[str]
    provenance: Provenance
    answer: str = ""
    two_d_wins: tuple[int, int] | None = None


def read_page(out_dir: Path, frame: pd.DataFrame, scenario_text: str, prov: Provenance) -> Page:
    """The :class:`Page` of the report of *frame* in *out_dir* (*scenario_text*: its YAML)."""
    scenario = load_report_sections(scenario_text, str(out_dir / SCENARIO_COPY))
    options, reference = scenario.report, scenario.reference
    shown = workload(frame)
    unit = shown.unit(options, reference)
    name = str(scenario.name or out_dir.name)
    checked = shown.verdicts(frame, reference)
    found = findings.findings(findings.Context(frame, reference, unit, checked), shown.findings)
    description = str(scenario.description).strip() if scenario.description else ""
    cases = answer.cases_of(frame, shown.name)
    sentence = answer.answer_sentence(cases, shown.name).removesuffix(" Per case:") if cases else ""
    contest = shown.name != "job" or any(c.over_baseline is not None for c in cases)
    wins = (sum(c.two_d for c in cases), len(cases)) if cases and contest else None
    return Page(options.title or f"atpsim report: {name}", description, unit, checked, found, prov,
                sentence, wins)  # fmt: skip


def build_report(out_dir: Path, frame: pd.DataFrame, scenario_text: str) -> list[Path]:
    """Write the report of *frame* (the run's results) into *out_dir*, reading options from
    *scenario_text* (the scenario YAML, copied into the report). Returns the files written."""
    scenario = load_report_sections(scenario_text, str(out_dir / SCENARIO_COPY))
    options, reference = scenario.report, scenario.reference
    shutil.rmtree(out_dir / FIGURES_DIR, ignore_errors=True)
    prov, record = provenance(out_dir, len(frame))
    page, shown = read_page(out_dir, frame, scenario_text, prov), workload(frame)
    document = Document(page.title)
    _intro(document, page, frame, shown, machine_lines(frame, scenario_text, out_dir))
    _claims(document, frame, reference, page.verdicts)
    if options.notes:
        document.add(Heading("What the results show"))
        document.add(*(Paragraph(p.strip()) for p in options.notes.split("\n\n") if p.strip()))
    written = shown.sections(document, out_dir, frame, options, page.unit, reference)
    _raw_rows(document, shown.failures(frame), shown.all_rows(frame, page.unit))
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


def _intro(document: Document, page: Page, frame: pd.DataFrame, shown: Workload,
           machines: list[str]) -> None:  # fmt: skip
    """The description (the question), the answer (:mod:`atpsim.report.answer`), provenance,
    *machines* (one line per topology and hardware of the results, :mod:`atpsim.report.machine`)
    and units lines (with those the *shown* workload adds), and the key findings."""
    if page.description:
        document.add(Paragraph(page.description))
    document.add(*answer.answer_blocks(frame, shown.name))
    units = [UNIT_SENTENCES[page.unit], "times in seconds"]
    if "comm_over_delta" in frame and frame["comm_over_delta"].notna().any():
        units.append("communication also in Delta = 2·L·b·s·h / GroupBW")
    units += shown.units
    document.add(
        Paragraph(sentence(page.provenance), note=True),
        Paragraph(engine_line(frame), note=True),
        *(Paragraph(line, note=True) for line in machines),
        Paragraph("Units, one per quantity on this page: " + "; ".join(units) + ".", note=True),
        Heading("Key findings"),
        Bullets(page.findings),
    )


#: How each table's points were timed, by their mode (step tables) or network (job tables).
ENGINE_PATHS = {
    "des": "the event engine (des: every collective's flows on the links, max-min shared)",
    "analytic": "the paper's closed form (analytic: Eq. 2, no latency, no contention)",
    "joint": "the event engine on one network (joint: every call in flight shares the links)",
    "isolated": "the event engine, each call timed alone (isolated), composed per iteration",
}


def engine_line(frame: pd.DataFrame) -> str:
    """Which path timed the points, with how many each: the event engine or the closed form
    (a step table's ``mode``), one network or isolated calls (a job table's ``network``)."""
    column = "network" if "network" in frame.columns else "mode"
    if column not in frame.columns or frame.empty:
        return "Engine: not recorded."
    counts = frame[column].astype(str).value_counts(sort=False)
    parts = [f"{ENGINE_PATHS.get(name, name)} for {count} point{'s' * (count != 1)}"
             for name, count in counts.items()]  # fmt: skip
    return "Engine: " + "; ".join(parts) + "."


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
