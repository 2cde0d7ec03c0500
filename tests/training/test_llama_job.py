"""Llama 3.1 jobs (issue 24): a 70B job runs on a small cluster with TP 8 and reports its memory
per rank; FP8 is faster than bf16 by less than 2x; the untied head has no tied all-reduce;
refusals by name (fp8 on an A100, a TP size that does not divide kv_heads); ``atpsim plan``
takes the presets by name."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

import atpsim
from atpsim.cli import main
from atpsim.compute.hardware import load_profile
from atpsim.compute.models import model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.atp import params_per_rank
from atpsim.parallel.head import head_params_per_rank
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology
from atpsim.training.calls import JobComm, tied_call
from atpsim.training.config import JobConfig, job_config, padded_vocab
from atpsim.training.job import job_memory, stage_params_per_rank
from atpsim.training.layouts import prune_reason

#: Two 8-GPU nodes of H100s; Llama 3.1 70B in 2 stages of TP (8, 1), 4 micro-batches of 1.
MACHINE = {"topology": "ib-cluster:2x8", "hardware": "h100-sxm"}
JOB = {"tp": (8, 1), "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 4}
LLAMA_70B = model_preset("llama3.1-70b")


@pytest.fixture(scope="module")
def bf16_and_fp8():
    """The same job in bf16 and fp8 (the preset's vocabulary, 128,256, as by name)."""
    return [atpsim.simulate_job(model=replace(LLAMA_70B, dtype=dtype), vocab=128256, **MACHINE, **JOB)
            for dtype in ("bf16", "fp8")]  # fmt: skip


def test_llama_70b_runs_with_tp_8_and_reports_its_memory_per_rank(bf16_and_fp8):
    """Stage 0 of TP 8 x PP 2 holds 40 layers' shards, 40 x (W/8 + (10240 + 57344)/8 + 6h)
    with W = 855,638,016 linear weights a layer, and the embedding's 128,256·8192/8: about
    4.41 billion parameters, 16 bytes each with DP 1 (ZeRO-1 shards nothing), plus the
    activations; more than an 80 GB H100 holds, so it is reported as not fitting."""
    bf16, _ = bf16_and_fp8
    h = 8192
    layer = (LLAMA_70B.layer_weights() / 8 + (10240 + 2 * 28672) / 8 + 6 * h)
    assert LLAMA_70B.layer_weights() == 855_638_016
    config = JobConfig(LLAMA_70B, ParallelLayout(DeviceMesh(8, 1), 2, 1), 1, 4, vocab=128256)
    memory = job_memory(config)
    assert memory.params_per_rank == pytest.approx(40 * layer + 129024 * h / 8, rel=1e-12)  # padded
    assert bf16.memory_per_rank_bytes == memory.total_bytes
    assert memory.total_bytes > 16 * memory.params_per_rank
    assert not bf16.fits_memory and bf16.iteration_time_s > 0


def test_fp8_is_faster_than_bf16_but_by_less_than_2x(bf16_and_fp8):
    """The linears' GEMMs run at the FP8 peak; the attention core, element-wise ops, the head,
    communication and the bubble do not speed up. Model FLOPs are the same."""
    bf16, fp8 = bf16_and_fp8
    assert 1.0 < bf16.iteration_time_s / fp8.iteration_time_s < 2.0
    assert 1.0 < bf16.compute_s / fp8.compute_s < 2.0
    assert fp8.tflops_per_gpu * fp8.iteration_time_s == pytest.approx(bf16.tflops_per_gpu * bf16.iteration_time_s)


def test_the_untied_head_is_the_last_stages_own_with_no_tied_all_reduce():
    """Untied: no all-reduce between the first and last stage (the output matrix's gradient
    is reduced over DP with the last stage's); tied, the same job has one."""
    config = JobConfig(replace(LLAMA_70B, layers=4), ParallelLayout(DeviceMesh(8, 1), 2, 1), 1, 4, vocab=128256)
    topology, profile = load_topology("ib-cluster:2x8"), load_profile("h100-sxm")
    assert tied_call(JobComm(topology, profile, config), 1.0) is None
    tied = replace(config, model=replace(config.model, tie_embeddings=True))
    assert tied_call(JobComm(topology, profile, tied), 1.0) is not None
    mesh = DeviceMesh(8, 1)
    assert stage_params_per_rank(config, 1) == (
        params_per_rank(replace(LLAMA_70B, layers=2), mesh) + head_params_per_rank(129024, LLAMA_70B, mesh))


def test_fp8_on_an_a100_is_refused_by_name():
    with pytest.raises(SimulationError, match="fp8.*a100-sxm4-80gb") as refused:
        atpsim.simulate_job("ib-cluster:1x8", replace(model_preset("llama3.1-8b"), dtype="fp8", layers=2),
                            tp=(8, 1), global_batch=1)  # fmt: skip
    assert refused.value.key == "model.dtype"


def test_a_tp_size_that_does_not_divide_kv_heads_is_refused_and_pruned():
    """16 ranks over Llama's 8 KV heads: simulate_job refuses it (key tp, naming kv_heads); the
    job planner and the search prune it as indivisible."""
    model = replace(model_preset("llama3.1-8b"), layers=2)
    with pytest.raises(SimulationError, match="kv_heads") as refused:
        atpsim.simulate_job("ib-cluster:2x8", model, tp=(16, 1), global_batch=1, hardware="h100-sxm")
    assert refused.value.key == "tp"
    config = JobConfig(model, ParallelLayout(DeviceMesh(16, 1)), 1, 1)
    assert prune_reason(config, 80e9) == "divisibility"
    assert prune_reason(replace(config, layout=ParallelLayout(DeviceMesh(8, 1))), 80e9) is None


def test_plan_takes_a_llama_preset_by_name_with_its_vocabulary():
    result = CliRunner().invoke(main, [
        "plan", "-t", "ib-cluster:1x8", "--hardware", "h100-sxm", "-m", "llama3.1-8b",
        "--global-batch", "8", "--pp", "4", "--micro-batch", "1", "--max-tp", "2",
        "--network", "isolated", "--no-progress", "--top", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--vocab 128256 (the preset's)" in result.output
    assert "best: tp" in result.output


def test_a_vocabulary_is_padded_as_megatron_lm_pads_it():
    """Up to a multiple of 128 x TP (--make-vocab-size-divisible-by 128): GPT-2's 50,257 is
    51,200 at TP 8 and 52,224 at TP 24; an already padded 51,200 stays at TP 1 to 16."""
    assert [padded_vocab(50257, t) for t in (1, 8, 24)] == [50304, 51200, 52224]
    assert {padded_vocab(51200, t) for t in (1, 2, 4, 8, 16)} == {51200}
    assert padded_vocab(0, 8) == 0


def test_a_jobs_vocabulary_is_the_presets_or_the_models_own():
    """By name, the preset's (Llama 3.1: 128,256); a ModelConfig's own vocab where it gives
    one; a preset's ModelConfig gives none (0), as before."""
    layout = ParallelLayout(DeviceMesh(8, 1))
    # padded as Megatron-LM pads, to a multiple of 128 x 8 at TP 8
    assert job_config("llama3.1-8b", layout, 1, 1).vocab == 129024
    assert job_config(replace(LLAMA_70B, vocab=32000), layout, 1, 1).vocab == 32768
    assert job_config(LLAMA_70B, layout, 1, 1).vocab == 0
    assert job_config(LLAMA_70B, layout, 1, 1, vocab=1024).vocab == 1024
