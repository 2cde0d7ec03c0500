"""simulate_job: a DP x PP x TP iteration whose breakdown adds up, whose bubble is the
pipeline's, and whose data-parallel time behaves as overlap says."""

from __future__ import annotations

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.training.job import DEFAULT_BUCKET_BYTES, simulate_job

MODEL = ModelConfig("gpt-1.3b", hidden=2048, heads=16, layers=24, batch=1, seq=2048)


def job(**kwargs):
    args = {"topology": "ib-cluster:4x8", "model": MODEL, "micro_batch": 1} | kwargs
    return simulate_job(**args)


def parts(p):
    return p.compute_s + p.exposed_tp_comm_s + p.pipeline_bubble_s + p.exposed_dp_comm_s + p.other_s


@pytest.mark.parametrize("layout", [dict(tp=(8, 1), pp=2, dp=2), dict(tp=(4, 2), pp=4, dp=1),
                                    dict(tp=(2, 2), pp=1, dp=8)])  # fmt: skip
def test_the_breakdown_adds_up_to_the_iteration(layout):
    p = job(global_batch=32, **layout)
    assert parts(p) == pytest.approx(p.iteration_time_s, rel=1e-12)
    assert min(p.compute_s, p.exposed_tp_comm_s, p.pipeline_bubble_s, p.exposed_dp_comm_s) >= 0
    assert p.samples_per_s == pytest.approx(32 / p.iteration_time_s)


def test_memory_is_the_job_memory_of_the_first_stage():
    from atpsim.parallel.layout import ParallelLayout
    from atpsim.parallel.mesh import DeviceMesh
    from atpsim.training.job import JobConfig, job_memory

    p = job(tp=(8, 1), pp=2, dp=2, global_batch=32, zero=1, recompute="selective")
    config = JobConfig(MODEL, ParallelLayout(DeviceMesh(8, 1), 2, 2), 1, 32, zero=1, recompute="selective")
    assert p.memory_per_rank_bytes == job_memory(config).total_bytes
    assert p.fits_memory  # 1.3B on 32 A100-80GB


def test_the_bubble_is_close_to_the_1f1b_closed_form_on_fast_links():
    """TP 2, 4 stages, all in one DGX A100: a send of 8 MB over NVLink (~30 us) is about 0.3%
    of a stage's pass, so the bubble is (p - 1)/(m + p - 1) of the pipeline within a few %.
    (Over InfiniBand the sends stretch every steady-state round, and the bubble grows.)"""
    p, m = 4, 12
    pred = job(topology="dgx-a100", tp=(2, 1), pp=p, dp=1, global_batch=m)
    pipeline_s = pred.timeline.stages[pred.timeline.critical_stage()].backward_end_s
    assert pred.pipeline_bubble_s / pipeline_s == pytest.approx((p - 1) / (m + p - 1), rel=0.03)


def test_dp_exposed_time_is_the_whole_all_reduce_without_overlap_and_shrinks_with_it():
    """DP only (TP 8 in each node, 4 replicas): with overlap off every bucket starts after the
    backward, so the exposed time is the sum of the bucket all-reduces; with overlap on the
    buckets of the last backward's first layers run under the rest of it. ZeRO 0: gradients
    all-reduced (ZeRO-1, the default, reduce-scatters them instead)."""
    off = job(tp=(8, 1), pp=1, dp=4, global_batch=4, overlap_grad_reduce=False, zero=0)
    on = job(tp=(8, 1), pp=1, dp=4, global_batch=4, overlap_grad_reduce=True, zero=0)
    assert off.exposed_dp_comm_s == pytest.approx(bucket_all_reduces_s(dp=4), rel=1e-12)
    assert on.exposed_dp_comm_s < off.exposed_dp_comm_s
    assert on.iteration_time_s < off.iteration_time_s


def bucket_all_reduces_s(dp: int) -> float:
    """The gradient all-reduces of one layer stack on DeviceMesh(8, 1) over dp replicas (GPU t
    of every node), bucket after bucket, each as NCCL runs it (its latency model is the
    per-call cost)."""
    from atpsim.api import load_topology
    from atpsim.engine.nccl import run_nccl
    from atpsim.parallel.atp import params_per_rank
    from atpsim.parallel.mesh import DeviceMesh

    grads = params_per_rank(MODEL, DeviceMesh(8, 1)) * 2
    full, rest = divmod(grads, DEFAULT_BUCKET_BYTES)
    topology = load_topology("ib-cluster:4x8", 8 * dp)
    groups = [[t + 8 * r for r in range(dp)] for t in range(8)]
    sizes = [DEFAULT_BUCKET_BYTES] * int(full) + ([rest] if rest else [])
    return sum(run_nccl(topology, "all_reduce", "auto", groups, n).time_s for n in sizes)


