"""Sweep expansion: the cartesian product in axis order, meshes per device count, ATP-OPT
groups, calibration on analytic points, and the description `atpsim run` prints."""

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from atpsim.errors import ScenarioError
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import describe_sweep, expand_sweep, resolve_meshes
from atpsim.training.layouts import tp_meshes

GOOD = Path(__file__).parent / "data" / "good"


def _expand(**fields):
    return expand_sweep(Scenario.model_validate({"topology": "ic3", "model": "M2", **fields}))


def _meshes(points):
    return [(p.mesh.d1, p.mesh.d2) for p in points]


def test_minimal_is_every_factorization_of_the_topology():
    points = expand_sweep(load_scenario(GOOD / "minimal.yaml"))
    assert _meshes(points) == [(8, 1), (4, 2), (2, 4), (1, 8)]
    point = points[0]
    assert (point.scenario, point.topology, point.topology_label) == (
        "minimal",
        {"preset": "ic3"},
        "ic3",
    )
    paper_stack = "a100-sxm4-80gb-paper-stack"  # ic3's calibrated profile (presets.yaml)
    assert (point.n_devices, point.hardware, point.model.name) == (8, paper_stack, "M2")
    assert (point.chunks, point.algorithm, point.mode) == (1, "auto", "des")
    assert point.calibration is None and point.group is None


def test_points_follow_the_axis_order():
    points = _expand(
        topology=["ic3", "dgx-a100"],
        model=["M1", "M2"],
        parallelism={"meshes": ["atp-1", "atp-2"]},
        chunks=[1, 2],
        mode=["des", "analytic"],
    )
    got = [(p.topology_label, p.model.name, p.mesh.d2, p.chunks, p.mode) for p in points]
    assert got == list(
        itertools.product(["ic3", "dgx-a100"], ["M1", "M2"], [1, 2], [1, 2], ["des", "analytic"])
    )


def test_full_example_is_the_product_of_its_axes():
    points = expand_sweep(load_scenario(GOOD / "full.yaml"))
    # 4 topologies x 2 hardware x 3 models x 4 meshes x 2 placements x 3 chunks x 2 x 2
    assert len(points) == 4 * 2 * 3 * 4 * 2 * 3 * 2 * 2
    assert len({p.key() for p in points}) == len(points)
    assert {p.mesh.placement for p in points} == {"row-major", "column-major"}


def test_atp_opt_groups_every_factorization_once():
    points = expand_sweep(load_scenario(GOOD / "atp_opt_sweep.yaml"))
    sixteen = [p for p in points if p.topology_label == "ic5" and p.n_devices == 16]
    assert _meshes(sixteen) == [(16, 1), (8, 2), (4, 4), (2, 8), (1, 16)]
    assert {p.group for p in points} == {"atp-opt"}
    assert len({p.group_key() for p in sixteen}) == 1
    assert len({p.group_key() for p in points}) == 4  # 2 topologies x 2 device counts
    assert len(points) == 2 * (5 + 7)


def test_atp_i_meshes_follow_the_device_count():
    points = _expand(
        topology="ic5", parallelism={"devices": [16, 64], "meshes": ["atp-1", "atp-4"]}
    )
    assert [(p.n_devices, p.mesh.d1, p.mesh.d2) for p in points] == [
        (16, 16, 1),
        (16, 4, 4),
        (64, 64, 1),
        (64, 16, 4),
    ]


def test_all_leaves_out_meshes_that_do_not_divide_the_hidden_size():
    points = _expand(
        topology="ic5",
        model={"hidden": 24, "heads": 1},
        parallelism={"devices": 16, "meshes": "all"},
    )
    assert _meshes(points) == [(8, 2), (4, 4), (2, 8)]


def test_points_outside_a_group_keep_their_key_form():
    point = _expand()[0]
    assert "group" not in point.as_dict() and point.group_key() is None


def test_calibration_goes_to_analytic_points_of_its_mesh_and_topology():
    points = expand_sweep(load_scenario(GOOD / "full.yaml"))
    by_case = {(p.topology_label, p.mesh.d1, p.mesh.d2, p.mode): p.calibration for p in points}
    assert by_case[("ic3", 2, 4, "analytic")] == {"B1_Bps": 1.2e9, "B2_Bps": 4.95e9}
    assert by_case[("slow-torus", 2, 4, "analytic")] == {"B1_Bps": 1.2e9, "B2_Bps": 4.95e9}
    assert by_case[("ic3", 8, 1, "analytic")] == {"B1_Bps": 0.97e9}
    assert by_case[("ic5:8", 8, 1, "analytic")] is None
    assert by_case[("ic3", 2, 4, "des")] is None


