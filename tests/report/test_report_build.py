"""Reports: files written, deterministic bytes, rebuilt from the folder alone, the paper's
layouts (Figure 11 bars, Figure 12 lines with ATP-OPT, Table 3 with reference errors)."""

from __future__ import annotations

import base64
import re

from report_fakes import fig11_frame, fig12_frame, table3_frame

from atpsim.analytic.model import closed_form_units
from atpsim.report.build import build_report, rebuild_report
from atpsim.report.chunk_table import chunk_table, reference_cells, reference_errors
from atpsim.report.data import best_per_group
from atpsim.report.sections import auto_figures
from atpsim.results.io import read_results, write_results
from atpsim.scenario.report import Reference

TABLE3_YAML = """name: t3
description: Table 3 in miniature.
reference:
  table3:
    M2: {ic1: {1: 3.45, 2: 3.46, 4: 3.51}, IC3: {1: 97.45}}
report:
  figures: [chunk_table]
"""


def build(tmp_path, frame, text="name: t\n"):
    """Save *frame* and report on the saved table (as ``atpsim run`` does)."""
    write_results(tmp_path, frame, parquet=False)
    (tmp_path / "scenario.yaml").write_text(text)
    return build_report(tmp_path, read_results(tmp_path), text)


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_closed_form_matches_hand_values():
    """ATP-1 at N = 16: (14 + 64 - 18) / 16 = 3.75; DeviceMesh(4, 4): (56 + 16 - 18) / 16."""
    assert closed_form_units(16, 1) == 3.75
    assert closed_form_units(4, 4) == 54 / 16


def test_fig12_report_has_scaling_figure_in_png_svg_md_and_html(tmp_path):
    files = build(tmp_path, fig12_frame())
    names = sorted(str(p.relative_to(tmp_path)) for p in files)
    assert names == [
        "figures/comm_scaling.png",
        "figures/comm_scaling.svg",
        "provenance.json",
        "report.html",
        "report.md",
    ]
    md = (tmp_path / "report.md").read_text()
    assert "![" in md and "(figures/comm_scaling.png)" in md and "(figures/comm_scaling.svg)" in md
    html = (tmp_path / "report.html").read_text()
    assert re.findall(r'src="([^"]*)"', html) and all(
        s.startswith("data:image/svg+xml;base64,") for s in re.findall(r'src="([^"]*)"', html)
    )
    embedded = base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1))
    assert embedded == (tmp_path / "figures/comm_scaling.svg").read_bytes()


def test_figures_carry_no_dates_or_versions(tmp_path):
    build(tmp_path, fig12_frame())
    svg = (tmp_path / "figures/comm_scaling.svg").read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    assert b"Software" not in (tmp_path / "figures/comm_scaling.png").read_bytes()


def test_report_is_deterministic_and_rebuilt_from_the_folder_alone(tmp_path):
    build(tmp_path / "a", fig12_frame())
    first = snapshot(tmp_path / "a")
    (tmp_path / "a" / "report.md").unlink()
    rebuild_report(tmp_path / "a")
    assert snapshot(tmp_path / "a") == first
    build(tmp_path / "b", fig12_frame())
    assert snapshot(tmp_path / "b") == first


def test_atp_opt_is_the_best_mesh_of_each_group():
    """At N = 256 the closed form 14 d2 + 4 d1 is least for DeviceMesh(32, 8): 112 + 128 = 240
    (16x16: 288; 64x4: 312)."""
    frame = fig12_frame()
    best = best_per_group(frame, "comm_over_delta", maximize=False)
    assert len(best) == 6
    for row in best.itertuples():
        group = frame[frame["group_key"] == row.group_key]
        assert row.comm_over_delta == group["comm_over_delta"].min()
    assert best[best["n_devices"] == 256]["mesh"].tolist() == ["32x8", "32x8"]


def test_auto_figures_follow_the_table():
    assert auto_figures(fig12_frame(), None) == ("comm_scaling",)
    assert auto_figures(fig11_frame(), None) == ("atp_bars",)
    assert "chunk_table" in auto_figures(table3_frame(), None)


def test_fig11_bars(tmp_path):
    build(tmp_path, fig11_frame())
    assert (tmp_path / "figures/atp_bars.png").stat().st_size > 10_000
    assert "as the paper's Figure 11" in (tmp_path / "report.md").read_text()


def test_table3_layout_with_paper_values_and_errors(tmp_path):
    reference = Reference(table3={"M2": {"ic1": {1: 3.45, 2: 3.46, 4: 3.51}, "IC3": {1: 97.45}}})
    assert reference_cells(reference)[("M2", "ic3", 1)] == 97.45
    table = chunk_table(table3_frame(), reference)
    assert list(table.header) == ["model", "", "ic1", "ic3"]
    assert [r[:2] for r in table.rows] == [
        ["M2", "Baseline"],
        ["M2", "Chunk=2"],
        ["M2", "Chunk=4"],
        ["M4", "Baseline"],
        ["M4", "Chunk=2"],
        ["M4", "Chunk=4"],
    ]
    assert table.rows[0][2].startswith("98.99 [4x2] · paper 3.45 (+")
    assert table.rows[1][2].startswith("128.21 [4x2]")
    assert table.rows[3][2] == table.rows[3][2].split(" · ")[0]
    assert len(reference_errors(table3_frame(), reference)) == 4


def test_table3_report_only_draws_what_it_is_asked(tmp_path):
    files = build(tmp_path, table3_frame(), TABLE3_YAML)
    assert not any(p.suffix == ".png" for p in files)
    md = (tmp_path / "report.md").read_text()
    assert "Table 3 in miniature." in md and "Simulated (des) against the paper's 4 Table 3 cells" in md
    assert "reference:\n  table3:" in md


def test_a_report_of_failed_points_lists_the_errors(tmp_path):
    frame = fig12_frame()
    frame["status"], frame["error"] = "failed", "not implemented yet"
    frame["comm_over_delta"] = float("nan")
    build(tmp_path, frame, "name: t\nreport: {figures: [comm_scaling]}\n")
    md = (tmp_path / "report.md").read_text()
    assert "No successful points to plot." in md
    assert "| 42 | ic5 M4 mesh 16x1 chunks 1 | not implemented yet |" in md


def test_notes_and_title_come_from_the_scenario(tmp_path):
    text = "name: t\nreport:\n  title: Scaling\n  notes: |\n    First.\n\n    Second.\n"
    build(tmp_path, fig12_frame(), text)
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Scaling\n") and "## What the results show\n\nFirst.\n\nSecond." in md
