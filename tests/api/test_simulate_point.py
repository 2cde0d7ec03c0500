"""simulate_point: both modes on the paper's theory topologies, and the columns they fill."""

import pytest

from atpsim.analytic.model import closed_form_units
from atpsim.api import simulate_point
from atpsim.compute.models import model_preset
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.point import SweepPoint


def _point(topology, n, mesh, mode, model="M4", chunks=1):
    return SweepPoint(
        "test", topology, "t", n, "a100-sxm4-80gb", model_preset(model), DeviceMesh(*mesh),
        chunks, "ring", mode,
    )  # fmt: skip


@pytest.mark.parametrize("mesh", [(16, 1), (8, 2), (4, 4), (2, 8)])
def test_analytic_mode_on_an_nvlink_network_switch_is_the_closed_form(mesh):
    """IC5: B'1 = B'2 = GroupBW, so Eq. 2 + 4 reduce to (14 d2 + 4 d1 - 18)/(d1 d2) Delta."""
    row = simulate_point(_point({"preset": "ic5"}, 16, mesh, "analytic"))
    assert row["comm_over_delta"] == pytest.approx(closed_form_units(*mesh), rel=1e-9)


@pytest.mark.parametrize("mesh", [(16, 1), (8, 2), (4, 4)])
def test_event_engine_agrees_with_the_closed_form_where_latency_is_negligible(mesh):
    """M4 on 16 GPUs of one NVLink switch: messages of tens of MB, so link latency is < 2% of
    each collective. The ATP program's traffic per layer equals Eq. 2's in all-reduce
    equivalents (the all-gathers around the attention core count half an all-reduce each), so
    the simulated communication time should match the formula within a few percent."""
    row = simulate_point(_point({"preset": "ic5"}, 16, mesh, "des"))
    assert row["comm_over_delta"] == pytest.approx(closed_form_units(*mesh), rel=0.05)


def test_a_des_row_fills_every_result_column():
    row = simulate_point(_point("ic3", 8, (8, 1), "des", model="M2", chunks=2))
    assert row["step_time_s"] >= row["compute_time_s"] > 0
    assert 0 <= row["exposed_comm_s"] <= row["comm_time_s"]
    assert row["tflops_per_gpu_paper_unit"] == pytest.approx(
        row["tflops_per_gpu"] * 1e12 / 2**40
    )
    assert row["fits_memory"] is True
