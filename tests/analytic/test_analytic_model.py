"""Eq. 2-4, the IC5/IC6 closed form and ATP's mesh choice (paper Sections 3.3-3.5, 5.3-5.4)."""

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atpsim.analytic.hcm import derive_hcm
from atpsim.analytic.model import (
    PAPER_IC1_CALIBRATION,
    algo_bandwidth,
    closed_form_t_comm_s,
    closed_form_units,
    delta_s,
    estimate_mesh,
    mesh_bandwidths,
    normalize_calibration,
    plan_analytic,
    t_comm_s,
)
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.topology.presets import preset_info
from atpsim.topology.spec import load_topology

GB = 1e9
M2 = model_preset("M2")


# -- Eq. 4 and Eq. 2 --------------------------------------------------------------------------
def test_eq4_rabenseifner_factor():
    assert algo_bandwidth(10.0, 1) == math.inf
    assert algo_bandwidth(10.0, 2) == 10.0
    assert algo_bandwidth(14.0, 8) == 8.0


def test_eq2_by_hand_for_m2_on_the_calibrated_ic1_mesh():
    """2·L·b·s = 16384; 7h/(d1·B2) = 28672/9.9e9 and 2h/(d2·B1) = 8192/4.8e9, times 2 bytes:
    16384 x (2.8962e-6 + 1.7067e-6) x 2 = 0.1508 s per layer."""
    t = t_comm_s(M2, DeviceMesh(2, 4), 1.20 * GB, 4.95 * GB)
    assert t == pytest.approx(16384 * (28672 / 9.9e9 + 8192 / 4.8e9) * 2)
    assert t == pytest.approx(0.1508, abs=1e-4)


def test_eq2_terms_vanish_on_size_one_dimensions():
    assert t_comm_s(M2, DeviceMesh(1, 1), math.inf, math.inf) == 0.0
    assert t_comm_s(M2, DeviceMesh(8, 1), 1 * GB, math.inf) == 2 * 4 * 2048 * 2 * 4096 / GB * 2
    assert t_comm_s(M2, DeviceMesh(1, 8), math.inf, 1 * GB) == 2 * 4 * 2048 * 7 * 4096 / GB * 2


@given(st.floats(0.1, 1e3), st.floats(1.01, 10.0))
def test_eq2_time_falls_as_bandwidth_grows(bandwidth_gb, factor):
    mesh = DeviceMesh(4, 2)
    slow = t_comm_s(M2, mesh, bandwidth_gb * GB, bandwidth_gb * GB)
    fast = t_comm_s(M2, mesh, factor * bandwidth_gb * GB, bandwidth_gb * GB)
    assert fast < slow


def test_eq2_scales_with_layers_and_dtype():
    fp32 = ModelConfig("x", hidden=4096, heads=32, layers=3, dtype="fp32")
    base = t_comm_s(M2, DeviceMesh(4, 2), GB, GB)
    assert t_comm_s(fp32, DeviceMesh(4, 2), GB, GB) == pytest.approx(6 * base)


# -- calibrated IC1 (Section 5.3) -------------------------------------------------------------
def test_calibrated_ic1_atp4_is_about_46_percent_below_atp1():
    """(8, 1): 16384 x 8192/0.97e9 x 2 = 0.2767 s; (2, 4): 0.1508 s; 1 - 0.1508/0.2767 = 45.5 %."""
    plan = plan_analytic(None, M2, 8, PAPER_IC1_CALIBRATION)
    assert [str(e.mesh) for e in plan] == ["DeviceMesh(2, 4)", "DeviceMesh(8, 1)"]
    atp4, atp1 = plan
    assert atp1.t_comm_s == pytest.approx(0.2767, abs=1e-4)
    assert 1 - atp4.t_comm_s / atp1.t_comm_s == pytest.approx(0.46, abs=0.01)
    assert (atp4.B1_Bps, atp4.B2_Bps) == (1.20 * GB, 4.95 * GB)


