"""Table 3's layout: the prediction is the simulated (des) rows, the analytic model gets its
own table, and every cell is keyed by its whole configuration (device count, algorithm, ...),
never only by (model, topology).

Golden values (the fake of report_fakes, M2: hidden 4096, so 200 / (1 + ratio / (4 chunks))
TFLOP/s in 10^12, times 10^12 / 2^40 for the paper's unit; closed form
f(d1, d2) = (14 d2 + 4 d1 - 18) / (d1 d2)):

- des, 8 GPUs: ratio f + 0.1 is least for 4x2 (3.25 + 0.1): 200 / 1.8375 = 108.84 -> 98.99;
  chunks 2: 200 / (1 + 3.35 / 8) = 140.97 -> 128.21.
- des, 16 GPUs: 8x2, f = (28 + 32 - 18) / 16 = 2.625, + 0.1: 200 / 1.68125 = 118.96 -> 108.19;
  chunks 2: 200 / 1.340625 = 149.18 -> 135.68.
- analytic (transposed form, no 0.1), 8 GPUs: 2x4, f(4, 2) = 3.25: 200 / 1.8125 = 110.34 ->
  100.36; 16 GPUs: 2x8, f(8, 2) = 2.625: 200 / 1.65625 = 120.75 -> 109.83.
- rabenseifner (transposed form + 0.1), 8 GPUs: 2x4 at the ring's 98.99.
"""

from __future__ import annotations

import pytest
from report_fakes import algorithms_frame, modes_frame
from test_report_build import build

from atpsim.report.chunk_table import chunk_table, chunk_tables, reference_errors
from atpsim.scenario.report import Reference

REFERENCE = Reference(table3={"M2": {"ic4": {1: 100.0}}})


def test_des_rows_are_the_prediction_per_device_count():
    table = chunk_table(modes_frame(), None, "des")
    assert list(table.header) == ["model", "", "ic4, 8 GPUs", "ic4, 16 GPUs"]
    assert table.rows == [
        ["M2", "Baseline", "98.99 [4x2]", "108.19 [8x2]"],
        ["M2", "Chunk=2", "128.21 [4x2]", "135.68 [8x2]"],
    ]
    assert "simulated (des)" in table.caption


def test_analytic_rows_make_a_table_of_their_own():
    des, analytic = chunk_tables(modes_frame())
    assert des.rows[0][2].startswith("98.99")
    assert analytic.rows[0] == ["M2", "Baseline", "100.36 [2x4]", "109.83 [2x8]"]
    assert "analytic model" in analytic.caption


def test_reference_errors_are_per_mode():
    """Paper 100.0 for ic4, chunks 1: des (98.99 - 100) / 100 and (108.19 - 100) / 100."""
    des = reference_errors(modes_frame(), REFERENCE)
    assert des == pytest.approx([-0.0101, 0.0819], abs=1e-4)
    analytic = reference_errors(modes_frame(), REFERENCE, "analytic")
    assert analytic == pytest.approx([0.0036, 0.0983], abs=1e-4)


def test_each_algorithm_has_its_own_column_and_mesh():
    table = chunk_table(algorithms_frame())
    assert list(table.header) == ["model", "", "ic1, ring", "ic1, rabenseifner"]
    assert table.rows == [["M2", "Baseline", "98.99 [4x2]", "98.99 [2x4]"]]


def test_report_shows_des_table_first_then_analytic(tmp_path):
    text = (
        "name: t\nreference:\n  table3: {M2: {ic4: {1: 100.0}}}\nreport: {figures: [chunk_table]}\n"
    )
    build(tmp_path, modes_frame(), text)
    md = (tmp_path / "report.md").read_text()
    des = md.index("simulated (des): value [mesh]")
    analytic = md.index("analytic model (Eq. 2): value [mesh]")
    assert des < md.rindex("Simulated (des) against the paper's 2 Table 3 cells") < analytic
    assert "Analytic model (Eq. 2) against the paper's 2 Table 3 cells" in md
    assert "| M2 | Baseline | 98.99 [4x2] · paper 100.00 (-1.0%) |" in md


def test_selected_chunk_table_keeps_only_the_selection(tmp_path):
    text = "name: t\nreport:\n  figures: [{chunk_table: {select: {n_devices: 16}}}]\n"
    build(tmp_path, modes_frame(), text)
    md = (tmp_path / "report.md").read_text()
    assert "(as the paper's Table 3) (n_devices = 16)" in md
    assert "| M2 | Baseline | 118.96 [8x2] |" in md  # no paper cells: the page is in 10^12


def test_one_unit_per_page_the_paper_cells_converted():
    """A page in SI (``tflops_unit: si``) shows the paper's 100.0 (2^40) as 109.95 (10^12)
    beside des 108.84 (10^12): the error is the paper unit's, -1.0%."""
    table = chunk_table(modes_frame(), REFERENCE, "des", unit="si")
    assert table.rows[0][2] == "108.84 [4x2] · paper 109.95 (-1.0%)"
    assert "(SI, 10^12)" in table.caption
