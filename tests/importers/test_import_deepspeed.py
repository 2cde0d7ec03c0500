"""`atpsim import deepspeed CONFIG --model M`: a DeepSpeed config (batch, ZeRO stage,
precision) with a model named apart, DeepSpeed's batch rules and defaults."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from atpsim.api import AtpsimError, import_job
from atpsim.cli import main
from atpsim.importers.trace import IGNORED, NOT_MODELLED, UNKNOWN
from atpsim.results.io import read_results
from tests.importers.conftest import imported

BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
        "train_batch_size": 16, "zero_optimization": {"stage": 1}, "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}  # fmt: skip


def ds(write, data, name="ds.json"):
    return write(name, json.dumps(data, indent=2))


@pytest.mark.parametrize("given,micro,global_batch", [
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}, 2, 64),   # accumulation 4
    ({"train_batch_size": 64}, 8, 64),                                        # accumulation 1
    ({"train_batch_size": 64, "gradient_accumulation_steps": 4}, 2, 64),
    ({"train_micro_batch_size_per_gpu": 2}, 2, 16),                           # 2 x 1 x DP 8
    ({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3}, 2, 48),
])  # fmt: skip
def test_two_batch_sizes_give_the_third_as_deepspeed_derives_it(write, given, micro, global_batch):
    _, scenario = imported("deepspeed", ds(write, given), model="gpt3-350m", gpus=8)
    layout = scenario["parallelism"]
    assert (layout["micro_batch"], layout["global_batch"], layout["dp"]) == (micro, global_batch, 8)


def test_batch_sizes_that_disagree_are_refused(write):
    path = ds(write, {**BASE, "train_batch_size": 20})  # not 1 x 2 x DP 8
    with pytest.raises(AtpsimError) as caught:
        import_job("deepspeed", path, model="gpt3-350m", gpus=8, check=False)
    assert caught.value.key == "train_batch_size" and caught.value.source == f"{path}:4"


def test_the_config_sets_precision_zero_and_recompute(write):
    job, scenario = imported("deepspeed", ds(write, BASE), model="gpt3-350m", gpus=8)
    assert scenario["model"] == {"name": "gpt3-350m", "preset": "gpt3-350m", "dtype": "bf16"}
    layout = scenario["parallelism"]
    assert (layout["zero"], layout["recompute"], layout["tp"], layout["pp"]) == (1, "none", [[1, 1]], 1)
    assert layout["order"] == ["tp", "dp", "pp"]
    _, scenario = imported("deepspeed", ds(write, {"train_batch_size": 64,
                                                   "activation_checkpointing": {}}),
                           model="gpt3-350m", gpus=8)  # fmt: skip
    assert (scenario["model"]["dtype"], scenario["parallelism"]["zero"]) == ("fp32", 0)
    assert scenario["parallelism"]["recompute"] == "full"


def test_zero_2_is_simulated_as_zero_1_and_said_so_and_3_is_refused(write):
    job, scenario = imported("deepspeed", ds(write, {**BASE, "zero_optimization": {"stage": 2}}),
                             model="gpt3-350m", gpus=8)  # fmt: skip
    assert scenario["parallelism"]["zero"] == 1
    assert [f.kind for f in job.findings if "stage" in f.origin.text] == [NOT_MODELLED]
    with pytest.raises(AtpsimError) as caught:
        import_job("deepspeed", ds(write, {**BASE, "zero_optimization": {"stage": 3}}),
                   model="gpt3-350m", gpus=8, check=False)  # fmt: skip
    assert caught.value.key == "zero_optimization.stage"


@pytest.mark.parametrize("data,key", [
    ({**BASE, "fp16": {"enabled": True}}, "bf16.enabled"),
    ({**BASE, "train_batch_size": "auto"}, "train_batch_size"),
    ({"zero_optimization": {"stage": 1}}, "train_batch_size"),
])  # fmt: skip
def test_bad_configs_are_refused_by_key(write, data, key):
    with pytest.raises(AtpsimError) as caught:
        import_job("deepspeed", ds(write, data), model="gpt3-350m", gpus=8, check=False)
    assert caught.value.key == key


def test_the_model_is_named_apart(write):
    path = ds(write, BASE)
    with pytest.raises(AtpsimError) as caught:
        import_job("deepspeed", path, gpus=8, check=False)
    assert caught.value.key == "model"
    with pytest.raises(AtpsimError, match="did you mean 'gpt3-13b'"):
        import_job("deepspeed", path, model="gpt3-13", gpus=8, check=False)
    hf = write("config.json", json.dumps({"model_type": "llama", "hidden_size": 1024,
                                          "num_attention_heads": 16, "num_hidden_layers": 4,
                                          "intermediate_size": 3584, "vocab_size": 32000,
                                          "max_position_embeddings": 2048}))  # fmt: skip
    _, scenario = imported("deepspeed", path, model=str(hf), gpus=8)
    model = scenario["model"]
    assert (model["hidden"], model["ffn"], model["dtype"], model["seq"]) == (1024, "swiglu", "bf16", 2048)


def test_every_key_left_over_is_named(write):
    data = {**BASE, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}},
            "wall_clock_breakdown": False, "flux": 1}  # fmt: skip
    job, _ = imported("deepspeed", ds(write, data), model="gpt3-350m", gpus=8)
    kinds = {f.origin.text.split(":")[0]: f.kind for f in job.findings}
    assert kinds["zero_optimization.offload_optimizer"] == NOT_MODELLED
    assert kinds["flux"] == UNKNOWN and kinds["optimizer"] == IGNORED
    assert kinds["wall_clock_breakdown"] == IGNORED


def test_options_the_config_gives_are_refused(write):
    with pytest.raises(AtpsimError) as caught:
        import_job("deepspeed", ds(write, BASE), model="gpt3-350m", gpus=8, micro_batch=2)
    assert caught.value.key == "micro_batch"


def test_cli_imports_then_runs_the_config(write, tmp_path):
    out = tmp_path / "job.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["import", "deepspeed", str(ds(write, BASE)), "--model",
                                  "gpt3-350m", "-t", "ib-cluster:1x8,generation=h100", "-o",
                                  str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    run = runner.invoke(main, ["run", str(out), "-o", str(tmp_path / "run"), "--no-progress"])
    assert run.exit_code == 0, run.output
    (row,) = read_results(tmp_path / "run" / "results.csv").to_dict("records")
    assert row["fits_memory"] and row["iteration_time_s"] > 0
    assert (row["tp_mesh"], row["dp"], row["micro_batch"], row["global_batch"]) == ("1x1", 8, 1, 16)


def test_the_topology_gives_the_data_parallel_size(write):
    _, scenario = imported("deepspeed", ds(write, {"train_batch_size": 64}), model="gpt3-350m",
                           topology="ib-cluster:1x8")  # fmt: skip
    assert (scenario["parallelism"]["micro_batch"], scenario["parallelism"]["dp"]) == (8, 8)
    with pytest.raises(AtpsimError) as caught:  # 1 x 2 x DP 16 is not 16
        import_job("deepspeed", ds(write, BASE), model="gpt3-350m", topology="ib-cluster:2x8",
                   check=False)  # fmt: skip
    assert caught.value.key == "train_batch_size"
