"""The folded iteration (issue 28): one replica and one TP rank built for all of an unperturbed
job, each comm task standing for every copy's. It is exact: every number equals the unfolded
graph's bit for bit, and the plain run of every flow to 1e-9; where the copies are not in step
(TP groups that cross different switches) the engine says so and the job runs unfolded."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.graph import NotUniform, uniform_end
from atpsim.engine.joint.plain import run_plain
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.job import (
    JobConfig,
    check_job,
    joint_job,
    joint_prediction,
    load_machine,
    run_job,
)
from atpsim.training.perturb import job_perturbation

TINY = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
FIELDS = ("iteration_time_s", "compute_s", "exposed_tp_comm_s", "exposed_dp_comm_s",
          "pipeline_bubble_s", "other_s", "tflops_per_gpu")  # fmt: skip


def config(tp, pp, dp, global_batch, **options):
    c = JobConfig(TINY, ParallelLayout(DeviceMesh(*tp), pp, dp), 1, global_batch, **options)
    check_job(c)
    return c


CASES = [
    ("ib-cluster:4x8", config((8, 1), 2, 2, 8), "auto"),  # passes as delays; sends folded
    ("ib-cluster:4x8", config((8, 1), 2, 2, 8, zero=1, vocab=4096), "tasks"),
    ("ib-cluster:4x8", config((4, 2), 2, 2, 8), "tasks"),
    ("ib-cluster:2x8", config((2, 2), 2, 2, 8, recompute="full"), "auto"),
    ("ib-cluster:4x8", config((4, 1), 2, 4, 16, zero=1), "auto"),  # TP 4 inside a node
    ("ib-cluster:4x8", config((4, 1), 2, 4, 16, schedule="interleaved-1f1b", virtual_stages=2,
                              sequence_parallel=True), "auto"),
]  # fmt: skip


def runs(spec, job_config, granularity):
    topology, profile = load_machine(spec, job_config.layout.size, None)
    out = []
    for fold in ("none", "replicas"):
        job = joint_job(topology, profile, job_config, granularity=granularity, fold=fold)
        run = run_graph(job.graph, job.machine, links=True)
        out.append((job, run, joint_prediction(profile, job_config, job, run)))
    return out


@pytest.mark.parametrize("spec, job_config, granularity", CASES)
def test_the_folded_iteration_is_the_unfolded_one_bit_for_bit(spec, job_config, granularity):
    (job, run, full), (folded_job, folded_run, folded) = runs(spec, job_config, granularity)
    assert len(folded_job.graph) < len(job.graph)
    for name in FIELDS:
        assert getattr(folded, name) == getattr(full, name), name
    assert folded.timeline == full.timeline
    assert np.array_equal(folded_run.link_bytes, run.link_bytes)
    assert folded_run.stats == run.stats  # the same cohorts, episodes and flows


@pytest.mark.parametrize("spec, job_config, granularity", CASES[1:4])
def test_the_folded_iteration_equals_the_plain_run_of_every_flow(spec, job_config, granularity):
    """Against the reference: the unfolded graph with every flow in one network."""
    (job, _, _), (folded_job, folded_run, _) = runs(spec, job_config, granularity)
    plain = run_plain(job.graph, job.machine)
    for r in range(job_config.layout.replicas):
        for s in range(job_config.layout.pp):
            ends = [plain.finish_s[t] for t in job.tasks.op_end[r][s]]
            folded_ends = [folded_run.finish_s[t] for t in folded_job.tasks.op_end[0][s]]
            assert np.allclose(folded_ends, ends, rtol=1e-9, atol=0)
    assert folded_run.end_s == pytest.approx(plain.end_s, rel=1e-9)


@pytest.mark.parametrize("tp", [(8, 1), (4, 2)])
def test_replicas_whose_tp_groups_cross_different_switches_fold_only_their_ranks(tp):
    """TP 8 over two 4-GPU nodes: some replicas' TP groups cross one leaf switch, others the
    spine (a longer path, more latency), so the replicas are not in step: the run folded over
    replicas refuses; folded over each stage's TP ranks only, it is the unfolded graph's bit
    for bit, and that is run_job's answer."""
    job_config = config(tp, 2, 2, 8)
    topology, profile = load_machine("ib-cluster:8x4", job_config.layout.size, None)
    folded = joint_job(topology, profile, job_config, fold="replicas")
    with pytest.raises(NotUniform):
        run_graph(folded.graph, folded.machine)
    job = joint_job(topology, profile, job_config)
    full = joint_prediction(profile, job_config, job, run_graph(job.graph, job.machine))
    ranks = joint_job(topology, profile, job_config, fold="ranks")
    assert len(ranks.graph) < len(job.graph) / 2
    by_ranks = joint_prediction(profile, job_config, ranks, run_graph(ranks.graph, ranks.machine))
    answer = run_job(topology, profile, job_config)
    for name in FIELDS:
        assert getattr(by_ranks, name) == getattr(full, name), name
        assert getattr(answer, name) == getattr(full, name), name
    assert answer.stats["tasks"] == len(ranks.graph)


def test_run_job_folds_an_unperturbed_job_and_not_a_perturbed_one():
    job_config = config((4, 1), 2, 4, 16, zero=1)
    topology, profile = load_machine("ib-cluster:4x8", job_config.layout.size, None)
    unfolded = joint_job(topology, profile, job_config)
    assert run_job(topology, profile, job_config).stats["tasks"] < len(unfolded.graph) / 4

    perturb = job_perturbation(topology, job_config, {"seed": 1, "stragglers": 1, "straggler_factor": 1.2})
    slowed = joint_job(topology, profile, job_config, perturb=perturb, fold="replicas")
    assert len(slowed.graph) == len(unfolded.graph)


def test_a_uniform_task_ends_when_its_copies_do_and_only_if_they_agree():
    """Blocks of *block* groups: each block ends at its last group; all blocks must agree."""
    assert uniform_end(7, np.array([1.0, 2.0, 2.0, 1.5]), 2) == 2.0
    assert uniform_end(7, np.array([3.0, 3.0, 3.0]), 1) == 3.0
    with pytest.raises(NotUniform, match="task 7"):
        uniform_end(7, np.array([1.0, 2.0, 2.0, 2.5]), 2)


def test_the_api_runs_a_job_unfolded_on_request_with_the_same_answer():
    from atpsim.api import simulate_job

    args = dict(tp=(4, 1), pp=2, dp=4, micro_batch=1, global_batch=16, zero=1)
    folded = simulate_job("ib-cluster:4x8", TINY, **args)
    unfolded = simulate_job("ib-cluster:4x8", TINY, fold=False, **args)
    assert unfolded.stats["tasks"] > 4 * folded.stats["tasks"]
    for name in FIELDS:
        assert getattr(folded, name) == getattr(unfolded, name), name
