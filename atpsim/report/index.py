"""The index page of a folder of reports: ``atpsim report --index reports/`` writes
``reports/index.html``, one page that lists every run folder under it (one holding a
results.csv): a summary of them all, a table of the reports (points, in how many cases a 2D
mesh is fastest, the paper's claims that hold, the date the results were first reported),
then per report its description's first sentence, its answer, its key findings and links to
its page, Markdown, results and scenario.

It reads each folder as :func:`atpsim.report.build.read_page` does for the report itself
(results.csv, scenario.yaml, provenance.json) and writes nothing into them, so the index
changes only when a report's results or the atpsim that builds it do; ``atpsim run`` does
not rewrite it (one run knows one folder).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

from atpsim.errors import AtpsimError
from atpsim.report import large
from atpsim.report.build import SCENARIO_COPY, Page, read_page, scenario_text
from atpsim.report.document import (
    Bullets,
    Document,
    Heading,
    Paragraph,
    Table,
    md_escape,
    to_html,
)
from atpsim.report.provenance import RESULTS, atpsim_version, recorded, sentence
from atpsim.results.io import read_results
from atpsim.scenario.loader import load_report_sections

INDEX_HTML = "index.html"


def report_folders(folder: Path) -> list[Path]:
    """The run folders directly under *folder* (those holding a results.csv), by name."""
    return sorted(p for p in folder.iterdir() if (p / RESULTS).is_file())


def read_pages(folder: Path) -> list[tuple[Path, Page]]:
    """Each run folder under *folder* with its :class:`Page` (provenance read, not written);
    a table too large to read whole (:mod:`atpsim.report.large`) is listed by its size."""
    return [(run, run_page(run)) for run in report_folders(folder)]


def run_page(run: Path) -> Page:
    """The :class:`Page` of the run folder *run* (title, findings, the paper's claims as
    checked), its provenance read, not written: what the index lists and ``atpsim run``
    prints when it ends."""
    if large.is_large(run):
        return _large_page(run)
    frame = read_results(run)
    return read_page(run, frame, scenario_text(run), recorded(run, len(frame)))


def _large_page(run: Path) -> Page:
    """The index entry of a large table's report: its title, description and size only."""
    text = scenario_text(run)
    scenario = load_report_sections(text, str(run / SCENARIO_COPY))
    rows = large.row_count(run / RESULTS)
    found = [f"{rows} points, too many to list: the report summarizes them (best configurations, "
             "Pareto fronts)."]  # fmt: skip
    description = str(scenario.description).strip() if scenario.description else ""
    title = scenario.report.title or f"atpsim report: {scenario.name or run.name}"
    return Page(title, description, "si", [], found, recorded(run, rows))


def build_index(folder: Path | str, out: Path | str | None = None) -> Path:
    """Write the index page of the reports under *folder* to *out* (default
    ``folder/index.html``) and return its path. Raises AtpsimError when *folder* holds no
    run folder."""
    root = Path(folder)
    if not root.is_dir():
        raise AtpsimError("expected a folder of report folders", source=str(root))
    pages = read_pages(root)
    if not pages:
        raise AtpsimError("no report folders here (subfolders holding a results.csv)", source=str(root))
    path = Path(out) if out is not None else root / INDEX_HTML
    path.write_text(to_html(_document(pages), root), encoding="utf-8")
    return path


def _document(pages: list[tuple[Path, Page]]) -> Document:
    document = Document("atpsim reports")
    document.add(
        Paragraph(f"Built by atpsim {atpsim_version()} from the report folders beside this page; "
                  "`atpsim report --index <this folder>` rebuilds it, `atpsim report "
                  "<folder>` rebuilds one report.", note=True),  # fmt: skip
        Paragraph(overall(pages)),
        Paragraph("Units: TFLOP/s are SI (10^12 FLOP/s) except where a report compares with the "
                  "ATP paper's tables, which use the paper's 2^40 FLOP/s; each finding names its "
                  "unit. Times are in seconds.", note=True),  # fmt: skip
        Table(["report", "points", "answer", "the paper's claims that hold",
               "results first reported"], [_row(run, page) for run, page in pages]),  # fmt: skip
    )
    for run, page in pages:
        href = folder_href(run)
        document.add(Heading(f"[{md_escape(_title(run, page))}]({href}report.html)"))
        if page.description:
            document.add(Paragraph(first_sentence(page.description)))
        if page.answer:
            document.add(Paragraph(f"**Answer.** {page.answer}"))
        document.add(Bullets(page.findings))
        links = f"[report.md]({href}report.md) · " + sentence(page.provenance, href)
        document.add(Paragraph(links, note=True))
    return document


def folder_href(run: Path) -> str:
    """The link to the run folder *run* from the index beside it, with a trailing slash: its
    name percent-encoded, so a folder named like markup or a URL (``<b>x<b>``,
    ``javascript:x``) is a relative link to that folder and nothing else."""
    return quote(run.name, safe="") + "/"


def _row(run: Path, page: Page) -> list[str]:
    checked = [v for v in page.verdicts if v.agrees is not None]
    agreed = f"{sum(bool(v.agrees) for v in checked)} of {len(checked)}" if checked else "- (no paper figure)"
    wins = f"an ATP 2D mesh is fastest in {page.two_d_wins[0]} of {page.two_d_wins[1]} cases" \
        if page.two_d_wins else "-"
    return [f"[{md_escape(run.name)}]({folder_href(run)}report.html)", str(page.provenance.rows),
            wins, agreed, page.provenance.date or "not recorded"]  # fmt: skip


def _title(run: Path, page: Page) -> str:
    """``name: title`` (the folder's name first, so every entry reads alike), or the name
    alone where the scenario gives no title."""
    title = page.title.removeprefix("atpsim report: ")
    return run.name if title == run.name else f"{run.name}: {title}"


def overall(pages: list[tuple[Path, Page]]) -> str:
    """The whole folder in two sentences: reports and points, the paper's claims that hold,
    and in how many cases a 2D mesh is fastest (counted on each report's answer table)."""
    points = sum(page.provenance.rows for _, page in pages)
    checked = [v for _, page in pages for v in page.verdicts if v.agrees is not None]
    cases = [page.two_d_wins for _, page in pages if page.two_d_wins]
    text = f"{len(pages)} reports, {points:,} simulated points."
    if checked:
        text += (f" Of the ATP paper's {len(checked)} claims checked, "
                 f"{sum(bool(v.agrees) for v in checked)} hold in the simulation.")  # fmt: skip
    if cases:
        text += (f" An ATP 2D mesh is the fastest layout in {sum(w for w, _ in cases)} of "
                 f"{sum(n for _, n in cases)} cases across the reports' answer tables.")  # fmt: skip
    return text


def first_sentence(text: str) -> str:
    """The first sentence of *text* (up to a full stop, a space and a capital), on one line."""
    flat = " ".join(text.split())
    found = re.search(r"\.\s(?=[A-Z])", flat)
    return flat[: found.start() + 1] if found else flat
