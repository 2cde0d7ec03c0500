"""``parallelism.scheme: sagemaker``: SageMaker-style TP over data-parallel ranks (Karakus et
al. 2021) as a step-scenario scheme beside ATP and SUMMA. The devices form one group, the
model's batch is split over its ranks, and a point runs in des mode only."""

from dataclasses import replace

import pytest

from atpsim.api import hardware_profile, simulate_point
from atpsim.engine.step.run import layer_overhead_s
from atpsim.errors import ScenarioError, SimulationError
from atpsim.parallel.sagemaker import SageMakerGroup
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep


def _load(tmp_path, model: str, parallelism: str, topology: str = "ic3"):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ntopology: {topology}\nmodel: {model}\nchunks: [1, 2]\n"
                    f"parallelism: {parallelism}\n")
    return expand_sweep(load_scenario(path, expand=False))


def test_the_devices_form_one_group_and_the_key_names_the_scheme(tmp_path):
    points = _load(tmp_path, "{preset: M1, batch: 8}",
                   "{devices: 8, meshes: [atp-2], scheme: [atp, sagemaker]}")
    sagemaker = [p for p in points if p.scheme == "sagemaker"]
    assert [(p.tp, p.mesh_label, p.chunks) for p in sagemaker] == [
        (SageMakerGroup(8), "8x1", 1), (SageMakerGroup(8), "8x1", 2)]
    assert sagemaker[0].as_dict()["scheme"] == "sagemaker"
    atp = next(p for p in points if p.scheme == "atp")
    assert "scheme" not in atp.as_dict() and atp.key() != sagemaker[0].key()
    with pytest.raises(SimulationError, match="not an ATP DeviceMesh"):
        _ = sagemaker[0].mesh


def test_a_batch_that_does_not_split_over_the_devices_names_the_key(tmp_path):
    with pytest.raises(ScenarioError) as raised:
        _load(tmp_path, "M1", "{devices: 8, scheme: sagemaker}")
    assert raised.value.key == "parallelism.scheme"
    assert "batch 4, expected a multiple of 8" in raised.value.message


def test_one_rank_is_the_single_gpu_step_and_eight_ranks_pay_for_their_collectives(tmp_path):
    """t = 1: the same program as ATP on DeviceMesh(1, 1) (no collective, the whole batch on
    one GPU). t = 8 on NVSwitch: the GEMM FLOPs per rank of one GPU with batch / 8, plus the
    all-to-alls and reduce-scatters of every linear, so its compute (the fixed per-layer cost
    aside) is at least the t = 1 step's over 8 and at most twice that (its GEMMs' inner
    dimension is h / 8, which runs less efficiently), and it communicates."""
    one = _load(tmp_path, "{preset: M1, batch: 8}", "{devices: 1, scheme: [atp, sagemaker]}")
    by_scheme = {p.scheme: simulate_point(p) for p in one if p.chunks == 1}
    assert by_scheme["sagemaker"]["step_time_s"] == pytest.approx(
        by_scheme["atp"]["step_time_s"], rel=1e-12)
    assert by_scheme["sagemaker"]["comm_time_s"] == 0
    eight = _load(tmp_path, "{preset: M1, batch: 8}", "{devices: 8, scheme: sagemaker}")[0]
    row = simulate_point(eight)
    assert row["comm_time_s"] > 0
    fixed = eight.model.layers * layer_overhead_s(hardware_profile(eight.hardware))
    single_gpu_ops = by_scheme["atp"]["compute_time_s"] - fixed
    assert single_gpu_ops / 8 <= row["compute_time_s"] - fixed <= single_gpu_ops / 4
    assert row["memory_per_rank_bytes"] < by_scheme["atp"]["memory_per_rank_bytes"]
    with pytest.raises(SimulationError, match="analytic mode is defined for scheme 'atp' only"):
        simulate_point(replace(eight, mode="analytic"))
