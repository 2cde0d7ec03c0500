"""Intervals come from the fit's residuals, through the simulator: a synthetic machine's
collectives are fitted (`atpsim validate`'s link fit, which records its uncertainty in
fitted/fit.yaml) and a plan on the fitted star draws from that record. Zero residuals must give
intervals that collapse to the point estimate; larger residuals wider intervals."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

import atpsim
from atpsim.calibrate.machine import fit_folder
from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.hardware import GemmModel, HardwareProfile, profile_to_dict
from atpsim.compute.models import ModelConfig

BANDWIDTH_Bps, LATENCY_s = 2e9, 20e-6
#: A fixed pattern of relative measurement errors, scaled by the test's noise level.
PATTERN = (0.05, -0.03, 0.02, -0.06, 0.04, -0.01, 0.03, -0.05, 0.01, -0.02)
MODEL = ModelConfig("t", hidden=64, heads=4, layers=1, batch=4, seq=16, dtype="fp32")
PROFILE = HardwareProfile(
    name="cpu-like", peak_flops=(("fp32", 50e9),), memory_bandwidth_Bps=12.8e9,
    memory_capacity_bytes=4 * 2**30, memory_efficiency=1.0, launch_overhead_s=10e-6,
    gemm=GemmModel(model="curve", efficiency_max=0.9, output_half_elements=2000.0, k_half=8.0),
)  # fmt: skip


def _fitted_star(folder, noise: float) -> str:
    """A 4-rank machine whose all-reduce times are the closed form x (1 + noise x PATTERN),
    fitted; the path of its fitted star topology."""
    folder.mkdir(parents=True)
    rows = []
    for p, groups in ((4, 1), (2, 2)):
        for e in range(3, 23, 2):
            t = collective_time_s("all_reduce", "ring", p, 2**e, BANDWIDTH_Bps, LATENCY_s)
            t *= 1 + noise * PATTERN[len(rows) % len(PATTERN)]
            rows.append(["all_reduce", 1, p, groups, 2**e, t, t])
    with open(folder / "collectives.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["op", "dim", "group_size", "n_groups", "bytes", "time_s_median",
                         "time_s_mean"])  # fmt: skip
        writer.writerows(rows)
    machine = {"device": "cpu", "cpu_model": "synthetic", "backend": "gloo", "world_size": 4}
    (folder / "machine.json").write_text(json.dumps(machine))
    fit_folder(folder)
    return str(folder / "fitted" / "topology.yaml")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """Plans with 6 draws on fitted stars of noise 0, 1 and 2 (the profile has no record)."""
    root = tmp_path_factory.mktemp("uncertainty")
    hardware = root / "cpu-like.yaml"
    hardware.write_text(yaml.safe_dump(profile_to_dict(PROFILE)))
    return {
        noise: atpsim.plan(_fitted_star(root / f"noise{noise}", noise), MODEL,
                           hardware=str(hardware), uncertainty=6, seed=1)
        for noise in (0, 1, 2)
    }  # fmt: skip


def test_the_fit_records_zero_sigma_for_zero_residuals(plans, tmp_path_factory):
    from atpsim.calibrate.uncertainty.sources import fitted_record

    root = tmp_path_factory.getbasetemp()
    exact = fitted_record(next(root.glob("uncertainty*/noise0/fitted/topology.yaml")), "link")
    noisy = fitted_record(next(root.glob("uncertainty*/noise1/fitted/topology.yaml")), "link")
    assert exact is not None and noisy is not None
    assert max(p.sigma for p in exact.parameters) < 1e-12
    assert noisy.parameter("bandwidth_Bps").sigma > 1e-3


def test_intervals_collapse_to_the_point_estimate_without_residuals(plans):
    for entry in plans[0].entries:
        step = entry.draws.step_interval
        point = entry.des.step_time_s
        assert step.p10 == pytest.approx(point, rel=1e-9) and step.p90 == pytest.approx(point, rel=1e-9)
    assert plans[0].confidence.p_best == 1.0 and plans[0].confidence.expected_loss_pct < 1e-6


def test_intervals_widen_with_the_residuals(plans):
    def width(plan, k):
        step = plan.entries[k].draws.step_interval
        return (step.p90 - step.p10) / plan.entries[k].des.step_time_s

    for k in range(len(plans[1].entries)):
        assert 0 < width(plans[1], k) < width(plans[2], k)
    assert plans[1].entries[0].draws.sources == ("fitted:noise1:link",)


def test_draws_leave_the_point_estimate_alone(plans, tmp_path_factory):
    """The plan's point estimates are those of a plan without draws (no cache leaks)."""
    root = tmp_path_factory.getbasetemp()
    topology = str(next(root.glob("uncertainty*/noise2/fitted/topology.yaml")))
    hardware = str(next(root.glob("uncertainty*/cpu-like.yaml")))
    plain = atpsim.plan(topology, MODEL, hardware=hardware)
    assert [e.des for e in plain.entries] == [e.des for e in plans[2].entries]
    assert plain.confidence is None and all(e.draws is None for e in plain.entries)


def test_a_topology_and_profile_with_no_fit_refuse_draws(tmp_path):
    hardware = tmp_path / "cpu-like.yaml"
    hardware.write_text(yaml.safe_dump(profile_to_dict(PROFILE)))
    with pytest.raises(atpsim.AtpsimError, match="no fitted parameter"):
        atpsim.plan("torus:2x2", MODEL, hardware=str(hardware), uncertainty=4)