def test_same_topology_twice_gives_each_point_once():
    assert _expand(topology=["ic3", "ic3"]) == _expand(topology="ic3")


def test_expansion_is_deterministic():
    scenario = load_scenario(GOOD / "atp_opt_sweep.yaml")
    assert [p.key() for p in expand_sweep(scenario)] == [p.key() for p in expand_sweep(scenario)]


def test_default_devices_and_hardware_come_from_the_topology():
    points = _expand(topology=["ic5", "torus:2x2"], parallelism={"meshes": ["atp-1"]})
    assert [(p.topology_label, p.n_devices, p.hardware) for p in points] == [
        ("ic5", 256, "h100-sxm"),
        ("torus:2x2", 4, "a100-sxm4-80gb"),
    ]


def test_custom_topology_file_points():
    points = expand_sweep(load_scenario(GOOD / "custom_topology.yaml"))
    assert [(p.topology_label, p.n_devices, p.mesh) for p in points] == [
        ("ring4", 4, DeviceMesh(2, 2))
    ]


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=96))
def test_all_is_every_factorization_that_divides_hidden(devices):
    """h = 6144 = 2^11 * 3: device counts with a factor 5 or 7 have no valid mesh."""
    valid = [m for m in factorizations(devices) if 6144 % m.d1 == 0 and 6144 % m.d2 == 0]
    try:
        points = _expand(
            topology="ic5", model={"hidden": 6144, "heads": 48}, parallelism={"devices": devices}
        )
    except ScenarioError as error:
        assert not valid and error.key == "parallelism.meshes"
        return
    assert _meshes(points) == [(m.d1, m.d2) for m in valid]
    assert all(p.mesh.size == devices for p in points)


def test_a_step_scenarios_meshes_are_the_shared_enumerators():
    """ATP-OPT over 8 GPUs with [2, 4] and ATP-8 listed: the listed meshes first, then every
    factorization not yet listed, as :func:`tp_meshes` gives them (one enumerator)."""
    scenario = Scenario.model_validate({"topology": "ic3", "model": "M2",
                                        "parallelism": {"meshes": [[2, 4], "atp-opt", "atp-8"]}})
    model = scenario.models[0].config()
    expected = tp_meshes(8, sizes=(8,), listed=[DeviceMesh(2, 4), DeviceMesh(1, 8)], split_hidden=model.hidden)
    assert resolve_meshes(scenario, 8, model) == [(mesh, "atp-opt") for mesh in expected]
    assert [(m.d1, m.d2) for m in expected] == [(2, 4), (1, 8), (8, 1), (4, 2)]


def test_describe_sweep_lists_axes_and_point_count():
    text = describe_sweep(load_scenario(GOOD / "atp_opt_sweep.yaml"))
    assert text.splitlines() == [
        "scenario fig12-mini: 24 points",
        "  topology   ic5, ic6",
        "  hardware   topology default",
        "  model      M4",
        "  devices    16, 64",
        "  meshes     atp-1, atp-2, atp-4, atp-opt (ATP-OPT: best of every factorization)",
        "  placement  row-major",
        "  chunks     1",
        "  algorithm  auto",
        "  mode       des",
    ]


def test_cases_are_a_union_of_products():
    scenario = load_scenario(GOOD / "cases.yaml")
    points = expand_sweep(scenario)
    got = [(p.topology_label, p.model.name, p.n_devices, p.mesh.d2) for p in points]
    assert got == [
        *itertools.product(["ic3"], ["M1", "M2"], [8], [1, 2, 4]),
        *itertools.product(["dgx-a100"], ["M1", "M2"], [8], [1, 2, 4]),
        *itertools.product(["ic5:16"], ["M1", "M2"], [16], [1, 2, 4, 8]),
    ]
    assert describe_sweep(scenario, points).splitlines()[:3] == [
        "scenario fig11-mini: 20 points",
        "  cases[0]: 12 points",
        "    topology   ic3, dgx-a100",
    ]
