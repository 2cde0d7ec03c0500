"""Context parallelism (issue 24): the layout's cp dimension, ring attention's KV exchange as
sendrecv calls on the one network, activations split over cp, FLOPs per GPU as data
parallelism's, the refusals by key, the scenario key and ``plan --cp``; cp 1 unchanged."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.collectives.closed_form import collective_time_s
from atpsim.compute.hardware import hardware_profile
from atpsim.compute.models import model_preset
from atpsim.engine.step.run import simulate_program
from atpsim.errors import ScenarioError, SimulationError
from atpsim.parallel.atp import build_pass_program, program_summary
from atpsim.parallel.context import CP_DIM
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.loader import load_scenario
from atpsim.scenario.sweep import expand_sweep
from atpsim.topology.spec import load_topology
from atpsim.training.config import check_job, job_config
from atpsim.training.job import job_memory, simulate_job
from atpsim.training.layouts import plan_job
from atpsim.training.passes import AllTensorGroups

LLAMA = model_preset("llama3.1-8b")  # 32 layers, h 4096, 32 heads, 8 KV heads, s 8192, bf16
#: Llama 3.1 8B cut to 2 layers of 2048 tokens, for the quick jobs.
SMALL = replace(LLAMA, layers=2, seq=2048)
MACHINE = "ib-cluster:2x8"


def kinds(program, dim=CP_DIM):
    """Each comm op on *dim* of *program* as (name, collective, bytes)."""
    return [(op.name, op.collective, op.bytes) for op in program.comm_ops() if op.dim == dim]


# --- the layout -----------------------------------------------------------------------------


def test_cp_1_places_every_rank_as_before():
    """With cp 1 the rank of (replica, stage, position) is the mixed-radix number of the
    order's digits, as before context parallelism: here tp 2, pp 2, dp 3 in order pp, tp, dp."""
    layout = ParallelLayout(DeviceMesh(2, 1), 2, 3, ("pp", "tp", "dp"))
    assert layout.size == layout.replicas * 4 == 12
    assert [layout.rank(r, s, t) for r in range(3) for s in range(2) for t in range(2)] == \
        [s + 2 * t + 4 * r for r in range(3) for s in range(2) for t in range(2)]
    assert layout.dp_groups()[0] == [0, 4, 8]
    assert sorted(group for group in layout.cp_groups()) == [[r] for r in range(12)]


def test_cp_sits_after_tp_and_the_gradients_reduce_over_dp_times_cp():
    """tp 2, cp 2, pp 2, dp 2 in the default order tp, cp, pp, dp: rank = t + 2c + 4s + 8d; a
    CP group is one (replica, stage, TP position)'s two ranks; a data-parallel group spans
    the dp·cp = 4 pipelines (Megatron-Core's data-and-context-parallel group)."""
    layout = ParallelLayout(DeviceMesh(2, 1), 2, 2, cp=2)
    assert layout.size == 16 and layout.replicas == 4 and layout.full_order == ("tp", "cp", "pp", "dp")
    assert layout.cp_groups()[:3] == [[0, 2], [1, 3], [4, 6]]
    assert layout.dp_groups()[0] == [0, 2, 8, 10]
    assert layout.send_pairs(0, 1)[:3] == [(0, 4), (1, 5), (2, 6)]
    named = ParallelLayout(DeviceMesh(2, 1), 2, 2, ("tp", "pp", "cp", "dp"), cp=2)
    assert named.cp_groups()[0] == [0, 4] and named.stage_of(2) == 1


# --- the ring attention program --------------------------------------------------------------


