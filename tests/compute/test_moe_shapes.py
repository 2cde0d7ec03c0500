"""Mixture-of-experts shapes in ModelConfig (issue 24): experts, top_k, moe_every,
expert_ffn_hidden and capacity_factor in closed form; Mixtral 8x7B's published parameter
counts; each bad value refused by its key; a dense model unchanged."""

from dataclasses import replace

import pytest

from atpsim.compute.models import PRESET_VOCAB, ModelConfig, model_preset
from atpsim.errors import AtpsimError

#: Mixtral 8x7B's sizes (arXiv:2401.04088, Table 1).
H, KV_HIDDEN, F, E, LAYERS, VOCAB = 4096, 8 * 128, 14336, 8, 32, 32000
ATTENTION = H * (H + 2 * KV_HIDDEN) + H * H  # Q, K, V and the output projection
EXPERT = 3 * H * F  # SwiGLU: gate, up and down


def _moe(**changes) -> ModelConfig:
    """A small MoE model: h 1024, 8 heads, 4 layers, 4 experts of 2048, GeLU."""
    base = ModelConfig("m", hidden=1024, heads=8, layers=4, batch=2, seq=256, experts=4,
                       expert_ffn_hidden=2048)  # fmt: skip
    return replace(base, **changes)


def test_mixtral_preset_is_table_1():
    model = model_preset("mixtral-8x7b")
    assert (model.hidden, model.heads, model.n_kv_heads, model.layers) == (H, 32, 8, LAYERS)
    assert (model.experts, model.router_top_k, model.expert_ffn_size, model.ffn) == (E, 2, F, "swiglu")
    assert (model.tie_embeddings, model.seq, model.dtype, PRESET_VOCAB["mixtral-8x7b"]) == (False, 4096, "bf16", VOCAB)
    assert model.moe_layers == LAYERS


def test_mixtral_has_46_7b_parameters_and_12_9b_active():
    """Total: 32 x (attention 41,943,040 + router 4096·8 + 8 experts of 3·4096·14336) + two
    32000 x 4096 embeddings = 46,702,526,464 (Mistral AI: 46.7B). Active (top-2, no router):
    32 x (attention + 2 experts) + embeddings = 12,878,610,432 (12.9B)."""
    model = model_preset("mixtral-8x7b")
    embeddings = 2 * VOCAB * H
    assert model.param_count(VOCAB) == LAYERS * (ATTENTION + H * E + E * EXPERT) + embeddings == 46_702_526_464
    assert model.param_count(VOCAB, active=True) == LAYERS * (ATTENTION + 2 * EXPERT) + embeddings == 12_878_610_432


def test_moe_layer_flops_count_the_top_k_experts_and_no_router():
    """Megatron-LM's model FLOPs: 6·b·s·(attention + top_k·expert) + 12·b·s²·h per MoE layer;
    capacity padding and the router are not model FLOPs."""
    model = replace(model_preset("mixtral-8x7b"), batch=1)
    b, s = model.batch, model.seq
    assert model.moe_layer_flops() == 6 * b * s * (ATTENTION + 2 * EXPERT) + 12 * b * s * s * H
    assert model.step_flops() == LAYERS * model.moe_layer_flops()
    assert replace(model, capacity_factor=1.5).step_flops() == model.step_flops()


def test_moe_every_k_th_layer_is_moe_from_layer_0():
    """moe_every 2 on 4 layers: layers 0 and 2 (Megatron-Core's moe_layer_freq); the step's
    FLOPs are 2 dense layers' and 2 MoE layers'."""
    model = _moe(moe_every=2)
    assert [model.is_moe_layer(layer) for layer in range(4)] == [True, False, True, False]
    assert model.moe_layers == 2
    assert model.step_flops() == 2 * model.layer_flops() + 2 * model.moe_layer_flops()
    dense_weights, moe_weights = model.layer_weights(), model.moe_layer_weights()
    assert model.stack_weights() == 2 * dense_weights + 2 * moe_weights


def test_expert_width_defaults_to_ffn_hidden_and_top_k_to_2():
    model = ModelConfig("m", hidden=512, heads=8, experts=4, ffn_hidden=1536, ffn="swiglu")
    assert (model.expert_ffn_size, model.expert_fc1_out, model.router_top_k) == (1536, 3072, 2)
    assert model.expert_weights() == 3 * 512 * 1536


def test_top_1_moe_of_one_expert_is_the_dense_layer():
    """One expert, top-1: the active weights are the dense layer's."""
    model = _moe(experts=1, top_k=1, expert_ffn_hidden=None)
    assert model.moe_layer_weights(active=True) == model.layer_weights()
    assert model.moe_layer_flops() == model.layer_flops()


def test_dense_model_keeps_its_mapping_and_numbers():
    """A dense model (experts 0) hashes as before: as_dict has no MoE field, and its step
    FLOPs are layers x layer_flops."""
    gpt = model_preset("gpt3-1.3b")
    assert not gpt.is_moe and gpt.moe_layers == 0
    assert not {"experts", "top_k", "moe_every", "expert_ffn_hidden", "capacity_factor"} & set(gpt.as_dict())
    assert gpt.step_flops() == gpt.layers * gpt.layer_flops()
    assert gpt.param_count(0) == gpt.layers * 12 * gpt.hidden**2


@pytest.mark.parametrize(("changes", "key"), [
    ({"experts": -1}, "model.experts"),
    ({"top_k": 0}, "model.top_k"),
    ({"top_k": 5}, "model.top_k"),
    ({"moe_every": 0}, "model.moe_every"),
    ({"expert_ffn_hidden": 0}, "model.expert_ffn_hidden"),
    ({"capacity_factor": 0.5}, "model.capacity_factor"),
    ({"capacity_factor": float("inf")}, "model.capacity_factor"),
])  # fmt: skip
def test_bad_moe_values_are_refused_by_key(changes, key):
    with pytest.raises(AtpsimError, match=key.replace(".", r"\.")):
        _moe(**changes)
