"""The scenario's ``report:`` and ``reference:`` sections: typed when the scenario is loaded,
figure entries resolved against the report's defaults, and every bad value one error naming
the file and the key path."""

from __future__ import annotations

import pytest
import yaml

from atpsim.errors import ScenarioError
from atpsim.scenario.loader import load_report_sections, load_scenario
from atpsim.scenario.report import FigureSpec, Reference, ReportOptions


def report_options(raw):
    """The ``report:`` section *raw*, read from a saved scenario named s.yaml."""
    return load_report_sections(yaml.safe_dump({"report": raw}), "s.yaml").report


def reference(raw):
    return load_report_sections(yaml.safe_dump({"reference": raw}), "s.yaml").reference


def test_figure_entries_take_their_own_options_over_the_reports():
    raw = {
        "log_y": True,
        "rows": ["model"],
        "figures": [
            "atp_bars",
            {"comm_scaling": {"select": {"chunks": 1, "model": ["M4", "h16384"]}, "log_y": False}},
            {"comm_scaling": {"columns": "algorithm"}},
        ],
    }
    bars, first, second = report_options(raw).figure_specs()
    assert bars == FigureSpec("atp_bars", log_y=True, rows=("model",))
    assert first == FigureSpec(
        "comm_scaling",
        log_y=False,
        rows=("model",),
        select=(("chunks", ("1",)), ("model", ("M4", "h16384"))),
    )
    assert second == FigureSpec("comm_scaling", log_y=True, columns=("algorithm",), rows=("model",))


def test_an_absent_section_takes_every_default():
    options = report_options(None)
    assert options == ReportOptions()
    assert options.figure_specs() is None
    assert (options.tflops_unit, options.atp, options.notes) == ("si", (1, 2, 4), "")


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("log", "report: expected a mapping, got 'log'"),
        ({"log_y": "yes"}, "report.log_y: expected true or false, got 'yes'"),
        ({"rows": ["modle"]}, "report.rows[0]: unknown results column 'modle' (did you mean"),
        ({"columns": 3}, "report.columns: expected a list of results columns, got 3"),
        (
            {"figures": [{"comm_scaling": {"logy": True}}]},
            "report.figures[0].comm_scaling.logy: unknown key 'logy' (did you mean 'log_y'?)",
        ),
        (
            {"figures": [{"comm_scaling": {"log_y": 1}}]},
            "report.figures[0].comm_scaling.log_y: expected true or false, got 1",
        ),
        (
            {"figures": [{"chunk_table": {"log_y": True}}]},
            "report.figures[0].chunk_table.log_y: unknown key 'log_y'",
        ),
        (
            {"figures": ["atp_bars", {"comm_scaling": {"select": {"chunk": 1}}}]},
            "report.figures[1].comm_scaling.select.chunk: unknown results column 'chunk'",
        ),
        (
            {"figures": [{"comm_scaling": {"select": {"chunks": {"a": 1}}}}]},
            "report.figures[0].comm_scaling.select.chunks: expected a value or a list",
        ),
        ({"figures": [{"a": 1, "b": 2}]}, "report.figures[0]: expected a figure kind or {kind"),
        ({"figures": [{"pie": {}}]}, "report.figures[0]: unknown figure 'pie'"),
        ({"figures": "atp_bars"}, "report.figures: expected a list of figure kinds"),
    ],
)
def test_bad_figure_options_name_the_key(raw, text):
    with pytest.raises(ScenarioError) as info:
        report_options(raw)
    assert str(info.value).startswith("s.yaml: " + text)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ({"figure": ["atp_bars"]}, "report.figure: unknown key 'figure' (did you mean 'figures'?)"),
        ({"figures": ["table"]}, "report.figures[0]: unknown figure 'table'; expected one of"),
        ({"tflops_unit": "tera"}, "report.tflops_unit: expected 'si' or 'paper'"),
        ({"atp": [1, 0]}, "report.atp: expected a list of positive integers"),
        ({"notes": 3}, "report.notes: expected a string, got 3"),
    ],
)
def test_bad_report_options_name_the_key(raw, text):
    with pytest.raises(ScenarioError) as info:
        report_options(raw)
    assert str(info.value).startswith("s.yaml: " + text)


def test_reference_cells_are_typed():
    table = reference({"table3": {"M2": {"ic1": {1: 3.45, 2: "3.46"}, "IC3": {1: 97.45}}}})
    assert table == Reference(table3={"M2": {"ic1": {1: 3.45, 2: 3.46}, "IC3": {1: 97.45}}})
    assert table.cells() == {
        ("M2", "ic1", 1): 3.45,
        ("M2", "ic1", 2): 3.46,
        ("M2", "ic3", 1): 97.45,
    }
    assert reference(None) is None and reference({}).cells() == {}


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ({"table3": {"M2": [3.45]}}, "reference.table3.M2: expected a mapping, got [3.45]"),
        (
            {"table3": {"M2": {"ic1": {"two": 3.4}}}},
            "reference.table3.M2.ic1.two: expected a chunk",
        ),
        ({"table3": {"M2": {"ic1": {1: "fast"}}}}, "reference.table3.M2.ic1.1: expected a number"),
        ({"table_3": {}}, "reference.table_3: unknown key 'table_3' (did you mean 'table3'?)"),
    ],
)
def test_bad_reference_cells_name_the_key(raw, text):
    with pytest.raises(ScenarioError) as info:
        reference(raw)
    assert str(info.value).startswith("s.yaml: " + text)


def test_a_loaded_scenario_carries_the_typed_sections(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "topology: ic3\nmodel: M2\nreport: {figures: [chunk_table], tflops_unit: paper}\n"
        "reference: {table3: {M2: {ic3: {1: 97.45}}}}\n"
    )
    scenario = load_scenario(path, expand=False)
    assert scenario.report.figure_specs() == (FigureSpec("chunk_table"),)
    assert scenario.report.tflops_unit == "paper"
    assert scenario.reference.cells() == {("M2", "ic3", 1): 97.45}


def test_a_bad_report_section_fails_when_the_scenario_loads(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("topology: ic3\nmodel: M2\nreport: {figures: [atp_bar]}\n")
    with pytest.raises(ScenarioError, match=r"s.yaml: report.figures\[0\]: unknown figure"):
        load_scenario(path, expand=False)


def test_a_report_reads_only_its_sections_of_a_saved_scenario():
    """A run folder's scenario.yaml may name files relative to where it ran: not read again."""
    text = "name: n\ndescription: d\ntopology: {file: gone.yaml}\nmodel: M9\n"
    sections = load_report_sections(text, "s.yaml")
    assert (sections.name, sections.description, sections.reference) == ("n", "d", None)
    assert sections.report == ReportOptions()