def test_buckets_split_the_gradients():
    one = job(tp=(8, 1), pp=1, dp=4, global_batch=4, overlap_grad_reduce=False,
              bucket_bytes=10 * DEFAULT_BUCKET_BYTES)  # fmt: skip
    many = job(tp=(8, 1), pp=1, dp=4, global_batch=4, overlap_grad_reduce=False)
    assert many.exposed_dp_comm_s >= one.exposed_dp_comm_s  # more calls, each paying its latency


def test_recomputation_adds_forward_work_to_backward():
    """none < selective (the default) < full: each recomputes more of the forward."""
    none = job(tp=(8, 1), pp=2, dp=2, global_batch=8, recompute="none")
    selective = job(tp=(8, 1), pp=2, dp=2, global_batch=8, recompute="selective")
    full = job(tp=(8, 1), pp=2, dp=2, global_batch=8, recompute="full")
    assert none.iteration_time_s < selective.iteration_time_s < full.iteration_time_s
    assert full.hardware_tflops_per_gpu == pytest.approx(full.tflops_per_gpu * 4 / 3)


def test_sequence_parallelism_runs_and_moves_the_same_forward_bytes():
    """SP off (asked: on is the default on a 1D mesh) against on."""
    plain = job(tp=(8, 1), pp=2, dp=2, global_batch=8, sequence_parallel=False)
    sp = job(tp=(8, 1), pp=2, dp=2, global_batch=8, sequence_parallel=True)
    assert sp.compute_s < plain.compute_s  # LayerNorm and dropout on 1/8 of the tokens
    assert parts(sp) == pytest.approx(sp.iteration_time_s, rel=1e-12)


def test_the_vocabulary_adds_the_head_on_the_last_stage_and_its_flops():
    """GPT-2's 50,257 tokens padded to 51,200 (a multiple of 8·128, as Megatron-LM pads): the LM
    head makes the last stage the slowest, and its 6·b·s·h·V FLOPs join the layers'
    72·b·s·l·h²·(1 + s/6h), a ratio of V/(12·l·h·(1 + s/6h)) (Megatron-LM's V/(16·l·h) term,
    whose 96 already counts recomputation)."""
    plain = job(tp=(8, 1), pp=2, dp=2, global_batch=32)
    head = job(tp=(8, 1), pp=2, dp=2, global_batch=32, vocab=51200)
    assert head.iteration_time_s > plain.iteration_time_s
    flops_ratio = (head.tflops_per_gpu * head.iteration_time_s) / (plain.tflops_per_gpu * plain.iteration_time_s)
    assert flops_ratio == pytest.approx(1 + 51200 / (12 * 24 * 2048 * (1 + 2048 / (6 * 2048))), rel=1e-12)
    assert parts(head) == pytest.approx(head.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,key",
    [
        ({"tp": (8, 1), "pp": 2, "dp": 2, "global_batch": 7}, "global_batch"),
        ({"tp": (8, 1), "pp": 5, "dp": 1}, "pp"),
        ({"tp": (8, 1), "pp": 2, "dp": 4}, "dp"),
        ({"tp": (8, 1), "zero": 3}, "zero"),
        ({"tp": (8, 1), "recompute": "half"}, "recompute"),
        ({"tp": (4, 2), "sequence_parallel": True}, "sequence_parallel"),
        ({"tp": (8, 1), "vocab": -1}, "vocab"),
    ],
)
def test_bad_jobs_name_their_key(kwargs, key):
    with pytest.raises(SimulationError) as caught:
        job(**kwargs)
    assert caught.value.key == key


def test_a_large_joint_graph_is_announced_with_its_cost(monkeypatch, caplog):
    """A TP group smaller than a node shares NVLink with its pipeline neighbour: every pass is
    its own tasks, and a graph that large is announced (not a silent many-minute wait)."""
    import atpsim.training.job as job

    monkeypatch.setattr(job, "LARGE_GRAPH_TASKS", 1000)
    topo = {"builder": "ib-cluster", "gpus_per_node": 8, "nodes": 1}
    with caplog.at_level("WARNING", logger="atpsim.training.job"):
        p = job.simulate_job(topo, "megatron-1.7b", tp=(4, 1), pp=2, dp=1, global_batch=2)
    assert p.stats["passes_as_delays"] == 0 and p.stats["tasks"] >= 1000
    assert "tasks on the joint network" in caplog.text and "network: isolated" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="atpsim.training.job"):
        job.simulate_job(topo, "megatron-1.7b", tp=(8, 1), pp=1, dp=1, global_batch=2)
    assert "tasks on the joint network" not in caplog.text
