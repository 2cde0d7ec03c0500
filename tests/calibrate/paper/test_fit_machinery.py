"""The fit's pieces on hand-made inputs: residuals, ranking hinges, data-file writing."""

import math

import pytest
import yaml

from atpsim.calibrate.paper.datafiles import set_line
from atpsim.calibrate.paper.fit import RANK_MARGIN, RANK_WEIGHT, Evaluation
from atpsim.calibrate.paper.record import dump_record, parse_record
from atpsim.calibrate.paper.table3 import CellPrediction, Table3Cell, bandwidth_targets
from atpsim.compute.hardware import load_profile, profile_from_dict, profile_to_dict
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh


def _prediction(topology, by_mesh, paper=10.0):
    best = max(by_mesh, key=by_mesh.get)
    return CellPrediction(
        Table3Cell("M2", topology, 1, paper), DeviceMesh(*best), by_mesh[best], by_mesh
    )


def _evaluation(cells, scale=1.0):
    targets = tuple(bandwidth_targets())
    bands = {t.name: t.target_Bps * scale for t in targets}
    return Evaluation({}, tuple(cells), bands, targets)


def test_value_residuals_are_log_errors():
    """A cell at 11 against the paper's 10 gives ln 1.1; bandwidths 5% low give ln 0.95."""
    evaluation = _evaluation([_prediction("ic4", {(8, 1): 11.0, (2, 4): 5.0})], scale=0.95)
    assert evaluation.value_residuals() == pytest.approx([math.log(1.1)] + [math.log(0.95)] * 3)
    assert evaluation.rms() == pytest.approx(math.sqrt((0.1**2 + 3 * 0.05**2) / 4))


def test_ranking_hinge_is_zero_once_the_papers_mesh_leads_by_the_margin():
    """IC1's optimum is (2, 4): a (4, 2) within the margin costs weight x (ln ratio + margin)
    (hinges in mesh order (1, 8), (4, 2), (8, 1));
    machines without a ranked optimum (ic4) add nothing."""
    leading = _evaluation(
        [_prediction("ic1", {(2, 4): 10.0, (4, 2): 9.0, (8, 1): 5.0, (1, 8): 1.0})]
    )
    assert leading.ranking_residuals() == pytest.approx([0.0, 0.0, 0.0])
    close = _evaluation(
        [_prediction("ic1", {(2, 4): 10.0, (4, 2): 10.0, (8, 1): 5.0, (1, 8): 1.0})]
    )
    assert close.ranking_residuals() == pytest.approx([0.0, RANK_WEIGHT * RANK_MARGIN, 0.0])
    assert (
        _evaluation([_prediction("ic4", {(2, 4): 1.0, (4, 2): 2.0})]).ranking_residuals().size == 0
    )


YAML = """\
ic1:
  params:
    gpus: 8
    socket_bandwidth_Bps: 64 GB/s
ic2:
  params:
    socket_bandwidth_Bps: 64 GB/s  # old comment
"""


def test_set_line_rewrites_only_the_line_inside_its_block():
    text = set_line(YAML, "ic2", "socket_bandwidth_Bps", "2.5 GB/s", "fitted; spec 64 GB/s")
    data = yaml.safe_load(text)
    assert data["ic1"]["params"]["socket_bandwidth_Bps"] == "64 GB/s"
    assert data["ic2"]["params"]["socket_bandwidth_Bps"] == "2.5 GB/s"
    assert "# fitted; spec 64 GB/s" in text and "old comment" not in text


def test_set_line_names_a_missing_key():
    with pytest.raises(AtpsimError, match="ic1.*no line 'nic_bandwidth_Bps:'"):
        set_line(YAML, "ic1", "nic_bandwidth_Bps", "1 GB/s", "x")
    with pytest.raises(AtpsimError, match="no top-level entry 'ic9'"):
        set_line(YAML, "ic9", "gpus", "1", "x")


def test_written_record_reads_back_to_the_data():
    """Mesh tuples (a cell's mesh and by_mesh keys), None, labels with spaces, empty sections
    and floats all come back as written."""
    cell = {"mesh": (2, 4), "simulated": 1.5, "paper": None, "by_mesh": {(2, 4): 1.5, (8, 1): 0.25}}
    data = {
        "b_element_bytes": 4,
        "parameters": {"x y": 1.5e-05, "z": 13821800000.0},
        "fit_cells": {"M2 ic1 chunk=1": cell},
        "bandwidths_Bps": {"B1 of (2,4)": {"simulated": 6e8, "target": None}},
        "check_cells": {},
    }
    assert parse_record(dump_record(data)) == data


def test_collective_overhead_is_an_optional_profile_field():
    profile = load_profile("a100-sxm4-80gb")
    assert profile.collective_overhead_s == 0.0
    data = profile_to_dict(profile)
    assert profile_from_dict({**data, "collective_overhead_s": 1e-4}).collective_overhead_s == 1e-4
    with pytest.raises(AtpsimError, match="collective_overhead_s"):
        profile_from_dict({**data, "collective_overhead_s": -1})
