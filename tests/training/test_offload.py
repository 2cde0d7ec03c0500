"""Activation offloading (atpsim/training/offload.py): what a rank keeps, what the copies cost,
the job without it unchanged, and the key in scenarios."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.compute.hardware import hardware_profile
from atpsim.compute.models import model_preset
from atpsim.errors import ScenarioError, SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.topology.spec import load_topology
from atpsim.training.config import check_job, job_config
from atpsim.training.job import job_memory, simulate_job
from atpsim.training.offload import (
    FALLBACK_HOST_BPS,
    chunk_offload_bytes,
    exposed_copy_s,
    host_link_Bps,
)
from atpsim.training.passes import JobPrograms, OpCosts

MODEL = replace(model_preset("megatron-1.7b"), layers=8)
MACHINE = "ib-cluster:2x8"
#: Four GPUs behind 1 GB/s PCIe links: no pass hides its copies.
SLOW_PCIE = {"builder": "pcie-tree", "gpus": 4, "pcie_bandwidth_Bps": "1 GB/s"}
JOB = {"tp": (2, 1), "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 8, "vocab": 0}


def _config(recompute: str = "full", offload: bool = True, pp: int = 2):
    return job_config(MODEL, ParallelLayout(DeviceMesh(2, 1), pp, 1), 1, 8, recompute=recompute,
                      offload_activations=offload)  # fmt: skip


# --- memory ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("recompute", ["full", "selective", "none"])
def test_a_rank_keeps_one_micro_batch_of_its_chunk(recompute):
    """1F1B's first stage of 4 holds 4 micro-batches in flight; offloaded it keeps 1 (its 2
    layers' activations of the micro-batch in forward or backward): activations drop by 3
    chunks' bytes, weights and optimizer state do not move."""
    off, on = job_memory(_config(recompute, False, pp=4)), job_memory(_config(recompute, True, pp=4))
    chunk = chunk_offload_bytes(_config(recompute, True, pp=4), 0)
    assert off.layers_in_flight == 8 and on.layers_in_flight == 2
    assert on.activations_bytes == pytest.approx(chunk, rel=1e-12)
    assert off.activations_bytes - on.activations_bytes == pytest.approx(3 * chunk, rel=1e-12)
    assert (on.weights_bytes, on.optimizer_bytes) == (off.weights_bytes, off.optimizer_bytes)


def test_full_checkpointing_offloads_each_layers_input():
    """recompute full keeps each layer's input [b·s, h] in fp16 on every rank of 1D TP without
    sequence parallelism: 4 layers x 1 x 2048 x 2304 x 2 B per micro-batch and stage."""
    config = replace(_config("full"), sequence_parallel=False)
    assert chunk_offload_bytes(config, 0) == 4 * 2048 * MODEL.hidden * 2


# --- time -----------------------------------------------------------------------------------------


def test_exposed_copy_is_the_excess_over_compute():
    assert exposed_copy_s(3e9, 1e9, 5.0) == 0.0
    assert exposed_copy_s(3e9, 1e9, 1.0) == pytest.approx(2.0, rel=1e-12)


def test_host_link_is_the_gpus_pcie_or_gen4_x16():
    """ib-cluster's GPU-NIC PCIe Gen4 x16 (31.5 GB/s); the slow tree's 1 GB/s; NVSwitch names
    no PCIe link, so Gen4 x16."""
    assert host_link_Bps(load_topology(MACHINE), range(16)) == 31.5e9
    assert host_link_Bps(load_topology(SLOW_PCIE), range(4)) == 1e9
    assert host_link_Bps(load_topology("nvswitch:8"), range(8)) == FALLBACK_HOST_BPS == 31.5e9


