"""The ``report:`` options (log y axis, facet rows and columns, per-figure selections) and
the panels they give."""

from __future__ import annotations

from report_fakes import fig12_frame, modes_frame, placements_frame
from test_report_build import build

from atpsim.report.data import panel_labels
from atpsim.report.figures import SCALING_FACETS, atp_bars, comm_scaling
from atpsim.report.panels import _legend_columns
from atpsim.scenario.report import FigureSpec


def visible_axes(figure):
    return [ax for ax in figure.axes if ax.get_visible()]


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


def test_every_tflops_unit_of_the_schema_has_a_column():
    from atpsim.report.data import TFLOPS_COLUMNS
    from atpsim.scenario.report import TFLOPS_UNITS

    assert tuple(TFLOPS_COLUMNS) == TFLOPS_UNITS
