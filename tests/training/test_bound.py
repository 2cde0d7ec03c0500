"""The compute-only lower bound on an iteration (atpsim.training.bound), which a search uses to
skip layouts: it is never above the simulated iteration, joint or isolated, on layouts of every
kind; it equals the iteration where nothing communicates; and it is close enough to prune."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atpsim.compute.models import ModelConfig, model_preset
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.bound import iteration_lower_bound_s
from atpsim.training.config import check_job, job_config
from atpsim.training.job import load_machine, optimizer_s, run_job

TINY = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
MIXTRAL = replace(model_preset("mixtral-8x7b"), layers=2, seq=1024)
LLAMA = replace(model_preset("llama3.1-8b"), layers=2, seq=2048)


def layout(tp, pp, dp, **kw):
    return ParallelLayout(DeviceMesh(*tp), pp, dp, **kw)


#: (topology, model, layout, micro-batch, global batch, options): every kind of op a job has.
CASES = {
    "1f1b tp8 zero1 vocab": ("ib-cluster:4x8", TINY, layout((8, 1), 2, 2), 1, 8, {"zero": 1, "vocab": 4096}),
    "2d mesh full recompute": ("ib-cluster:2x8", TINY, layout((2, 2), 2, 2), 1, 8, {"recompute": "full"}),
    "interleaved sp": ("ib-cluster:4x8", TINY, layout((4, 1), 2, 4), 1, 16,
                       {"schedule": "interleaved-1f1b", "virtual_stages": 2, "sequence_parallel": True}),
    "gpipe chunks 2": ("ib-cluster:2x8", TINY, layout((4, 1), 2, 2), 2, 16, {"schedule": "gpipe", "chunks": 2}),
    "uneven stages": ("ib-cluster:2x8", TINY, layout((2, 1), 3, 2), 1, 12, {"partition": "auto", "vocab": 8192}),
    "offload": ("ib-cluster:2x8", TINY, layout((4, 1), 2, 2), 1, 8,
                {"recompute": "full", "offload_activations": True}),
    "zero1 buckets after backward": ("ib-cluster:2x8", TINY, layout((4, 1), 2, 2), 1, 8,
                                     {"zero": 1, "overlap_grad_reduce": False, "bucket_bytes": 2e6}),
    "moe ep8": ("ib-cluster:2x8", MIXTRAL, layout((2, 1), 1, 8, ep=8), 1, 16, {"vocab": 0}),
    "context parallel": ("ib-cluster:2x8", LLAMA, layout((4, 1), 2, 1, cp=2), 1, 8, {"vocab": 0}),
}  # fmt: skip


def bound_and_runs(spec, model, parallel, micro_batch, global_batch, options, machine=False):
    """The bound (with *machine*: the one with the topology's collectives) and the joint and
    isolated iterations."""
    config = job_config(model, parallel, micro_batch, global_batch, **options)
    check_job(config)
    topology, profile = load_machine(spec, config.layout.size, None)
    runs = {net: run_job(topology, profile, config, network=net).iteration_time_s
            for net in ("joint", "isolated")}  # fmt: skip
    return iteration_lower_bound_s(config, profile, topology if machine else None), runs


@pytest.mark.parametrize("machine", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_the_bound_is_never_above_the_simulated_iteration(case, machine):
    bound, runs = bound_and_runs(*CASES[case], machine=machine)
    assert 0 < bound
    for network, seconds in runs.items():
        assert bound <= seconds * (1 + 1e-12), network
    # and not a vacuous bound: the compute is most of these iterations
    assert bound > 0.3 * runs["joint"]


def test_the_machines_collectives_tighten_the_bound():
    """TP 8 with sequence parallelism on a DGX-like node, no chunks: each layer's
    reduce-scatters and all-gathers sit between its GEMMs, so their lower bounds add to the
    compute-only bound; still below the iteration."""
    case = ("ib-cluster:1x8", TINY, layout((8, 1), 1, 1), 1, 4, {"sequence_parallel": True, "vocab": 0})
    compute_only, runs = bound_and_runs(*case)
    with_machine, _ = bound_and_runs(*case, machine=True)
    assert compute_only < with_machine <= runs["joint"] * (1 + 1e-12)
    assert with_machine - compute_only > 0.2 * (runs["joint"] - compute_only)


def test_the_bound_is_the_iteration_where_nothing_communicates():
    """One GPU: no TP, no pipeline, no replica; the iteration is its compute and optimizer."""
    bound, runs = bound_and_runs("ib-cluster:1x8", TINY, layout((1, 1), 1, 1), 1, 4, {"vocab": 4096})
    assert runs["joint"] == pytest.approx(bound, rel=1e-12)
    assert runs["isolated"] == pytest.approx(bound, rel=1e-12)


def test_a_pipeline_bound_counts_the_bubble():
    """Four stages of one layer each, 1F1B with nothing communicated: one micro-batch's forward
    runs through the 4 stages and its backward back, 4 (F + B), then the optimizer; each more
    micro-batch adds one F + B to the last stage's span: 4 micro-batches take 7 (F + B)."""
    model = replace(TINY, layers=4)
    _, profile = load_machine("ib-cluster:1x8", 4, None)
    one, four = (job_config(model, layout((1, 1), 4, 1), 1, m, vocab=0, zero=0) for m in (1, 4))
    optimizer = optimizer_s(profile, one, 0)
    single = iteration_lower_bound_s(one, profile) - optimizer
    assert iteration_lower_bound_s(four, profile) - optimizer == pytest.approx(7 / 4 * single, rel=1e-12)


def test_a_pass_on_one_rank_is_the_step_schedulers_list_schedule():
    """The bound times a pass as the step scheduler list-schedules it on one rank, each
    collective at its call's lower bound (the same numbers, bit for bit)."""
    from atpsim.engine.joint.network import JointNetwork
    from atpsim.engine.step.run import compute_timer
    from atpsim.engine.step.scheduler import CommTiming, simulate_step
    from atpsim.training.bound import _pass_span
    from atpsim.training.calls import JobComm
    from atpsim.training.passes import JobPrograms

    config = job_config(TINY, layout((4, 2), 2, 2), 2, 8, chunks=2, vocab=4096)
    topology, profile = load_machine("ib-cluster:4x8", config.layout.size, None)
    timer = compute_timer(profile, TINY.dtype)
    comm, network = JobComm(topology, profile, config), JointNetwork(topology)
    for kind, program in JobPrograms(config).layers_of(0).items():
        expected = simulate_step(program, 1, timer,
                                 lambda op: CommTiming.of([[0]], [network.plan(comm.tp_call(op)).lower_bound_s]))
        assert _pass_span(timer, comm, network)(program) == expected.step_time_s, kind
        assert expected.step_time_s > sum(timer(op) for op in program.compute_ops())