def test_calibrated_ic1_picks_2x4_even_beside_the_derived_matrix():
    plan = plan_analytic(load_topology("ic1"), M2, 8, PAPER_IC1_CALIBRATION)
    assert plan[0].mesh == DeviceMesh(2, 4)


def test_uncalibrated_meshes_are_left_out_unless_asked_for():
    """Derived IC1 bandwidths (at spec, the PCIe tree, ~18 GB/s: the 8-GPU ring's algbw is
    8/14 of a 31.5 GB/s uplink) are not on the calibrated footing."""
    topology = load_topology({"preset": "ic1", **preset_info("ic1")["spec"]})
    mixed = plan_analytic(topology, M2, 8, PAPER_IC1_CALIBRATION, include_uncalibrated=True)
    assert len(mixed) == 4
    derived = {e.mesh: e for e in plan_analytic(topology, M2, 8)}
    assert derived[DeviceMesh(8, 1)].B1_Bps == pytest.approx(8 / 14 * 31.5 * GB)
    assert {e.mesh: e for e in mixed}[DeviceMesh(4, 2)] == derived[DeviceMesh(4, 2)]


def test_calibration_keys_and_errors():
    assert normalize_calibration({"2x4": {"B1_Bps": 1e9}}) == {(2, 4): {"B1_Bps": 1e9}}
    with pytest.raises(AtpsimError, match="unknown bandwidth 'B1'"):
        normalize_calibration({(2, 4): {"B1": 1e9}})
    with pytest.raises(AtpsimError, match="expected a mesh"):
        normalize_calibration({"2by4": {"B1_Bps": 1e9}})
    with pytest.raises(AtpsimError, match=r"calibration.2x4: DeviceMesh\(2, 4\) needs B2_Bps"):
        plan_analytic(None, M2, 8, {(2, 4): {"B1_Bps": 1e9}})
    with pytest.raises(AtpsimError, match="no calibrated mesh has 16 devices"):
        plan_analytic(None, M2, 16, PAPER_IC1_CALIBRATION)


# -- Eq. 3 on Figure 7 ------------------------------------------------------------------------
def test_figure_7a_devicemesh_8_2(fig7a):
    """Section 3.5: B'2 is one GPU pair's 200 GB/s (P2P caps the 600 GB/s group bandwidth);
    B'1 crosses nodes, whose 25 GB/s two dimension-1 groups share: 12.5 GB/s."""
    assert mesh_bandwidths(derive_hcm(fig7a), DeviceMesh(8, 2)) == (12.5 * GB, 200 * GB)


def test_figure_7a_devicemesh_16_1_is_the_nic(fig7a):
    assert mesh_bandwidths(derive_hcm(fig7a), DeviceMesh(16, 1)) == (25 * GB, math.inf)


def test_figure_7b_torus_gives_group_bandwidth_on_both_dimensions():
    """Section 5.4: on IC6, B'1 = B'2 = GroupBW: 200/4 = 50 GB/s across rings, 2 x 25 in one."""
    hcm = derive_hcm(load_topology("torus:4x4"))
    assert mesh_bandwidths(hcm, DeviceMesh(4, 4)) == (50 * GB, 50 * GB)


def test_rings_that_are_not_neighbours_use_the_group_bandwidth():
    """DeviceMesh(2, 8) on a 4x4 torus: dimension-1 pairs sit on rings 0 and 2 (P2P 0, relayed
    through ring 1 or 3), so the ring's 200 GB/s, shared by its 4 columns, is used: 50 GB/s."""
    hcm = derive_hcm(load_topology("torus:4x4"))
    assert mesh_bandwidths(hcm, DeviceMesh(2, 8))[0] == 50 * GB


def test_mesh_larger_than_topology_is_an_error():
    with pytest.raises(AtpsimError, match="needs 16 GPUs; ic3 has 8"):
        mesh_bandwidths(derive_hcm(load_topology("ic3")), DeviceMesh(4, 4))


