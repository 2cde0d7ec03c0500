"""The typed entry points of atpsim.api: each gives what the path a sweep takes gives, typed."""

from __future__ import annotations

import math

import pytest

import atpsim
from atpsim.api import (
    CollectiveSweep,
    Plan,
    SimulationError,
    StepPrediction,
    collective,
    plan,
    simulate,
    simulate_point,
)
from atpsim.api.step import step_point


def test_simulate_is_the_sweep_row_typed():
    step = simulate("ic3", "M2", mesh=(8, 1), chunks=2)
    row = simulate_point(step_point("ic3", "M2", (8, 1), 2))
    assert isinstance(step, StepPrediction)
    assert step.step_time_s == row["step_time_s"]
    assert step.tflops_per_gpu == row["tflops_per_gpu"]
    assert (step.mesh.d1, step.mesh.d2, step.chunks, step.mode) == (8, 1, 2, "des")


def test_simulate_analytic_mode_has_no_overlap():
    step = simulate("ic3", "M2", mesh=(4, 2), mode="analytic")
    assert step.exposed_comm_s == step.comm_time_s
    assert step.step_time_s == pytest.approx(step.compute_time_s + step.comm_time_s, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,key",
    [
        ({"mesh": (4, 2), "devices": 4}, "mesh"),
        ({"mesh": (4, 2), "chunks": 0}, "chunks"),
        ({"mesh": (4, 2), "mode": "exact"}, "mode"),
    ],
)
def test_simulate_rejects_what_it_cannot_run(kwargs, key):
    with pytest.raises(SimulationError) as caught:
        simulate("ic3", "M2", **kwargs)
    assert caught.value.key == key


def test_collective_takes_a_size_string_and_gives_typed_rows():
    sweep = collective("nvswitch:8", "all_reduce", "1 GiB")
    assert isinstance(sweep, CollectiveSweep)
    (row,) = sweep.rows
    assert row.size_bytes == 2**30 and row.count == 2**30 // 4
    assert row.busbw_Bps == pytest.approx(row.algbw_Bps * 2 * 7 / 8)
    assert row.time_s > 0 and row.n_flows > 0


def test_collective_sizes_as_range_and_list_agree():
    by_range = collective("nvswitch:8", sizes="1M:4M").rows
    by_list = collective("nvswitch:8", sizes=["1MiB", 2**21, "4 MiB"]).rows
    assert [r.size_bytes for r in by_range] == [r.size_bytes for r in by_list] == [2**20, 2**21, 2**22]
    assert [r.time_s for r in by_range] == [r.time_s for r in by_list]


def test_plan_ranks_fastest_first_with_the_paper_choice_on_ic1():
    ranked = plan("ic1", "M2", chunks=(1, 2))
    assert isinstance(ranked, Plan)
    times = [e.des.step_time_s for e in ranked.entries]
    assert times == sorted(times)
    assert len(ranked.entries) == 4 * 2
    best = ranked.des_choice
    assert (best.mesh.d1, best.mesh.d2) == (2, 4)
    assert ranked.analytic_choice is not None and ranked.agree


def test_plan_entries_match_simulate():
    ranked = plan("ic3", "M2", chunks=(2,), calibration="none")
    for entry in ranked.entries:
        alone = simulate("ic3", "M2", mesh=entry.mesh, chunks=2)
        assert entry.des.step_time_s == alone.step_time_s
        assert entry.analytic is not None and math.isfinite(entry.analytic.comm_time_s)


def test_plan_rejects_an_unknown_calibration():
    with pytest.raises(SimulationError, match="paper-ic1"):
        plan("ic1", calibration="paper-ic2")


def test_the_package_exposes_the_api_lazily():
    assert atpsim.simulate is simulate
    assert "simulate" in dir(atpsim)
    with pytest.raises(AttributeError):
        atpsim.no_such_function  # noqa: B018
    for name in atpsim.api.__all__:
        assert getattr(atpsim.api, name) is not None, name


def test_every_export_is_documented():
    missing = [n for n in atpsim.api.__all__ if callable(getattr(atpsim.api, n))
               and not (getattr(atpsim.api, n).__doc__ or "").strip()]  # fmt: skip
    assert missing == []
