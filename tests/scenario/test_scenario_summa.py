"""``parallelism.scheme``: SUMMA grids expand from square meshes (depth = devices / q²),
bad grids fail with the key path, ATP points keep their keys, and a SUMMA point runs in des
mode and fails clearly in analytic mode."""

from dataclasses import replace

import pytest

from atpsim.api import simulate_point
from atpsim.errors import ScenarioError, SimulationError
from atpsim.parallel.grid import Grid
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep

HEAD = "name: s\ntopology: ic4\nmodel: M1\n"


def _load(tmp_path, parallelism: str):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + f"parallelism: {parallelism}\n")
    return expand_sweep(load_scenario(path, expand=False))


def test_summa_grids_expand_with_depth(tmp_path):
    summa = _load(tmp_path, "{devices: 8, meshes: [[2, 2]], scheme: summa}")
    assert [(p.tp, p.scheme, p.mesh_label) for p in summa] == [(Grid(2, 2), "summa", "2x2x2")]
    assert summa[0].as_dict()["scheme"] == "summa" and summa[0].as_dict()["depth"] == 2
    assert summa[0].as_dict()["mesh"] == [2, 2, "row-major"]
    atp = _load(tmp_path, "{devices: 8, meshes: [atp-2], scheme: [atp]}")
    assert "scheme" not in atp[0].as_dict() and "depth" not in atp[0].as_dict()


def test_all_takes_every_square_grid_the_batch_splits_over(tmp_path):
    """16 GPUs: 2 x 2 x 4 would split M1's batch of 4 over q·depth = 8 rows; only 4 x 4 fits."""
    points = _load(tmp_path, "{devices: 16, scheme: summa}")
    assert [p.tp for p in points] == [Grid(4, 1)]


@pytest.mark.parametrize(
    "parallelism, key, fragment",
    [
        ("{devices: 8, meshes: [[4, 2]], scheme: summa}", "parallelism.meshes[0]", "d1 == d2"),
        ("{devices: 8, meshes: [[4, 4]], scheme: summa}", "parallelism.meshes[0]", "q·q·depth"),
        ("{devices: 8, meshes: [atp-2], scheme: summa}", "parallelism.meshes[0]", "square grid"),
        ("{devices: 8, scheme: sumа}", "parallelism.scheme", "unknown scheme"),
    ],
)
def test_bad_summa_grids_name_the_key(tmp_path, parallelism, key, fragment):
    with pytest.raises(ScenarioError) as raised:
        _load(tmp_path, parallelism)
    assert raised.value.key == key
    assert fragment in raised.value.message


def test_summa_point_runs_des_and_refuses_analytic(tmp_path):
    point = _load(tmp_path, "{devices: 8, meshes: [[2, 2]], scheme: summa}")[0]
    row = simulate_point(point)
    assert row["step_time_s"] > row["compute_time_s"] > 0
    with pytest.raises(SimulationError, match="analytic mode is defined for scheme 'atp' only"):
        simulate_point(replace(point, mode="analytic"))


def test_point_keys_are_those_of_the_committed_fig10_results():
    """The point's parallelism is one tagged field (DeviceMesh | Grid); its key is still the
    JSON it was when the point carried mesh + scheme + depth, with the algorithm default
    ``auto`` (reports/fig10/results.csv holds these keys)."""
    from atpsim.compute.models import model_preset
    from atpsim.parallel.mesh import DeviceMesh
    from atpsim.scenario.point import SweepPoint

    def point(tp, model, group=None):
        return SweepPoint("fig10", {"preset": "ic1"}, "ic1", 8, "a100-sxm4-80gb-paper-stack",
                          model_preset(model), tp, group=group)  # fmt: skip

    assert point(Grid(2, 2), "M1").key() == "667760579ee8854e"
    assert point(Grid(2, 2), "M2").key() == "77a4523c1d1f4529"
    atp = point(DeviceMesh(8, 1), "M1", group="atp-opt")
    assert (atp.key(), atp.group_key()) == ("9ae7f20eb26d2b0a", "54fe16e2ab164629")
    assert point(Grid(2, 2), "M1").mesh_label == "2x2x2" and atp.mesh_label == "8x1"
    with pytest.raises(SimulationError, match="not an ATP DeviceMesh"):
        _ = point(Grid(2, 2), "M1").mesh