# -- IC5 closed form (Section 5.4) ------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 4, 8, 12, 16, 32, 64, 128, 256])
def test_nvlink_network_switch_equals_the_closed_form(n):
    topology = load_topology({"preset": "ic5", "gpus": n})
    hcm = derive_hcm(topology)
    group_bw = hcm.layers[0].groups[0].group_Bps(0)
    for mesh in factorizations(n):
        estimate = estimate_mesh(hcm, M2, mesh)
        assert estimate.t_comm_s == pytest.approx(
            closed_form_t_comm_s(M2, mesh, group_bw), rel=1e-12
        )


def test_closed_form_follows_from_eq2_and_eq4_symbolically():
    sympy = pytest.importorskip("sympy")
    d1, d2, h, g, L, b, s = sympy.symbols("d1 d2 h G L b s", positive=True)
    b1 = d1 / (2 * (d1 - 1)) * g
    b2 = d2 / (2 * (d2 - 1)) * g
    eq2 = 2 * L * b * s * (7 * h / (d1 * b2) + 2 * h / (d2 * b1))
    closed = 2 * L * b * s * h / g * (14 * d2 + 4 * d1 - 18) / (d1 * d2)
    assert sympy.simplify(eq2 - closed) == 0


def test_closed_form_values_and_figure_12_trends():
    """ATP-1 grows towards 4 Delta with N; ATP-2 and ATP-4 shrink; the crossover of ATP-1 and
    ATP-2 is at N = 7: 4 - 4/N = 2 + 10/N."""
    assert closed_form_units(8, 1) == 3.5 and closed_form_units(4, 2) == 3.25
    atp1 = [closed_form_units(n, 1) for n in (8, 16, 64, 256)]
    atp2 = [closed_form_units(n // 2, 2) for n in (8, 16, 64, 256)]
    atp4 = [closed_form_units(n // 4, 4) for n in (8, 16, 64, 256)]
    assert atp1 == sorted(atp1) and atp2 == sorted(atp2, reverse=True)
    assert atp4 == sorted(atp4, reverse=True)
    assert delta_s(M2, 450 * GB) == pytest.approx(2 * 4 * 2048 * 4096 * 2 / 450e9)


# -- ATP's choice on the paper's machines -----------------------------------------------------
def test_ic3_choice_depends_on_the_reading_of_eq3():
    """8 GPUs on one NVSwitch: with B'1 = B'2 = GroupBW (the paper's IC5 assumption) the closed
    form gives (4, 2) 3.25 Delta < (8, 1) 3.5 Delta; dividing by d2 at every layer as Eq. 3 is
    printed gives (8, 1), the paper's reported choice for IC3 (Section 5.3)."""
    topology = load_topology("ic3")
    assert plan_analytic(topology, M2, 8)[0].mesh == DeviceMesh(4, 2)
    assert plan_analytic(topology, M2, 8, sharing="paper")[0].mesh == DeviceMesh(8, 1)


def test_plan_is_sorted_and_covers_every_mesh():
    plan = plan_analytic(load_topology("ic4"), M2, 16)
    assert sorted(e.mesh.d2 for e in plan) == [1, 2, 4, 8, 16]
    times = [e.t_comm_s for e in plan]
    assert times == sorted(times)


def test_plan_on_the_first_gpus_of_a_larger_topology():
    """8 of ic4's 16 GPUs: two nodes of 4."""
    plan = plan_analytic(load_topology("ic4"), M2, 8)
    assert all(e.mesh.size == 8 for e in plan) and len(plan) == 4


def test_unknown_sharing_mode():
    with pytest.raises(AtpsimError, match="sharing must be one of"):
        mesh_bandwidths(derive_hcm(load_topology("ic3")), DeviceMesh(4, 2), sharing="half")


@pytest.mark.parametrize("spec", [{"preset": "ic5", "gpus": 1024}, "torus:32x32"])
def test_plan_scales_to_a_thousand_gpus(spec):
    """Figure 12 sweeps the device count: every mesh of 1024 GPUs in well under a few seconds."""
    topology = load_topology(spec)
    start = time.perf_counter()
    plan = plan_analytic(topology, M2, 1024)
    assert time.perf_counter() - start < 3.0
    assert len(plan) == 11