def test_copies_hidden_under_compute_cost_nothing():
    """Full checkpointing on 31.5 GB/s: 38 MB per forward copies in 1.2 ms, far under the
    forward's compute, so the iteration is the job's without offloading, bit for bit."""
    for network in ("isolated", "joint"):
        off = simulate_job(MACHINE, MODEL, network=network, recompute="full", **JOB)
        on = simulate_job(MACHINE, MODEL, network=network, recompute="full", offload_activations=True, **JOB)
        assert on.exposed_offload_s == 0.0
        assert on.iteration_time_s == off.iteration_time_s
        assert on.memory_per_rank_bytes < off.memory_per_rank_bytes


def test_slow_pcie_exposes_the_copies_beyond_each_pass():
    """At 1 GB/s each forward's copy out and each backward's fetch exceed the pass's compute:
    every pass grows by ``bytes / B - compute_s``, and the critical stage's 8 forwards and 8
    backwards add that much exposed time (JobPrediction.exposed_offload_s)."""
    config = _config("selective")
    topology, profile = load_topology(SLOW_PCIE), hardware_profile("a100-sxm4-80gb")
    plain = OpCosts(topology, profile, JobPrograms(replace(config, offload_activations=False)))
    copy_s = chunk_offload_bytes(config, 0) / 1e9
    expected = {k: copy_s - plain._layers(0)[k].compute_s for k in ("F", "B")}
    assert min(expected.values()) > 0
    costs = OpCosts(topology, profile, JobPrograms(config))
    for kind in ("F", "B"):
        assert costs.offload_s(0, kind) == pytest.approx(expected[kind], rel=1e-12)
        assert costs._layers(0)[kind].time_s == pytest.approx(plain._layers(0)[kind].time_s + expected[kind], rel=1e-12)
    off = simulate_job(SLOW_PCIE, MODEL, network="isolated", recompute="selective", **JOB)
    on = simulate_job(SLOW_PCIE, MODEL, network="isolated", recompute="selective", offload_activations=True, **JOB)
    assert on.exposed_offload_s == pytest.approx(8 * sum(expected.values()), rel=1e-9)
    assert on.iteration_time_s > off.iteration_time_s + on.exposed_offload_s * 0.99
    total = on.compute_s + on.exposed_tp_comm_s + on.exposed_dp_comm_s + on.pipeline_bubble_s + on.other_s
    assert total + on.exposed_offload_s == pytest.approx(on.iteration_time_s, rel=1e-12)


def test_passes_as_tasks_carry_the_copies_too():
    """On the PCIe tree the passes' TP traffic meets the pipeline sends, so the joint network
    runs each pass as its programs' tasks: the copy is a delay after the layers there, and the
    iteration grows by about as much as the isolated composition's (the copies themselves, and
    the bubble they lengthen: (p - 1) more forward and backward)."""
    job = {**JOB, "recompute": "selective"}
    runs = {(net, on): simulate_job(SLOW_PCIE, MODEL, network=net, offload_activations=on, **job)
            for net in ("joint", "isolated") for on in (False, True)}  # fmt: skip
    joint, alone = runs[("joint", True)], runs[("isolated", True)]
    assert joint.stats["passes_as_delays"] == 0
    assert joint.exposed_offload_s == pytest.approx(alone.exposed_offload_s, rel=1e-12) and joint.exposed_offload_s > 0
    growth = {net: runs[(net, True)].iteration_time_s - runs[(net, False)].iteration_time_s for net in ("joint", "isolated")}
    assert growth["joint"] == pytest.approx(growth["isolated"], rel=0.05)
    assert growth["isolated"] == pytest.approx(alone.exposed_offload_s * (1 + 1 / 8), rel=0.01)


def test_off_is_the_job_as_before():
    """offload_activations false is the default: the same prediction as a job that never
    names it, on both networks."""
    for network in ("isolated", "joint"):
        plain = simulate_job(MACHINE, MODEL, network=network, **JOB)
        off = simulate_job(MACHINE, MODEL, network=network, offload_activations=False, **JOB)
        assert off == plain and off.exposed_offload_s == 0.0


