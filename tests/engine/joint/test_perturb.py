"""Per-rank variation: a straggler GPU or a degraded NIC port, fixed or drawn from a seed, in
simulate_job and in a job scenario; it slows the iteration it touches, the same seed gives
the same ranks, and a bad key names itself."""

from __future__ import annotations

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.perturb import Perturbation
from atpsim.errors import SimulationError
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.topology.spec import load_topology
from atpsim.training.job import simulate_job
from atpsim.training.perturb import draw_perturbation

MODEL = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
JOB = {"topology": "ib-cluster:4x8", "model": MODEL, "tp": (8, 1), "pp": 2, "dp": 2,
       "micro_batch": 1, "global_batch": 8}  # fmt: skip


def test_the_same_seed_draws_the_same_stragglers_and_ports():
    topology = load_topology("ib-cluster:4x8")
    a = draw_perturbation(topology, range(32), seed=3, stragglers=2, straggler_factor=1.5,
                          slow_nics=1, nic_factor=0.5)  # fmt: skip
    b = draw_perturbation(topology, range(32), seed=3, stragglers=2, straggler_factor=1.5,
                          slow_nics=1, nic_factor=0.5)  # fmt: skip
    assert a == b and len(a.gpus) == 2 and len(a.links) == 1
    nic, switch, factor = a.links[0]
    assert topology.graph.nodes[nic]["kind"] == "nic" and factor == 0.5
    slowed = a.apply(topology)
    assert slowed.graph.edges[nic, switch]["bandwidth_Bps"] == 0.5 * topology.graph.edges[nic, switch]["bandwidth_Bps"]


def test_a_straggler_slows_its_replica_and_the_rendezvous_waits_for_it():
    """Rank 3 (replica 0, stage 0) computes 1.5x slower: its stage's passes stretch, replica
    1 waits for it at every gradient bucket, and the iteration is longer; a factor of 1 is
    the unperturbed iteration exactly."""
    base = simulate_job(**JOB)
    slow = simulate_job(**JOB, perturb=Perturbation(gpus=((3, 1.5),)))
    same = simulate_job(**JOB, perturb=Perturbation(gpus=((3, 1.0),)))
    assert slow.iteration_time_s > base.iteration_time_s * 1.1
    assert same.iteration_time_s == base.iteration_time_s


def test_a_degraded_nic_port_slows_the_calls_that_cross_it():
    base = simulate_job(**JOB)
    slow = simulate_job(**JOB, perturb={"links": [["node0_nic0", "leaf0", 0.1]]})
    assert slow.iteration_time_s > base.iteration_time_s


@pytest.mark.parametrize("perturb, key", [({"sead": 1}, "perturb"),
                                          ({"gpus": [[99, 2.0]]}, "perturb.gpus"),
                                          ({"links": [["gpu0", "leaf0", 0.5]]}, "perturb.links")])
def test_bad_perturbations_name_their_key(perturb, key):
    with pytest.raises(SimulationError) as error:
        simulate_job(**JOB, perturb=perturb)
    assert error.value.key == key


def test_a_perturbation_needs_the_joint_network():
    with pytest.raises(SimulationError, match="joint network"):
        simulate_job(**JOB, network="isolated", perturb={"seed": 1, "stragglers": 1, "straggler_factor": 2.0})


def test_a_job_scenario_sweeps_network_and_perturbation(tmp_path):
    """``parallelism.network`` and ``parallelism.perturb`` are axes (a perturbation only on
    the joint network); the default point keeps the key it had before they existed.
    Sequence parallelism off (asked: the default tries the 8x1 mesh both ways)."""
    text = """
name: perturbed
topology: ib-cluster:4x8
model: gpt3-350m
parallelism: {tp: [[8, 1]], pp: 2, dp: auto, micro_batch: 1, global_batch: 8, sequence_parallel: false,
              network: [joint, isolated], perturb: [{}, {seed: 1, stragglers: 1, straggler_factor: 1.5}]}
"""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    points = expand_sweep(load_scenario(path))
    assert [(p.network, p.perturb_label) for p in points] == [
        ("joint", "none"), ("joint", "seed=1 straggler_factor=1.5 stragglers=1"),
        ("isolated", "none")]
    plain = path.read_text().replace("network: [joint, isolated], perturb: [{}, {seed: 1, stragglers: 1, straggler_factor: 1.5}]", "")
    path.write_text(plain)
    assert expand_sweep(load_scenario(path))[0].key() == points[0].key()
