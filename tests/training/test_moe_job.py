"""Mixture-of-experts jobs with expert parallelism (issue 24): the all-to-all dispatch and
combine over the expert-parallel group on the one network, the experts split over ``ep``
replicas in memory, the capacity factor's imbalance, the refusals by key, and a dense job
(ep 1) unchanged bit for bit."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.compute.hardware import hardware_profile
from atpsim.compute.models import model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_pass_program, params_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.moe import EP_DIM, expert_capacity
from atpsim.topology.spec import load_topology
from atpsim.training.calls import JobComm
from atpsim.training.config import check_job, job_config
from atpsim.training.job import simulate_job

#: Mixtral 8x7B cut to 2 layers of 1024 tokens: 8 experts, top-2, h 4096.
MIXTRAL = replace(model_preset("mixtral-8x7b"), layers=2, seq=1024)
#: 16 A100s in two 8-GPU nodes: TP 2x1 (with SP), 8 replicas, one stage, no vocabulary.
JOB = {"tp": (2, 1), "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 16, "vocab": 0}
MACHINE = "ib-cluster:2x8"


@pytest.fixture(scope="module")
def runs() -> dict[str, object]:
    """The MoE job at ep 1 and ep 8, and at ep 8 with capacity factor 1.25."""
    return {"ep1": simulate_job(MACHINE, MIXTRAL, ep=1, **JOB),
            "ep8": simulate_job(MACHINE, MIXTRAL, ep=8, **JOB),
            "cf125": simulate_job(MACHINE, replace(MIXTRAL, capacity_factor=1.25), ep=8, **JOB)}  # fmt: skip


def test_an_ep_8_job_runs_and_reports_memory_per_rank(runs):
    ep8 = runs["ep8"]
    assert ep8.iteration_time_s > 0 and ep8.memory_per_rank_bytes > 0 and ep8.fits_memory
    assert ep8.exposed_tp_comm_s > 0  # the all-to-alls cross the nodes' NICs


def test_experts_split_over_ep_replicas_shrink_memory_per_rank(runs):
    """ep 8 holds 1 of the 8 experts per layer: the parameters per rank drop by 2 layers x 7
    experts x (3·h·ffn / 2 + ffn·2/2 + h) (TP 2x1: weights and FC1's bias over 2)."""
    mesh = DeviceMesh(2, 1)
    h, f = MIXTRAL.hidden, MIXTRAL.expert_ffn_size
    expert_per_rank = 3 * h * f / 2 + 2 * f / 2 + h
    assert params_per_rank(MIXTRAL, mesh, 1) - params_per_rank(MIXTRAL, mesh, 8) == 2 * 7 * expert_per_rank
    assert runs["ep8"].memory_per_rank_bytes < runs["ep1"].memory_per_rank_bytes / 2


def test_dispatch_and_combine_bytes_per_moe_layer_are_top_k_tokens_h():
    """Per MoE layer and micro-batch, each rank all-to-alls top_k·(b·s/d1)·(h/d2) elements of 2
    bytes twice forward (dispatch, combine) and twice backward: 2·512·4096·2 = 8 MiB each, over
    the expert-parallel groups (one TP position of 8 consecutive replicas)."""
    per_call = 2 * (1 * 1024 // 2) * 4096 * 2
    assert per_call == 8 * 2**20
    model = replace(MIXTRAL, batch=1)
    for phase in ("fwd", "bwd"):
        program = build_pass_program(model, DeviceMesh(2, 1), 1, phase, sequence_parallel=True, ep=8)
        ops = [op for op in program.comm_ops() if op.dim == EP_DIM]
        assert [op.collective for op in ops] == ["all_to_all"] * 4
        assert [op.bytes for op in ops] == [per_call] * 4
    config = job_config(MIXTRAL, ParallelLayout(DeviceMesh(2, 1), 1, 8, ep=8), 1, 16, vocab=0)
    comm = JobComm(load_topology(MACHINE), hardware_profile("a100-sxm4-80gb"), config)
    call = comm.tp_call(ops[0])
    assert call.groups == ((0, 2, 4, 6, 8, 10, 12, 14), (1, 3, 5, 7, 9, 11, 13, 15))
    assert call.op == "all_to_all" and call.nbytes == per_call


def test_capacity_factor_1_25_is_slower_than_1(runs):
    """The busiest expert takes 1.25x its fair share: capacity ceil(1.25·2·8·1024/8) = 2560
    tokens against 2048, and the experts' GEMMs and TP collectives grow with it."""
    assert expert_capacity(MIXTRAL, 1024, 8) == 2048
    assert expert_capacity(replace(MIXTRAL, capacity_factor=1.25), 1024, 8) == 2560
    assert runs["cf125"].compute_s > runs["ep8"].compute_s
    assert runs["cf125"].iteration_time_s > runs["ep8"].iteration_time_s


def test_model_flops_count_the_active_parameters(runs):
    """MFU's model FLOPs are the top-2 experts' (Megatron-LM), the same at any ep."""
    p = runs["ep8"]
    flops = replace(MIXTRAL, batch=16).step_flops()
    assert p.tflops_per_gpu == pytest.approx(flops / p.iteration_time_s / 16 / 1e12, rel=1e-12)
    assert runs["ep1"].tflops_per_gpu * runs["ep1"].iteration_time_s == pytest.approx(
        p.tflops_per_gpu * p.iteration_time_s, rel=1e-12)


def test_one_network_equals_the_calls_alone_where_none_meet():
    """Without gradient overlap and with one stage no two calls are in flight together, so
    the joint graph (each op built in every replica at once, one task per expert-parallel
    group) gives the isolated composition's iteration."""
    job = {**JOB, "dp": 8, "tp": (1, 1), "global_batch": 8, "overlap_grad_reduce": False}
    joint = simulate_job("nvswitch:8", MIXTRAL, ep=4, network="joint", **job)
    alone = simulate_job("nvswitch:8", MIXTRAL, ep=4, network="isolated", **job)
    assert joint.stats["passes_as_delays"] == 0
    assert joint.iteration_time_s == pytest.approx(alone.iteration_time_s, rel=1e-12)


def test_a_dense_job_at_ep_1_is_todays_bit_for_bit():
    """gpt3-125m on two A100 nodes, TP 2x1 x PP 2 x DP 4 and TP 2x2 x DP 4: the numbers of
    commit cc06109, before mixtures of experts existed."""
    one = simulate_job(MACHINE, "gpt3-125m", tp=(2, 1), pp=2, dp=4, micro_batch=1, global_batch=16, ep=1)
    two = simulate_job(MACHINE, "gpt3-125m", tp=(2, 2), pp=1, dp=4, micro_batch=1, global_batch=8)
    assert (one.iteration_time_s, one.memory_per_rank_bytes) == (0.05688728241083209, 607628544.0)
    assert (two.iteration_time_s, two.memory_per_rank_bytes) == (0.03322724494687426, 510813696.0)


@pytest.mark.parametrize(("model", "layout", "key"), [
    ("gpt3-125m", ParallelLayout(DeviceMesh(2, 1), 1, 8, ep=8), "ep"),
    (MIXTRAL, ParallelLayout(DeviceMesh(1, 1), 1, 6, ep=3), "ep"),
    (replace(MIXTRAL, moe_every=4), ParallelLayout(DeviceMesh(2, 1), 1, 8, ep=8), "model.moe_every"),
])  # fmt: skip
def test_impossible_expert_layouts_are_refused_by_key(model, layout, key):
    config = job_config(model, layout, 1, 16 if layout.dp == 8 else 6, vocab=0)
    with pytest.raises(SimulationError) as error:
        check_job(config)
    assert error.value.key == key


def test_ep_must_divide_dp_and_a_perturbed_ep_job_is_refused():
    with pytest.raises(SimulationError) as error:
        ParallelLayout(DeviceMesh(2, 1), 1, 4, ep=8)
    assert error.value.key == "ep"
    with pytest.raises(SimulationError) as error:
        simulate_job(MACHINE, MIXTRAL, ep=8, perturb={"stragglers": 1, "straggler_factor": 1.5}, **JOB)
    assert error.value.key == "perturb"


def test_plan_searches_ep_from_the_cli():
    """plan --global-batch --ep 1,2 ranks Mixtral's layouts with and without expert
    parallelism (dp 2 at pp 4 x TP 2 takes ep 2); a dense model's --ep 8 is refused by key."""
    runner = CliRunner()
    args = ["plan", "-t", "ib-cluster:2x8,generation=h100", "-m", "mixtral-8x7b", "--global-batch", "16",
            "--ep", "1,2", "--pp", "4", "--max-tp", "2", "--micro-batch", "1", "--network", "isolated",
            "--no-progress"]  # fmt: skip
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "dp 2, ep 2, mb 1" in result.output and "dp 2, mb 1" in result.output
    dense = runner.invoke(main, ["plan", "-t", MACHINE, "-m", "gpt3-125m", "--global-batch", "16",
                                 "--ep", "8", "--no-progress"])  # fmt: skip
    assert dense.exit_code == 2 and "ep: 8 expert-parallel replicas" in dense.output
