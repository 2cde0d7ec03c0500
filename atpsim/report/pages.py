"""The files of a report folder: the scenario copy a run keeps beside its results table,
``report.md`` and a self-contained ``report.html`` written from one :class:`Document`, and the
``figures/`` folder. Shared by the report of a table (:mod:`atpsim.report.build`) and of a table
too large to show whole (:mod:`atpsim.report.large`)."""

from __future__ import annotations

from pathlib import Path

from atpsim.report.document import Document, to_html, to_markdown

SCENARIO_COPY = "scenario.yaml"
REPORT_MD, REPORT_HTML, FIGURES_DIR = "report.md", "report.html", "figures"


def write_pages(document: Document, out_dir: Path) -> list[Path]:
    """Write *document* into *out_dir* as report.md and report.html (figures embedded); the two
    paths, in that order."""
    (out_dir / REPORT_MD).write_text(to_markdown(document), encoding="utf-8")
    (out_dir / REPORT_HTML).write_text(to_html(document, out_dir), encoding="utf-8")
    return [out_dir / REPORT_MD, out_dir / REPORT_HTML]
