"""Table 3 and IC1's calibration as data: the paper's numbers, the held-out rows, the targets."""

import pytest

from atpsim.calibrate.paper.table3 import (
    bandwidth_targets,
    candidate_meshes,
    check_cells,
    fit_cells,
    held_out_cells,
    table3_cells,
    tflops_paper_unit,
)
from atpsim.compute.models import model_preset
from atpsim.parallel.mesh import DeviceMesh

GB = 1e9


def test_fit_set_is_the_baseline_row_of_m2_and_m3():
    cells = {(c.model, c.topology): c.paper for c in fit_cells()}
    assert cells == {
        ("M2", "ic1"): 3.45, ("M2", "ic2"): 42.82, ("M2", "ic3"): 97.45, ("M2", "ic4"): 15.31,
        ("M3", "ic1"): 6.68, ("M3", "ic2"): 73.61, ("M3", "ic3"): 151.98, ("M3", "ic4"): 22.47,
    }  # fmt: skip
    assert {c.chunks for c in fit_cells()} == {1}


def test_check_set_is_chunk_2_and_4():
    cells = {(c.model, c.topology, c.chunks): c.paper for c in check_cells()}
    assert len(cells) == 16
    assert cells["M2", "ic3", 2] == 100.38 and cells["M3", "ic4", 4] == 26.18
    assert len(table3_cells()) == 24


def test_m4_is_held_out_without_paper_values():
    held = held_out_cells()
    assert {c.model for c in held} == {"M4"} and len(held) == 12
    assert all(c.paper is None for c in held)
    assert all(c.model != "M4" for c in table3_cells())


def test_ic1_targets_read_the_paper_with_4_bytes_per_element():
    """Section 5.3's B1 = 1.20, B2 = 4.95 GB/s on (2, 4) and B1 = 0.97 GB/s on (8, 1), halved
    into fp16 bytes/s; the 2-byte reading keeps them as printed."""
    targets = {t.name: (t.mesh, t.dim, t.target_Bps) for t in bandwidth_targets()}
    assert targets == {
        "B1 of (2,4)": (DeviceMesh(2, 4), 1, pytest.approx(0.600 * GB)),
        "B2 of (2,4)": (DeviceMesh(2, 4), 2, pytest.approx(2.475 * GB)),
        "B1 of (8,1)": (DeviceMesh(8, 1), 1, pytest.approx(0.485 * GB)),
    }
    assert [t.target_Bps for t in bandwidth_targets(2)] == [
        t.paper_Bps for t in bandwidth_targets(2)
    ]


def test_candidate_meshes_are_the_factorizations_of_8():
    assert [(m.d1, m.d2) for m in candidate_meshes()] == [(8, 1), (4, 2), (2, 4), (1, 8)]


def test_paper_unit_matches_table_2():
    """M2's layer is 9.75 x 2^40 FLOP (Table 2): 9.75 / 8 GPUs / 1 s = 1.21875 per GPU."""
    assert tflops_paper_unit(model_preset("M2"), 1.0) == pytest.approx(9.75 / 8)
