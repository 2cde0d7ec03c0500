"""`atpsim import nemo`: a NeMo recipe YAML as a job scenario, NeMo's base-config defaults
where the recipe leaves a key out, every value traced to its line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from atpsim.api import AtpsimError, import_job, imported_yaml
from atpsim.cli import main
from atpsim.importers.trace import IGNORED, NOT_MODELLED, UNKNOWN
from atpsim.results.io import read_results
from tests.importers.conftest import comment_of, imported

#: GPT-3 1.3B (24 layers, d_model 2048, 16 heads of 128) on two 8-GPU nodes.
SMALL = """trainer:
  num_nodes: 2
  devices: 8
  precision: bf16-mixed
  max_steps: 100
model:
  micro_batch_size: 1
  global_batch_size: 16
  tensor_model_parallel_size: 8
  pipeline_model_parallel_size: 2
  encoder_seq_length: 2048
  max_position_embeddings: ${.encoder_seq_length}
  num_layers: 24
  hidden_size: 2048
  num_attention_heads: 16
  sequence_parallel: true
  activations_checkpoint_granularity: selective
  use_flash_attention: true
  sequence_paralel: false
  optim:
    name: distributed_fused_adam
    lr: 2.0e-4
exp_manager:
  name: gpt
"""


def with_model(lines: str) -> str:
    """SMALL with *lines* (indented for ``model:``) added to its model section."""
    return SMALL.replace("exp_manager:", lines + "exp_manager:")


def test_recipe_keys_are_traced_to_their_lines(write):
    job, scenario = imported("nemo", write("gpt.yaml", SMALL))
    model, layout = scenario["model"], scenario["parallelism"]
    assert (model["layers"], model["hidden"], model["heads"], model["seq"]) == (24, 2048, 16, 2048)
    assert (layout["devices"], layout["tp"], layout["pp"], layout["dp"]) == (16, [[8, 1]], 2, 1)
    assert (layout["micro_batch"], layout["global_batch"]) == (1, 16)
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (True, "selective", 1)
    assert model["dtype"] == "bf16" and model["vocab"] == 51200  # GPT-2's 50,257 at TP 8
    assert scenario["topology"] == "ib-cluster:2x8,generation=h100"
    text = imported_yaml(job)
    assert comment_of(text, "model.hidden") == f"from model.hidden_size: 2048 ({job.source}:14)"
    assert comment_of(text, "parallelism.pp").startswith("from model.pipeline_model_parallel_size: 2 (")


def test_nemo_defaults_fill_what_the_recipe_leaves_out(write):
    text = "model:\n  num_layers: 12\n  hidden_size: 768\n  num_attention_heads: 12\n  encoder_seq_length: 1024\n"
    job, scenario = imported("nemo", write("bare.yaml", text), gpus=8)
    model, layout = scenario["model"], scenario["parallelism"]
    assert (layout["micro_batch"], layout["global_batch"]) == (4, 8)  # megatron_gpt_config.yaml
    assert layout["tp"] == [[1, 1]] and layout["dp"] == 8
    assert (layout["sequence_parallel"], layout["recompute"], layout["zero"]) == (False, "none", 0)
    assert model["dtype"] == "bf16" and model["tie_embeddings"] is True
    assert model["ffn_hidden"] == 3072 and model["vocab"] == 50304
    assert "megatron_gpt_config.yaml" in job.parallelism["micro_batch"].comment()


def test_an_interpolation_is_followed_and_shown(write):
    text = SMALL.replace("encoder_seq_length: 2048", "encoder_seq_length: ${model.data.seq_length}")
    text = text.replace("exp_manager:", "  data:\n    seq_length: 4096\nexp_manager:")  # in model
    job, scenario = imported("nemo", write("interp.yaml", text))
    assert scenario["model"]["seq"] == 4096
    assert "${model.data.seq_length} (= 4096)" in job.model["seq"].comment()


def test_an_interpolation_naming_no_key_is_refused(write):
    text = SMALL.replace("encoder_seq_length: 2048", "encoder_seq_length: ${model.nowhere}")
    with pytest.raises(AtpsimError) as caught:
        imported("nemo", write("bad.yaml", text))
    assert caught.value.key == "model.encoder_seq_length"


@pytest.mark.parametrize("activation,ffn", [("gelu", None), ("fast-swiglu", "swiglu"),
                                            ("geglu", "swiglu"), ("squared-relu", None)])
def test_gated_activations_are_swiglu_shaped(write, activation, ffn):
    _, scenario = imported("nemo", write("a.yaml", with_model(f"  activation: {activation}\n")))
    assert scenario["model"].get("ffn") == ffn


def test_an_unknown_activation_is_refused_by_key(write):
    with pytest.raises(AtpsimError) as caught:
        imported("nemo", write("a.yaml", with_model("  activation: swiglue\n")))
    assert caught.value.key == "model.activation" and "did you mean 'swiglu'" in caught.value.message


def test_every_key_left_over_is_named(write):
    job, _ = imported("nemo", write("gpt.yaml", SMALL))
    kinds = {f.origin.text.split(":")[0]: f.kind for f in job.findings}
    assert kinds["model.use_flash_attention"] == NOT_MODELLED
    assert kinds["model.sequence_paralel"] == UNKNOWN
    assert kinds["trainer.max_steps"] == IGNORED and kinds["exp_manager"] == IGNORED
    assert kinds["model.optim"] == IGNORED  # its lr; the name was read
    typo = next(f for f in job.findings if f.origin.text.startswith("model.sequence_paralel"))
    assert "did you mean 'model.sequence_parallel'" in typo.why


def test_a_setting_that_agrees_with_atpsim_is_not_a_warning(write):
    job, _ = imported("nemo", write("g.yaml", SMALL.replace("use_flash_attention: true",
                                                            "use_flash_attention: false")))
    assert not any("use_flash_attention" in w for w in job.warnings() if "not modelled" in w)


def test_megatron_bridge_names_are_read(write):
    text = """model:
  num_layers: 24
  hidden_size: 2048
  num_attention_heads: 16
  seq_length: 2048
  gated_linear_unit: true
  recompute_granularity: full
  tensor_model_parallel_size: 8
train:
  micro_batch_size: 2
  global_batch_size: 32
optimizer:
  use_distributed_optimizer: true
"""
    _, scenario = imported("nemo", write("bridge.yaml", text), gpus=16)
    model, layout = scenario["model"], scenario["parallelism"]
    assert model["seq"] == 2048 and model["ffn"] == "swiglu"
    assert (layout["micro_batch"], layout["global_batch"]) == (2, 32)
    assert (layout["recompute"], layout["zero"]) == ("full", 1)


def test_a_missing_model_shape_is_refused(write):
    with pytest.raises(AtpsimError) as caught:
        import_job("nemo", write("m.yaml", SMALL.replace("  num_layers: 24\n", "")), check=False)
    assert caught.value.key == "model.num_layers"


def test_cli_imports_then_runs_the_recipe(write, tmp_path):
    out = tmp_path / "job.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["import", "nemo", str(write("gpt.yaml", SMALL)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "model.sequence_paralel: false (" in result.stderr and "not understood" in result.stderr
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["tp_mesh"], row["pp"], row["dp"], row["zero"]) == ("8x1", 2, 1, 1)