def test_kv_bytes_per_layer_and_step_are_the_closed_form():
    """Per ring step each rank sends the K and V of its b·s/cp tokens for its KV heads:
    2 · (1 · 8192/2) · (8 · 128 / 4) · 2 B = 4 MiB on TP 4x1 (grouped-query: 8 KV heads, not
    32); cp - 1 = 1 send forward, 1 KV and 2 dK,dV (the last returning them) backward. On a
    2x2 mesh the KV heads split over d1·d2 alike; with 32 KV heads (MHA) the block is 4x."""
    model = replace(LLAMA, layers=1, batch=1)
    block = 2 * (8192 // 2) * (8 * 128 / 4) * 2
    assert block == 4 * 2**20
    for mesh in (DeviceMesh(4, 1), DeviceMesh(2, 2)):
        forward = build_pass_program(model, mesh, 1, "fwd", cp=2)
        backward = build_pass_program(model, mesh, 1, "bwd", cp=2)
        assert kinds(forward) == [("l0.cp0.kv", "sendrecv", block)]
        assert kinds(backward) == [("l0.cp0.kv", "sendrecv", block), ("l0.cp0.dkv", "sendrecv", block),
                                   ("l0.cp1.dkv", "sendrecv", block)]  # fmt: skip
    mha = build_pass_program(replace(model, kv_heads=32), DeviceMesh(4, 1), 1, "fwd", cp=2)
    assert kinds(mha) == [("l0.cp0.kv", "sendrecv", 4 * block)]
    four = build_pass_program(model, DeviceMesh(4, 1), 1, "fwd", cp=4)
    assert [b for _, _, b in kinds(four)] == [block / 2] * 3


def test_each_step_computes_while_the_next_block_travels():
    """Forward at cp 3: a send waits only for the block it forwards (the first for the QKV
    chain, the others for the previous send), a step's attention waits for the block the
    previous send brought; backward, the dK,dV of the last step come home before the QKV
    backward goes on."""
    model = replace(LLAMA, layers=1, batch=1, seq=6 * 1024)
    tasks = build_pass_program(model, DeviceMesh(4, 1), 1, "fwd", cp=3).tasks
    by = {t.op.name: t for t in tasks}
    assert by["l0.cp1.kv"].deps == (by["l0.cp0.kv"].id,)
    assert by["l0.cp0.kv"].id in by["l0.cp1.attn_scores"].deps
    assert by["l0.cp1.kv"].id in by["l0.cp2.attn_scores"].deps
    assert not any(by[f"l0.cp{i}.attn_context"].id in by["l0.cp1.kv"].deps for i in range(3))
    back = {t.op.name: t for t in build_pass_program(model, DeviceMesh(4, 1), 1, "bwd", cp=3).tasks}
    assert back["l0.cp2.dkv"].id in back["l0.cp.dkv_return"].deps
    assert back["l0.cp.dkv_return"].id in back["l0.qkv_dgrad"].deps


@pytest.mark.parametrize("machine,hidden", [(MACHINE, True), (MACHINE + ",nics_per_node=1", False)])
def test_the_exposed_exchange_is_what_the_step_does_not_hide(machine, hidden):
    """Llama's first 2048-token layer at cp 2 on TP 1x1, each CP pair across the two nodes
    (order tp, pp, dp, cp), 8 pairs at once: with a NIC per GPU the KV block (4 MiB) arrives
    while step 0 computes on the rank's own block and nothing is exposed; with one NIC per
    node for all 8 it is exposed by exactly its time less the part step 0 overlapped (from
    the send's start to step 0's end)."""
    model = replace(LLAMA, layers=1, batch=1, seq=2048)
    layout = ParallelLayout(DeviceMesh(1, 1), 1, 8, ("tp", "pp", "dp", "cp"), cp=2)
    program = build_pass_program(model, DeviceMesh(1, 1), 1, "fwd", cp=2)
    result = simulate_program(load_topology(machine), hardware_profile("h100-sxm"), model, program,
                              AllTensorGroups(layout), "auto")  # fmt: skip
    by = {t.op.name: t.id for t in program.tasks}
    timeline = result.timeline
    overlapped = timeline.finish_s[by["l0.cp0.attn_context"], 0] - timeline.start_s[by["l0.cp0.kv"], 0]
    assert result.comm_time_s > 0
    expected = 0.0 if hidden else result.comm_time_s - overlapped
    assert result.exposed_comm_s == pytest.approx(expected, abs=1e-12)
    assert hidden == (result.comm_time_s < overlapped)


def test_sendrecv_closed_form_is_one_step():
    """Each rank sends n bytes once: alpha + n / B (4 MiB at 50 GB/s and 1 us: 84.9 us)."""
    assert collective_time_s("sendrecv", "ring", 4, 4 * 2**20, 50e9, 1e-6) == pytest.approx(1e-6 + 4 * 2**20 / 50e9)


def test_a_cp_2_layout_does_a_dp_2_layouts_model_flops_per_gpu():
    """16 GPUs, TP 4x1, PP 2, global batch 8: cp 2 x dp 1 and cp 1 x dp 2 do the same GEMM
    FLOPs per GPU in an iteration (cp 2: 8 micro-batches of s/2 tokens, attention s²/2 per
    sample in two blocks; dp 2: 4 micro-batches of s tokens), and so the same model FLOPs."""
    def per_gpu(cp, dp):
        config = job_config(LLAMA, ParallelLayout(DeviceMesh(4, 1), 2, dp, cp=cp), 1, 8)
        stage = replace(config.chunk_model)
        flops = sum(program_summary(build_pass_program(stage, DeviceMesh(4, 1), 1, phase, cp=cp))["gemm_flops_per_rank"]
                    for phase in ("fwd", "bwd"))  # fmt: skip
        return flops * config.n_microbatches
    assert per_gpu(2, 1) == pytest.approx(per_gpu(1, 2), rel=1e-12)
    cp2 = simulate_job(MACHINE, SMALL, tp=(4, 1), pp=2, cp=2, global_batch=8, vocab=0, network="isolated")
    dp2 = simulate_job(MACHINE, SMALL, tp=(4, 1), pp=2, dp=2, global_batch=8, vocab=0, network="isolated")
    assert cp2.tflops_per_gpu * cp2.iteration_time_s == pytest.approx(dp2.tflops_per_gpu * dp2.iteration_time_s,
                                                                      rel=1e-12)  # fmt: skip


# --- jobs ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_cp2():
    """Llama 3.1 8B on 16 GPUs, TP 4x1, CP 2, PP 2, on both networks."""
    job = {"tp": (4, 1), "pp": 2, "cp": 2, "global_batch": 8, "hardware": "h100-sxm"}
    return {net: simulate_job(MACHINE, "llama3.1-8b", network=net, **job) for net in ("joint", "isolated")}


def test_llama_8b_with_cp_2_runs_on_the_joint_and_isolated_networks(llama_cp2):
    joint, isolated = llama_cp2["joint"], llama_cp2["isolated"]
    for run in (joint, isolated):
        assert math.isfinite(run.iteration_time_s) and run.iteration_time_s > 0
        assert run.n_microbatches == 8 and run.fits_memory
    assert joint.network == "joint" and isolated.network == "isolated"
    assert joint.stats["tasks"] > 0
    assert joint.iteration_time_s == pytest.approx(isolated.iteration_time_s, rel=0.05)


def test_the_joint_graph_is_the_isolated_composition_where_no_calls_meet():
    """One stage, TP 2x1, CP 2, the gradients reduced after the backward: the ring's sends
    meet no other call in time, so the joint graph (each pass's tasks in both CP pipelines at
    once) gives the isolated composition's iteration."""
    job = {"tp": (2, 1), "pp": 1, "cp": 2, "global_batch": 4, "vocab": 0, "overlap_grad_reduce": False,
           "hardware": "h100-sxm"}  # fmt: skip
    joint = simulate_job(MACHINE, SMALL, network="joint", **job)
    isolated = simulate_job(MACHINE, SMALL, network="isolated", **job)
    assert joint.stats["passes_as_delays"] == 0
    assert joint.iteration_time_s == pytest.approx(isolated.iteration_time_s, rel=1e-12)


def test_activations_halve_at_cp_2():
    """The same TP 4x1 x PP 2 and micro-batches: every activation term is the rank's s/2
    tokens' (the scores its s/2 queries against all keys), so cp 2 keeps exactly half; the
    parameters per rank do not change, and ZeRO-1 shards the optimizer over dp·cp = 2."""
    def memory(cp, zero=0):
        config = job_config(LLAMA, ParallelLayout(DeviceMesh(4, 1), 2, 1, cp=cp), 1, 8, zero=zero)
        return job_memory(config)
    one, two = memory(1), memory(2)
    assert two.activations_bytes == pytest.approx(one.activations_bytes / 2, rel=1e-12)
    assert two.params_per_rank == one.params_per_rank and two.weights_bytes == one.weights_bytes
    assert memory(2, zero=1).optimizer_bytes == pytest.approx(memory(1, zero=0).optimizer_bytes / 2, rel=1e-12)


def test_cp_1_is_the_job_without_cp_bit_for_bit():
    job = {"tp": (2, 1), "pp": 2, "dp": 2, "global_batch": 8, "vocab": 0}
    for network in ("joint", "isolated"):
        plain = simulate_job(MACHINE, SMALL, network=network, **job)
        with_cp = simulate_job(MACHINE, SMALL, network=network, cp=1, **job)
        assert with_cp == plain and with_cp.stats == plain.stats
    assert build_pass_program(SMALL, DeviceMesh(4, 1), 1, "bwd") == build_pass_program(SMALL, DeviceMesh(4, 1), 1, "bwd", cp=1)


# --- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("options,key", [
    ({"cp": 3}, "cp"),                  # 2048 tokens do not split into 6 chunks
    ({"cp": 0}, "cp"),
    ({"cp": 2, "order": ("tp", "xp", "pp", "dp")}, "order"),
    ({"cp": 2, "perturb": {"gpus": [[0, 1.5]]}}, "perturb"),
])  # fmt: skip
def test_refusals_name_their_key(options, key):
    with pytest.raises(SimulationError) as error:
        simulate_job(MACHINE, SMALL, tp=(2, 1), pp=1, global_batch=4, vocab=0, **options)
    assert error.value.key == key


