"""Two training jobs on one fabric: placed one after the other, simulated together on one
network, each slowed by the other only where their traffic meets (a leaf switch's uplinks
both use), and each alone as it is on its own."""

from __future__ import annotations

import pytest

from atpsim.api.job_point import simulate_job_point
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.training.fabric import simulate_jobs
from atpsim.training.job import simulate_job

#: Six DGX-like nodes, two per leaf switch, uplinks oversubscribed 4:1: job A on nodes 0-2,
#: job B on nodes 3-5, so leaf 1 carries A's node 2 and B's node 3.
FABRIC = {"builder": "ib-cluster", "nodes": 6, "gpus_per_node": 8, "oversubscription": 4, "leaf_size": 16}
JOB = {"model": "gpt3-1.3b", "tp": (8, 1), "pp": 1, "dp": 3, "global_batch": 48, "overlap_grad_reduce": False}


def test_two_data_parallel_jobs_sharing_a_leaf_slow_each_other():
    both = simulate_jobs(FABRIC, [JOB, JOB])
    assert all(s > 1.01 for s in both.slowdown)
    for together, alone in zip(both.together, both.alone, strict=True):
        assert together.exposed_dp_comm_s > alone.exposed_dp_comm_s
        assert together.compute_s == alone.compute_s


def test_a_job_alone_on_the_fabric_is_the_job_simulated_by_itself():
    both = simulate_jobs(FABRIC, [JOB, JOB])
    own = simulate_job(FABRIC, JOB["model"], tp=(8, 1), pp=1, dp=3, global_batch=48,
                       overlap_grad_reduce=False)  # fmt: skip
    assert both.alone[0].iteration_time_s == pytest.approx(own.iteration_time_s, rel=1e-12)


def test_jobs_on_separate_leaves_do_not_meet():
    apart = dict(FABRIC, leaf_size=8)  # one node per leaf: no uplink carries both jobs
    both = simulate_jobs(apart, [JOB, JOB])
    assert both.slowdown == (1.0, 1.0)


def test_a_scenario_point_with_a_neighbour_reports_both_slowdowns(tmp_path):
    """One point (sequence parallelism off, asked: a job scenario's default tries the 8x1
    mesh both ways) with a neighbour job: both slowed, the time alone x slowdown."""
    path = tmp_path / "two.yaml"
    path.write_text("""
name: two-jobs
topology: {builder: ib-cluster, gpus_per_node: 8, oversubscription: 4, leaf_size: 16}
model: gpt3-1.3b
parallelism: {devices: 24, tp: [[8, 1]], pp: 1, dp: 3, global_batch: 48, sequence_parallel: false,
              neighbour: {model: gpt3-1.3b, tp: [8, 1], dp: 3, global_batch: 48}}
""")
    (point,) = expand_sweep(load_scenario(path))
    assert point.neighbour_label == "gpt3-1.3b tp8x1 pp1 dp3"
    row = simulate_job_point(point)
    assert row["slowdown"] >= 1.0 and row["neighbour_slowdown"] >= 1.0
    assert row["iteration_time_s"] == pytest.approx(row["alone_iteration_time_s"] * row["slowdown"], rel=1e-12)
