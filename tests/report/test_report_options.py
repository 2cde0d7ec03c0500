"""The ``report:`` options (log y axis, facet rows and columns, per-figure selections) and
the panels they give."""

from __future__ import annotations

import pytest
from report_fakes import fig12_frame, modes_frame, placements_frame
from test_report_build import build

from atpsim.errors import ScenarioError
from atpsim.report.data import panel_labels
from atpsim.report.figures import SCALING_FACETS, atp_bars, comm_scaling
from atpsim.report.options import FigureSpec, ReportOptions
from atpsim.report.panels import _legend_columns


def visible_axes(figure):
    return [ax for ax in figure.axes if ax.get_visible()]


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
    bars, first, second = ReportOptions.from_mapping(raw, "s.yaml").figures
    assert bars == FigureSpec("atp_bars", log_y=True, rows=("model",))
    assert first == FigureSpec(
        "comm_scaling",
        log_y=False,
        rows=("model",),
        select=(("chunks", ("1",)), ("model", ("M4", "h16384"))),
    )
    assert second == FigureSpec("comm_scaling", log_y=True, columns=("algorithm",), rows=("model",))


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("log", "report: expected a mapping, got 'log'"),
        ({"log_y": "yes"}, "report.log_y: expected true or false, got 'yes'"),
        ({"rows": ["modle"]}, "report.rows[0]: unknown results column 'modle' (did you mean"),
        ({"columns": 3}, "report.columns: expected a list of results columns, got 3"),
        (
            {"figures": [{"comm_scaling": {"logy": True}}]},
            "report.figures[0].comm_scaling: unknown key 'logy' (did you mean 'log_y'?)",
        ),
        (
            {"figures": [{"comm_scaling": {"log_y": 1}}]},
            "report.figures[0].comm_scaling.log_y: expected true or false, got 1",
        ),
        (
            {"figures": [{"chunk_table": {"log_y": True}}]},
            "report.figures[0].chunk_table: unknown key 'log_y'",
        ),
        (
            {"figures": ["atp_bars", {"comm_scaling": {"select": {"chunk": 1}}}]},
            "report.figures[1].comm_scaling.select: unknown results column 'chunk'",
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
        ReportOptions.from_mapping(raw, "s.yaml")
    assert str(info.value).startswith("s.yaml: " + text)


def test_placement_is_a_facet_of_its_own():
    """Default layout: topologies as columns; as rows every combination of algorithm and
    placement (mode is drawn inside the panel, solid against dashed)."""
    frame = placements_frame()
    across, down = panel_labels(frame, SCALING_FACETS)
    assert sorted(set(across)) == ["ic5", "ic6"]
    assert set(down) == {
        f"{algorithm}, {placement}"
        for algorithm in ("ring", "rabenseifner")
        for placement in ("row-major", "column-major")
    }


def test_rows_and_columns_are_chosen_and_the_rest_still_splits_panels():
    frame = placements_frame()
    across, down = panel_labels(frame, SCALING_FACETS, columns=["algorithm"], rows=["topology"])
    assert set(across) == {"ring", "rabenseifner"}
    assert set(down) == {f"{t}, {p}" for t in ("ic5", "ic6") for p in ("row-major", "column-major")}


def test_a_selection_with_log_y_gives_fewer_panels():
    spec = FigureSpec(
        "comm_scaling",
        log_y=True,
        columns=("algorithm", "placement"),
        rows=("topology",),
        select=(("placement", ("row-major",)), ("algorithm", ("RING", "rabenseifner"))),
    )
    axes = visible_axes(comm_scaling(placements_frame(), spec=spec))
    assert len(axes) == 4
    assert {ax.get_yscale() for ax in axes} == {"log"}
    assert {ax.get_title() for ax in axes} == {
        f"{a}, row-major\n{t}" for a in ("ring", "rabenseifner") for t in ("ic5", "ic6")
    }
    assert (
        comm_scaling(placements_frame(), spec=FigureSpec("x", select=(("model", ("M1",)),))) is None
    )


def test_bars_draw_analytic_as_ticks_not_as_panels():
    """modes_frame: ic4 at 8 and 16 GPUs, chunks 1 and 2, des and analytic: 4 panels (the
    device count and chunks vary), legend with the bar/tick entries."""
    figure = atp_bars(modes_frame())
    assert len(visible_axes(figure)) == 4
    texts = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "bars: simulated (des)" in texts and "ticks: analytic model" in texts


def test_several_figures_of_one_kind_get_their_own_files(tmp_path):
    text = (
        "name: t\nreport:\n  figures:\n    - comm_scaling: {select: {topology: ic5}, log_y: true}\n"
        "    - comm_scaling: {select: {topology: ic6}}\n"
    )
    files = build(tmp_path, fig12_frame(), text)
    assert sorted(p.name for p in files if p.suffix == ".png") == [
        "comm_scaling-2.png",
        "comm_scaling.png",
    ]
    md = (tmp_path / "report.md").read_text()
    assert "## Communication against scale (as the paper's Figure 12) (topology = ic5)" in md
    assert md.count("Logarithmic y axis.") == 2  # figure caption, in Markdown and image alt


def test_legend_wraps_to_the_columns_that_fit():
    """Entries 0.55 + 0.065 in per character: 'ATP-1' 0.875, 'bars: simulated (des)' 1.915.
    Six entries in 5.2 in: 4 columns of sizes (2, 2, 1, 1) need 0.875 * 2 + 1.915 * 2 = 5.58;
    3 columns (2, 2, 2) need 0.875 * 2 + 1.915 = 3.665."""
    labels = ["ATP-1", "ATP-2", "ATP-4", "ATP-8", "bars: simulated (des)", "ticks: analytic model"]
    assert _legend_columns(labels, 5.2) == 3
    assert _legend_columns(labels, 7.4) == 6
