"""`atpsim import hf`: a Hugging Face config.json as the model of a job scenario, the job
around it from the options and Megatron-LM's and atpsim's defaults."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from atpsim.api import AtpsimError, import_job
from atpsim.cli import main
from atpsim.importers.trace import IGNORED, NOT_MODELLED, UNKNOWN
from atpsim.results.io import read_results
from tests.importers.conftest import imported

#: A Llama-shaped config (small: 4 layers), one key per line so that lines are known.
LLAMA = {
    "model_type": "llama", "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3584,
    "num_attention_heads": 16, "num_hidden_layers": 4, "num_key_value_heads": 4,
    "max_position_embeddings": 4096, "vocab_size": 32000, "torch_dtype": "bfloat16",
    "rope_theta": 10000.0, "bos_token_id": 1,
}  # fmt: skip
#: GPT-2 small's config.json names (Radford et al. 2019: 12 layers, 768, 12 heads, 1024 tokens).
GPT2 = {"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "n_inner": None, "vocab_size": 50257}


def config(write, data, name="config.json"):
    return write(name, json.dumps(data, indent=2))


def test_a_llama_config_is_the_model(write):
    path = config(write, LLAMA)
    job, scenario = imported("hf", path, gpus=8)
    model = scenario["model"]
    assert (model["layers"], model["hidden"], model["heads"], model["kv_heads"]) == (4, 1024, 16, 4)
    assert (model["ffn"], model["ffn_hidden"]) == ("swiglu", 3584)
    assert (model["vocab"], model["tie_embeddings"], model["dtype"], model["seq"]) == (32000, False, "bf16", 4096)
    assert job.model["hidden"].comment() == f"from hidden_size: 1024 ({path}:4)"
    assert "LlamaConfig" not in job.model["tie_embeddings"].comment()  # named by model type
    assert "llama's config class default" in job.model["tie_embeddings"].comment()


def test_gpt2_names_and_defaults(write):
    _, scenario = imported("hf", config(write, GPT2), gpus=8)
    model = scenario["model"]
    assert (model["layers"], model["hidden"], model["heads"], model["seq"]) == (12, 768, 12, 1024)
    assert "ffn" not in model and model["ffn_hidden"] == 4 * 768
    assert model["tie_embeddings"] is True and model["dtype"] == "fp32"


def test_a_mixtral_config_is_a_mixture_of_experts(write):
    mixtral = {**LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}
    _, scenario = imported("hf", config(write, mixtral), gpus=8)
    model = scenario["model"]
    assert (model["experts"], model["top_k"], model["expert_ffn_hidden"]) == (8, 2, 3584)


def test_as_many_kv_heads_as_heads_is_multi_head_attention(write):
    _, scenario = imported("hf", config(write, {**LLAMA, "num_key_value_heads": 16}), gpus=8)
    assert "kv_heads" not in scenario["model"]


def test_the_job_takes_the_options_then_the_defaults(write):
    path = config(write, LLAMA)
    _, scenario = imported("hf", path, gpus=16, tp=4, pp=2, seq=2048)
    layout = scenario["parallelism"]
    assert (layout["tp"], layout["pp"], layout["dp"], layout["micro_batch"]) == ([[4, 1]], 2, 2, 1)
    assert layout["global_batch"] == 2  # micro-batch 1 x DP 2, Megatron-LM's rule
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (True, "selective", 1)
    assert scenario["model"]["seq"] == 2048


def test_every_key_left_over_is_named(write):
    data = {**LLAMA, "head_dim": 128, "sliding_window": None, "flux_capacitor": 3}
    job, _ = imported("hf", config(write, data), gpus=8)
    kinds = {f.origin.text.split(":")[0]: f.kind for f in job.findings}
    assert kinds["flux_capacitor"] == UNKNOWN
    assert kinds["head_dim"] == NOT_MODELLED  # 128 is not 1024 / 16
    assert kinds["rope_theta"] == NOT_MODELLED
    assert kinds["sliding_window"] == IGNORED and kinds["bos_token_id"] == IGNORED
    job, _ = imported("hf", config(write, {**LLAMA, "head_dim": 64}), gpus=8)
    assert [f.kind for f in job.findings if f.origin.text.startswith("head_dim")] == [IGNORED]


def test_bad_configs_are_refused_by_key(write):
    with pytest.raises(AtpsimError) as caught:
        import_job("hf", write("c.json", '{\n  "hidden_size": 1024,\n}'), gpus=8, check=False)
    assert "line 3" in caught.value.message
    no_hidden = {k: v for k, v in LLAMA.items() if k != "hidden_size"}
    with pytest.raises(AtpsimError) as caught:
        import_job("hf", config(write, no_hidden), gpus=8, check=False)
    assert caught.value.key == "hidden_size"
    with pytest.raises(AtpsimError) as caught:
        import_job("hf", config(write, LLAMA), gpus=8, model="gpt3-13b", check=False)
    assert caught.value.key == "model"


def test_cli_imports_then_runs_the_model(write, tmp_path):
    out = tmp_path / "job.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["import", "hf", str(config(write, LLAMA)), "-o", str(out),
                                  "-t", "ib-cluster:1x8,generation=h100", "--tp", "4",
                                  "--global-batch", "8", "--seq", "2048"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "rope_theta: 10000.0 (" in result.stderr
    assert "tp: [[4, 1]]  # from --tp 4 (atpsim import option)" in out.read_text()
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["tp_mesh"], row["dp"], row["seq"], row["global_batch"]) == ("4x1", 2, 2048, 8)


def test_a_tp_size_the_kv_heads_refuse_names_the_option(write):
    with pytest.raises(AtpsimError) as caught:
        import_job("hf", config(write, LLAMA), topology="ib-cluster:1x8", tp=8, global_batch=8)
    assert caught.value.key == "tp" and "kv_heads" in caught.value.message