def test_cp_beside_ep_is_refused_by_key_cp():
    with pytest.raises(SimulationError) as error:
        ParallelLayout(DeviceMesh(1, 1), 1, 2, ep=2, cp=2)
    assert error.value.key == "cp"
    with pytest.raises(SimulationError) as error:
        check_job(replace(job_config(SMALL, ParallelLayout(DeviceMesh(1, 1), cp=1), 1, 2),
                          layout=ParallelLayout(DeviceMesh(1, 1), cp=5)))
    assert error.value.key == "cp" and "2·cp = 10" in error.value.message


# --- the scenario key and plan --cp ---------------------------------------------------------------


SCENARIO = """\
name: cp-scenario
topology: "ib-cluster:2x8"
model: {{preset: llama3.1-8b, layers: 2, seq: 2048}}
parallelism:
  devices: 16
  tp: [[4, 1]]
  pp: 2
  sequence_parallel: false
  global_batch: 8
{extra}"""


def scenario(tmp_path: Path, extra: str = ""):
    path = tmp_path / "cp.yaml"
    path.write_text(SCENARIO.format(extra=extra))
    return load_scenario(path)


def test_the_scenario_key_round_trips(tmp_path):
    """cp: [1, 2] makes a point each (dp auto = 16 / (4·cp·2)); the cp 1 point's key is that of
    the scenario without cp; a point's config has its cp, and the point of that config is the
    point."""
    plain = expand_sweep(scenario(tmp_path))
    points = expand_sweep(scenario(tmp_path, "  cp: [1, 2]\n"))
    assert [(p.cp, p.dp) for p in points] == [(1, 2), (2, 1)]
    assert points[0].key() == plain[0].key() and points[1].key() != plain[0].key()
    config = points[1].config()
    assert config.layout.cp == 2 and config.layout.size == 16
    fields = {k: getattr(points[1], k) for k in ("scenario", "topology", "topology_label", "n_devices", "hardware",
                                                  "model", "vocab", "network", "perturb", "neighbour")}  # fmt: skip
    assert type(points[1]).from_config(config, **fields).key() == points[1].key()
    assert points[1].columns(0)["cp"] == 2 and points[0].columns(0)["cp"] == 1


