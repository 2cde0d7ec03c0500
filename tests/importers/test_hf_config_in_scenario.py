"""A scenario's ``model: {hf_config: PATH}``: a Hugging Face config.json's shape as the model,
the keys written beside it overriding it, a bad file refused at the key."""

from __future__ import annotations

import json

import pytest

from atpsim.api import load_scenario
from atpsim.errors import ScenarioError

CONFIG = {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16,
          "num_hidden_layers": 4, "num_key_value_heads": 4, "intermediate_size": 3584,
          "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
          "rope_theta": 10000.0}  # fmt: skip
SCENARIO = """name: hf
topology: "ib-cluster:1x8,generation=h100"
model: {MODEL}
parallelism: {tp: [[4, 1]], micro_batch: 1, global_batch: 8, sequence_parallel: true}
"""


def scenario(tmp_path, model: str):
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "small.json").write_text(json.dumps(CONFIG, indent=2))
    path = tmp_path / "job.yaml"
    path.write_text(SCENARIO.replace("{MODEL}", model))
    return load_scenario(path, expand=False)


def test_the_config_is_the_model_and_keys_beside_it_override(tmp_path):
    (entry,) = scenario(tmp_path, "{hf_config: models/small.json, layers: 2}").model
    config = entry.config()
    assert (config.hidden, config.heads, config.kv_heads, config.ffn_hidden) == (1024, 16, 4, 3584)
    assert (config.ffn, config.tie_embeddings, config.vocab, config.dtype) == ("swiglu", False, 32000, "bf16")
    assert (config.layers, config.seq, config.name) == (2, 4096, "small")


@pytest.mark.parametrize("model,contents", [
    ("{hf_config: models/none.json}", None),
    ("{hf_config: models/small.json}", "{ not json"),
    ("{hf_config: models/small.json}", '{"hidden_size": 1024}'),
])  # fmt: skip
def test_a_bad_config_is_refused_at_the_key(tmp_path, model, contents):
    (tmp_path / "models").mkdir()
    if contents is not None:
        (tmp_path / "models" / "small.json").write_text(contents)
    path = tmp_path / "job.yaml"
    path.write_text(SCENARIO.replace("{MODEL}", model))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, expand=False)
    assert caught.value.key == "model.hf_config"


def test_the_scenario_runs_its_sweep(tmp_path):
    loaded = scenario(tmp_path, "{hf_config: models/small.json, seq: 1024}")
    from atpsim.api import expand_sweep

    (point,) = expand_sweep(loaded)
    assert point.model.hidden == 1024 and point.model.seq == 1024
