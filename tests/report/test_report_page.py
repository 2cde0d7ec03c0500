"""A report reads like a results page: key findings and the paper's claims first, one
TFLOP/s unit per page, raw rows folded, provenance that does not change a rebuilt page, and
an index page across reports (``atpsim report --index``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_fakes import fig11_frame, modes_frame, table3_frame
from test_job_report import ROWS
from test_report_build import build

from atpsim.cli import main
from atpsim.errors import AtpsimError
from atpsim.report import findings
from atpsim.report.build import rebuild_report
from atpsim.report.index import build_index, first_sentence
from atpsim.results.io import to_frame, write_results
from atpsim.results.schema import JOB_SCHEMA
from atpsim.scenario.report import Reference

ROOT = Path(__file__).resolve().parents[2]
DAY_S = 86_400
REFERENCE = Reference(table3={"M2": {"ic4": {1: 100.0}}})


def context(frame, reference=None, unit="si"):
    return findings.Context(frame, reference, unit)


def test_the_worst_table3_error_names_its_cell():
    """Paper 100.0 at ic4, chunks 1: des 98.99 on 8 GPUs (-1.0%) and 108.19 on 16 GPUs
    (+8.2%, the worst); mean (1.01 + 8.19) / 2 = 4.6%."""
    text = findings.table3_errors(context(modes_frame(), REFERENCE, "paper"))
    assert text == (
        "Simulated (des) against the paper's 2 Table 3 cells: mean |error| 4.6%, worst +8.2% "
        "(M2 Baseline on ic4, 16 GPUs: 108.19 against the paper's 100.00 TFLOP/s per GPU, "
        "paper unit, 2^40)."
    )


def test_fastest_configuration_per_machine_and_model():
    """The fake's least closed form: 4x2 of 8 GPUs (3.25 + 0.1), 8x2 of 16 (2.625 + 0.1);
    M2 (h 4096) on ic4: 200 / (1 + 2.725 / 4) = 118.96 TFLOP/s, M2 on ic1 108.84."""
    text = findings.fastest(context(fig11_frame()))
    assert text == (
        "Fastest configuration per model (TFLOP/s per GPU, SI, 10^12): ic1: M1, M2 on 4x2 "
        "(best 108.8); ic4: M1, M2 on 8x2 (best 119)."
    )
    assert findings.least_communication(context(fig11_frame())) is None  # one size per topology


def test_analytic_gap_and_chunk_gain():
    """Analytic rows rank the transposed meshes first, so the two modes never agree on the
    fastest mesh of the 4 configurations (8 and 16 GPUs, chunks 1 and 2); chunks 2 on 4x2:
    200 / (1 + 3.35 / 8) / (200 / (1 + 3.35 / 4)) - 1 = +30%, on 8x2 +25%."""
    gap = findings.analytic_gap(context(modes_frame()))
    assert "on the 18 points both ran" in gap and "same fastest mesh in 0 of 4 configurations" in gap
    assert findings.chunk_gains(context(modes_frame())).endswith("ic4 +25% to +30%.")
    assert findings.analytic_gap(context(fig11_frame())) is None


def test_job_findings_count_the_comparisons():
    """ROWS: Megatron-LM's best 9.0 s, ATP's 7.5 s: 9.0 / 7.5 - 1 = 20.0% (one comparison)."""
    found = findings.findings(context(to_frame(ROWS, JOB_SCHEMA)), findings.JOB_FINDINGS)
    assert found == [
        "5 points: 5 simulated; 1 does not fit in GPU memory.",
        "ATP's best 2D mesh is faster than Megatron-LM's best 1D TP in 1 of 1 comparisons "
        "(by 20.0%), slower in 0.",
    ]


def test_the_page_leads_with_findings_and_claims_and_folds_raw_rows(tmp_path):
    text = ("name: t\nreference:\n  table3: {M2: {ic4: {1: 100.0}}}\n  claims:\n"
            "    - {text: 'ic4: 4x2 is best', check: best_mesh, topology: ic4, mesh: 4x2}\n")  # fmt: skip
    build(tmp_path, modes_frame(), text)
    md = (tmp_path / "report.md").read_text()
    order = ["## Key findings", "## Against the paper", "## Chunk-based overlap", "## All points"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    assert "<details><summary>All 36 points (main columns" in md
    page = (tmp_path / "report.html").read_text()
    assert "<strong>no</strong>" in page and "**" not in page and "`" not in page
    assert '<a href="results.csv">results.csv</a> (36 rows, SHA-256 ' in page


def tflops_headers(md: str) -> set[str]:
    return set(re.findall(r"TFLOP/s per GPU \[[^\]]+\]", md))


@pytest.mark.parametrize(
    ("report", "unit"),
    [
        ("", "[10^12]"),  # the default
        ("  tflops_unit: paper\n", "[2^40]"),
        ("reference: {table3: {M2: {ic1: {1: 3.45}}}}\n", "[2^40]"),  # compared with the paper
        ("  tflops_unit: si\nreference: {table3: {M2: {ic1: {1: 3.45}}}}\n", "[10^12]"),
    ],
)
def test_one_tflops_unit_per_page(tmp_path, report, unit):
    build(tmp_path, table3_frame(), "name: t\nreport:\n  figures: [chunk_table]\n" + report)
    md = (tmp_path / "report.md").read_text()
    assert tflops_headers(md) == {f"TFLOP/s per GPU {unit}"}
    other = "2^40" if unit == "[10^12]" else "SI, 10^12"
    assert f"({other})" not in md and f"Unit: {other}" not in md
    assert ("TFLOP/s are 10^12 FLOP/s" in md) == (unit == "[10^12]")


def test_the_date_is_recorded_once_per_results_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    build(tmp_path, fig11_frame())
    record = json.loads((tmp_path / "provenance.json").read_text())
    assert record["date"] == "1970-01-01" and len(record["results_sha256"]) == 64
    first = (tmp_path / "report.md").read_text()
    assert "results first reported 1970-01-01" in first
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(400 * DAY_S))
    rebuild_report(tmp_path)
    assert (tmp_path / "report.md").read_text() == first  # same results: same page
    write_results(tmp_path, fig11_frame().head(3), parquet=False)
    rebuild_report(tmp_path)
    assert "results first reported 1971-02-05" in (tmp_path / "report.md").read_text()


def test_a_bad_source_date_epoch_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(AtpsimError, match="SOURCE_DATE_EPOCH: expected whole seconds"):
        build(tmp_path, fig11_frame())


def test_the_index_lists_every_report(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    build(tmp_path / "b", fig11_frame(), "name: b\ndescription: Bars. More text.\n")
    build(tmp_path / "a", modes_frame(), "name: a\nreport: {title: The A report}\n")
    (tmp_path / "not-a-report").mkdir()
    result = CliRunner().invoke(main, ["report", "--index", str(tmp_path)])
    assert result.exit_code == 0 and result.output == f"{tmp_path / 'index.html'}\n"
    page = (tmp_path / "index.html").read_text()
    assert page.index('<a href="a/report.html">a</a>') < page.index('<a href="b/report.html">b</a>')
    assert '<h2><a href="a/report.html">a: The A report</a></h2>' in page
    assert '<h2><a href="b/report.html">b</a></h2>' in page
    assert "2 reports, 48 simulated points." in page and "<strong>Answer.</strong>" in page
    assert "<p>Bars.</p>" in page and "12 points: 12 simulated." in page
    assert '<a href="b/results.csv">results.csv</a> (12 rows' in page and "1970-01-01" in page
    assert not (tmp_path / "not-a-report" / "index.html").exists()


def test_a_large_table_is_listed_by_its_size(tmp_path, monkeypatch):
    """Past large.LARGE_ROWS rows the index reads no table, only its row count."""
    build(tmp_path / "big", fig11_frame(), "name: big\n")
    monkeypatch.setattr("atpsim.report.large.LARGE_ROWS", 5)
    monkeypatch.setattr("atpsim.report.index.read_results", None)  # never called
    page = build_index(tmp_path).read_text()
    assert "12 points, too many to list" in page


def test_an_index_of_no_reports_is_one_clear_line(tmp_path):
    with pytest.raises(AtpsimError, match="no report folders here"):
        build_index(tmp_path)
    result = CliRunner().invoke(main, ["report", "--index", str(tmp_path)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_first_sentence_keeps_abbreviations():
    assert first_sentence("2D (Wang et al. 2022) on IC1.\nThen more. ") == "2D (Wang et al. 2022) on IC1."


def test_the_committed_index_is_current(tmp_path):
    """reports/index.html is what `atpsim report --index reports` writes today."""
    committed = ROOT / "reports" / "index.html"
    if not committed.is_file():
        pytest.skip("no committed index yet")
    written = build_index(ROOT / "reports", tmp_path / "index.html")
    assert written.read_text() == committed.read_text()