@pytest.mark.parametrize("value", [1, "yes", None])
def test_a_non_bool_is_refused_by_key(value):
    with pytest.raises(SimulationError) as error:
        check_job(replace(_config(), offload_activations=value))
    assert error.value.key == "offload_activations"


# --- the scenario key -----------------------------------------------------------------------------


SCENARIO = """\
name: offload-scenario
topology: "ib-cluster:2x8"
model: {{preset: megatron-1.7b, layers: 8}}
parallelism:
  devices: 16
  tp: [[2, 1]]
  pp: 2
  sequence_parallel: false
  global_batch: 16
{extra}"""


def scenario(tmp_path: Path, extra: str = ""):
    path = tmp_path / "offload.yaml"
    path.write_text(SCENARIO.format(extra=extra))
    return load_scenario(path)


def test_the_scenario_key_round_trips(tmp_path):
    """offload_activations: [false, true] makes a point each; the false point's key is that of
    the scenario without the key; the true point's config offloads, and the point of that
    config is the point; the results columns name it."""
    plain = expand_sweep(scenario(tmp_path))
    points = expand_sweep(scenario(tmp_path, "  offload_activations: [false, true]\n"))
    assert [p.offload_activations for p in points] == [False, True]
    assert points[0].key() == plain[0].key() and points[1].key() != plain[0].key()
    config = points[1].config()
    assert config.offload_activations is True
    fields = {k: getattr(points[1], k) for k in ("scenario", "topology", "topology_label", "n_devices", "hardware",
                                                  "model", "vocab", "network", "perturb", "neighbour")}  # fmt: skip
    assert type(points[1]).from_config(config, **fields).key() == points[1].key()
    assert points[1].columns(0)["offload_activations"] is True and points[0].columns(0)["offload_activations"] is False


@pytest.mark.parametrize("extra", ["  offload_activations: 1\n", "  offload_activations: [false, yes please]\n"])
def test_scenario_refuses_a_non_bool_by_key(tmp_path, extra):
    with pytest.raises(ScenarioError) as error:
        expand_sweep(scenario(tmp_path, extra))
    assert "parallelism.offload_activations" in str(error.value)


def test_plan_cli_takes_offload_activations():
    """plan --global-batch --offload-activations plans every layout with offloading and shows
    the exposed host copies; without --global-batch the option is refused (exit 2)."""
    args = ["plan", "-t", MACHINE, "-m", "megatron-1.7b", "--global-batch", "16", "--pp", "2", "--micro-batch", "1",
            "--max-tp", "2", "--network", "isolated", "--no-progress"]  # fmt: skip
    plain = CliRunner().invoke(main, args)
    result = CliRunner().invoke(main, [*args, "--offload-activations"])
    assert result.exit_code == 0 == plain.exit_code, result.output
    assert "host copies s" in result.output and "host copies s" not in plain.output
    bad = CliRunner().invoke(main, ["plan", "-t", "ic1", "-m", "M2", "--offload-activations"])
    assert bad.exit_code == 2 and "--offload-activations" in bad.output


def test_a_search_space_takes_offload_activations():
    """A search space's parallelism.offload_activations is an axis of its layouts: [false,
    true] doubles the points, the false ones as without the key (but the space's name)."""
    from atpsim.api.search import search_points, search_space

    space = {"topology": ["ib-cluster:1x8"], "model": ["gpt3-125m"],
             "parallelism": {"global_batch": [16], "pp": [1, 2], "micro_batch": [2]}}  # fmt: skip
    plain = list(search_points(search_space(**space)))
    both = list(search_points(search_space(**{**space, "parallelism": {**space["parallelism"],
                                                                        "offload_activations": [False, True]}})))
    assert len(both) == 2 * len(plain) and sum(p.offload_activations for p in both) == len(plain)
    assert all(p.config().offload_activations for p in both if p.offload_activations)
    strip = lambda p: {k: v for k, v in p.as_dict().items() if k != "scenario"}  # noqa: E731
    assert [strip(p) for p in plain] == [strip(p) for p in both if not p.offload_activations]
