"""A whole iteration on one network: where no two calls meet it is the list composition bit
for bit; its shortcuts (calls alone, passes as delays, episodes with symmetry and memo) equal
the plain run of every flow; where the cooldown's sends meet the gradient buckets, both slow."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.plain import run_plain
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.job import JobConfig, check_job, joint_job, load_machine, simulate_job

MODEL = ModelConfig("gpt-1.3b", hidden=2048, heads=16, layers=24, batch=1, seq=2048)
TINY = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
FIELDS = ("iteration_time_s", "compute_s", "exposed_tp_comm_s", "exposed_dp_comm_s",
          "pipeline_bubble_s", "other_s", "tflops_per_gpu")  # fmt: skip


def both(**kwargs):
    args = {"topology": "ib-cluster:4x8", "model": MODEL, "micro_batch": 1} | kwargs
    return simulate_job(network="isolated", **args), simulate_job(network="joint", **args)


@pytest.mark.parametrize("layout", [
    dict(tp=(8, 1), pp=4, dp=1, global_batch=16),  # sends only, never two on one link at once
    dict(tp=(4, 2), pp=4, dp=1, global_batch=8, vocab=51200),
    dict(tp=(8, 1), pp=1, dp=4, global_batch=4, overlap_grad_reduce=False),  # buckets in a row
    dict(tp=(8, 1), pp=1, dp=4, global_batch=8, zero=1),
])  # fmt: skip
def test_where_no_calls_meet_the_joint_iteration_is_the_list_composition_bit_for_bit(layout):
    isolated, joint = both(**layout)
    assert joint.stats["episodes_solved"] == 0
    for name in FIELDS:
        assert getattr(joint, name) == getattr(isolated, name), name


def test_the_cooldown_sends_meet_the_first_buckets_on_the_nics_and_both_slow():
    """TP 8 per node, 2 stages, 2 replicas: stage 1's last backward sends its gradients to
    stage 0 through the same NIC its first gradient buckets are all-reducing over: the joint
    iteration is longer than the isolated one, never shorter."""
    isolated, joint = both(tp=(8, 1), pp=2, dp=2, global_batch=32)
    assert joint.stats["episodes_solved"] >= 1
    assert joint.iteration_time_s > isolated.iteration_time_s
    assert joint.iteration_time_s - isolated.iteration_time_s < 0.01 * isolated.iteration_time_s


def config(tp, pp, dp, global_batch, **options):
    c = JobConfig(TINY, ParallelLayout(DeviceMesh(*tp), pp, dp), 1, global_batch, **options)
    check_job(c)
    return c


CASES = [("ib-cluster:4x8", config((8, 1), 2, 2, 8), "auto"),
         ("ib-cluster:4x8", config((8, 1), 2, 2, 8, zero=1, vocab=4096), "tasks"),
         ("ib-cluster:4x8", config((4, 2), 2, 2, 8), "tasks"),
         ("ib-cluster:2x8", config((2, 2), 2, 2, 8, recompute="full"), "auto")]  # fmt: skip


@pytest.mark.parametrize("spec, job_config, granularity", CASES)
def test_every_shortcut_equals_the_plain_run_of_every_flow(spec, job_config, granularity):
    """The engine (calls alone, episodes with symmetry and memo) against one network of every
    flow and delay of the same graph: every task ends at the same time (1e-9), and every link
    carries the same bytes. The last case's TP groups share NVLink with its DP groups, so its
    passes are their own tasks even under ``auto``."""
    topology, profile = load_machine(spec, job_config.layout.size, None)
    job = joint_job(topology, profile, job_config, granularity=granularity)
    fast = run_graph(job.graph, job.machine, links=True)
    plain = run_plain(job.graph, job.machine)
    assert np.allclose(fast.finish_s, plain.finish_s, rtol=1e-9, atol=0)
    assert np.allclose(fast.link_bytes, plain.link_bytes, rtol=1e-9)
    bare = run_graph(job.graph, job.machine, memo=False, symmetry=False, split=False)
    assert np.allclose(bare.finish_s, fast.finish_s, rtol=1e-9, atol=0)


def test_passes_as_delays_equal_passes_as_their_own_tasks_where_tp_traffic_meets_nothing():
    """TP 8 inside each DGX node, PP and DP over the NICs: the passes' NVLink traffic is
    proven link-disjoint from everything else, and one delay per pass gives the iteration the
    passes' own tasks give (1e-9)."""
    topology, profile = load_machine("ib-cluster:4x8", 32, None)
    c = config((8, 1), 2, 2, 8, zero=1)
    delays = joint_job(topology, profile, c, granularity="auto")
    tasks = joint_job(topology, profile, c, granularity="tasks")
    assert delays.passes_as_delays and not tasks.passes_as_delays
    assert len(tasks.graph) > 50 * len(delays.graph)
    end_delays = run_graph(delays.graph, delays.machine).finish_s[list(delays.tasks.stage_end[0])]
    end_tasks = run_graph(tasks.graph, tasks.machine).finish_s[list(tasks.tasks.stage_end[0])]
    assert np.allclose(end_delays, end_tasks, rtol=1e-9)


def test_passes_that_meet_other_traffic_cannot_be_forced_into_delays():
    from atpsim.errors import SimulationError

    topology, profile = load_machine("ib-cluster:2x8", 16, None)
    with pytest.raises(SimulationError, match="meets other traffic"):
        joint_job(topology, profile, config((2, 2), 2, 2, 8), granularity="passes")


def test_the_isolated_network_is_the_same_iteration_from_the_same_calls():
    """The list composition takes its durations from the same calls' own times."""
    isolated, _ = both(tp=(8, 1), pp=2, dp=2, global_batch=8)
    again = simulate_job("ib-cluster:4x8", MODEL, tp=(8, 1), pp=2, dp=2, micro_batch=1,
                         global_batch=8, network="isolated")  # fmt: skip
    assert replace(again, stats={}) == replace(isolated, stats={})