@pytest.mark.parametrize("extra,key", [
    ("  cp: [2, 3]\n", "parallelism.cp[1]"),   # 2048 tokens, 6 chunks
    ("  cp: 2\n  order: [tp, cp, pp]\n", "parallelism.order"),
])  # fmt: skip
def test_scenario_refusals_name_the_key(tmp_path, extra, key):
    with pytest.raises(ScenarioError) as error:
        expand_sweep(scenario(tmp_path, extra))
    assert key in str(error.value)


def test_plan_job_searches_cp():
    plan = plan_job(MACHINE, SMALL, devices=16, global_batch=8, pipelines=(2,), micro_batches=(1,),
                    max_tp=4, context_parallel=(1, 2), vocab=0, network="isolated", sequence_parallel=False)  # fmt: skip
    labels = [c.label for c in plan.candidates]
    assert any(", cp 2," in label for label in labels) and any(", cp" not in label for label in labels)
    assert {c.config.layout.cp * c.config.layout.dp * c.config.layout.tp.size * 2 for c in plan.candidates} == {16}


def test_plan_cli_takes_cp_and_refuses_a_bad_one():
    args = ["plan", "-t", MACHINE, "-m", "llama3.1-8b", "--global-batch", "8", "--pp", "2", "--micro-batch", "1",
            "--max-tp", "4", "--network", "isolated", "--no-sequence-parallel", "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, [*args, "--cp", "1,2"])
    assert result.exit_code == 0, result.output
    assert ", cp 2," in result.output
    bad = CliRunner().invoke(main, [*args, "--cp", "3"])
    assert bad.exit_code == 2 and "cp" in bad.output and "Traceback" not in bad.output
