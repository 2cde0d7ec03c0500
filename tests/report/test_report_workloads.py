"""One report entry per workload (:mod:`atpsim.report.workloads`): the results schema's
workloads, each told by its table's columns, and the page and the large table's summary
asking the entry instead of which workload it is."""

from __future__ import annotations

from pathlib import Path

from report_fakes import fig11_frame
from test_job_report import ROWS

from atpsim.report import build, large
from atpsim.report.workloads import JOB, STEP, WORKLOADS, workload
from atpsim.results.io import to_frame
from atpsim.results.schema import JOB_SCHEMA, SCHEMAS, STEP_SCHEMA
from atpsim.scenario.report import Reference, ReportOptions

PAPER = Reference(table3={"M2": {"ic4": {1: 100.0}}})


def test_one_entry_per_workload_of_the_results_schema():
    assert tuple(WORKLOADS) == tuple(SCHEMAS) and all(w.name == n for n, w in WORKLOADS.items())


def test_a_table_finds_its_entry_by_its_columns():
    assert workload(fig11_frame()) is STEP
    assert workload(to_frame(ROWS, JOB_SCHEMA)) is JOB
    assert workload(list(JOB_SCHEMA.names)) is JOB


def test_the_unit_rule_of_each_workload():
    """A step page follows the scenario, then the paper's cells; a job page is SI always."""
    assert STEP.unit(ReportOptions(), None) == "si"
    assert STEP.unit(ReportOptions(), PAPER) == "paper"
    assert STEP.unit(ReportOptions(tflops_unit="si"), PAPER) == "si"
    assert JOB.unit(ReportOptions(tflops_unit="paper"), PAPER) == "si"


def test_a_large_table_is_summarized_by_its_entry():
    assert large.layout_of(list(JOB_SCHEMA.names)).time == JOB.time == "iteration_time_s"
    assert large.layout_of(list(STEP_SCHEMA.names)).workload == STEP.front_by == ("model",)


def test_the_page_never_asks_which_workload_it_shows():
    for module in (build, large):
        text = Path(module.__file__).read_text(encoding="utf-8")
        assert "job_tables" not in text and "is_job" not in text, module.__name__
        assert "iteration_time_s" not in text or module is large, module.__name__  # a header
