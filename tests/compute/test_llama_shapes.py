"""Llama-style layer shapes in ModelConfig (issue 24): grouped-query attention, SwiGLU, untied
embeddings, a model's vocabulary and FP8, each in closed form; defaults are GPT's layer."""

from dataclasses import replace

import pytest

from atpsim.compute.models import (
    GPT3_PRESETS,
    MEGATRON_PRESETS,
    PRESET_VOCAB,
    ModelConfig,
    model_preset,
    preset_names,
)
from atpsim.errors import AtpsimError

#: Llama 3.1 8B's sizes as a plain model (b = 1, s = 8192).
H, HEADS, KV, F, B, S = 4096, 32, 8, 14336, 1, 8192
HEAD_DIM = H // HEADS


def _llama(**changes) -> ModelConfig:
    model = ModelConfig("l", hidden=H, heads=HEADS, batch=B, seq=S, kv_heads=KV, ffn_hidden=F,
                        ffn="swiglu", tie_embeddings=False, dtype="bf16")  # fmt: skip
    return replace(model, **changes)


def test_gqa_shrinks_the_k_and_v_projections_by_2h_times_the_heads_it_drops():
    """K and V are h x kv_heads·head_dim each: 8 of 32 KV heads save 2·h·(h - 8·128) =
    2·4096·3072 = 25,165,824 weights per layer and 6·b·s times that in FLOPs (3 passes,
    2 FLOPs per multiply-add); the attention core (12·b·s²·h) is unchanged."""
    mha, gqa = _llama(kv_heads=None), _llama()
    saved = 2 * H * (H - KV * HEAD_DIM)
    assert saved == 25_165_824
    assert mha.layer_weights() - gqa.layer_weights() == saved
    assert mha.layer_flops() - gqa.layer_flops() == 6 * B * S * saved
    assert gqa.qkv_out == H + 2 * KV * HEAD_DIM == 6144


def test_swiglu_mlp_is_three_h_by_ffn_matrices_with_gate_and_up_fused():
    """SwiGLU: the first GEMM is h -> 2·ffn (gate and up fused), the second ffn -> h, so the
    MLP has 3·h·ffn weights (GeLU: 2·h·ffn); the layer's FLOPs are
    6·b·s·(h·(h + 2·kv) + h² + 3·h·ffn) + 12·b·s²·h."""
    swiglu, gelu = _llama(), _llama(ffn="gelu")
    assert swiglu.fc1_out == 2 * F and gelu.fc1_out == F
    assert swiglu.layer_weights() - gelu.layer_weights() == H * F
    weights = H * (H + 2 * KV * HEAD_DIM) + H * H + 3 * H * F
    assert swiglu.layer_weights() == weights
    assert swiglu.layer_flops() == 6 * B * S * weights + 12 * B * S * S * H


def test_megatron_lm_flops_formula_for_gqa_and_swiglu():
    """Megatron-LM's num_floating_point_operations per layer,
    12·b·s·h²·(1 + kv/h + s/h + (ffn/h)·3/2), is the same count."""
    model = _llama()
    megatron = 12 * B * S * H * H * (1 + KV * HEAD_DIM / H + S / H + F / H * 3 / 2)
    assert model.layer_flops() == pytest.approx(megatron, rel=1e-12)


@pytest.mark.parametrize("name", [*GPT3_PRESETS, *MEGATRON_PRESETS, "M1", "M4"])
def test_gpt_presets_keep_the_dense_gpt_formula(name):
    """Defaults are GPT's layer: 12h² weights and 72·b·s·h² + 12·b·s²·h FLOPs (Narayanan et al.,
    SC 2021, Appendix), bit for bit, and ffn_hidden = 4h is the same model's numbers."""
    model = model_preset(name)
    b, s, h = model.batch, model.seq, model.hidden
    assert model.layer_weights() == 12 * h * h
    assert model.layer_flops() == 72.0 * b * s * h * h + 12.0 * b * s * s * h
    explicit = replace(model, kv_heads=model.heads, ffn_hidden=4 * h)
    assert explicit.layer_flops() == model.layer_flops()
    assert (model.n_kv_heads, model.ffn_size, model.qkv_out) == (model.heads, 4 * h, 3 * h)


def test_as_dict_leaves_out_the_layer_shape_at_gpt_values():
    """A sweep point's key hashes as_dict: a GPT model's mapping is the one it had before the
    layer-shape fields existed; a Llama model's names them."""
    gpt = model_preset("gpt3-1.3b").as_dict()
    assert set(gpt) == {"name", "hidden", "heads", "layers", "batch", "seq", "dtype", "ffn_mult"}
    llama = model_preset("llama3.1-8b").as_dict()
    assert {k: llama[k] for k in ("kv_heads", "ffn_hidden", "ffn", "tie_embeddings")} == {
        "kv_heads": 8, "ffn_hidden": 14336, "ffn": "swiglu", "tie_embeddings": False}  # fmt: skip
    assert "vocab" not in llama


@pytest.mark.parametrize(("name", "parameters"), [
    ("llama3.1-8b", 8_030_261_248),
    ("llama3.1-70b", 70_553_706_496),
    ("llama3.1-405b", 405_853_388_800),
])  # fmt: skip
def test_llama_presets_count_the_released_checkpoints_parameters(name, parameters):
    """Each layer's linears, its two RMSNorm gains (2h), the final norm (h), the embedding and
    the untied output matrix (2·V·h, V = 128,256): the released checkpoints' counts."""
    model = model_preset(name)
    h, vocab = model.hidden, PRESET_VOCAB[name]
    assert vocab == 128256 and not model.tie_embeddings
    assert model.layers * (model.layer_weights() + 2 * h) + h + 2 * vocab * h == parameters


def test_llama_presets_are_presets_with_table_3s_sizes():
    """arXiv:2407.21783 Table 3 and the config.json files: layers, hidden, FFN, heads, 8 KV heads."""
    sizes = {n: (m.layers, m.hidden, m.ffn_size, m.heads, m.n_kv_heads, m.seq, m.dtype, m.ffn)
             for n, m in ((n, model_preset(n)) for n in preset_names() if n.startswith("llama"))}  # fmt: skip
    assert sizes == {
        "llama3.1-8b": (32, 4096, 14336, 32, 8, 8192, "bf16", "swiglu"),
        "llama3.1-70b": (80, 8192, 28672, 64, 8, 8192, "bf16", "swiglu"),
        "llama3.1-405b": (126, 16384, 53248, 128, 8, 8192, "bf16", "swiglu"),
    }


def test_ffn_mult_still_sets_the_mlp_width_and_ffn_hidden_overrides_it():
    base = ModelConfig("m", hidden=1024, heads=16, ffn_mult=2)
    assert base.ffn_size == 2048
    assert replace(base, ffn_hidden=3000).ffn_size == 3000


@pytest.mark.parametrize(("changes", "key"), [
    ({"kv_heads": 5}, "model.kv_heads"),
    ({"kv_heads": 0}, "model.kv_heads"),
    ({"ffn_hidden": 0}, "model.ffn_hidden"),
    ({"ffn": "relu"}, "model.ffn"),
    ({"vocab": -1}, "model.vocab"),
    ({"dtype": "fp4"}, "model.dtype"),
])  # fmt: skip
def test_bad_layer_shapes_are_refused_by_key(changes, key):
    with pytest.raises(AtpsimError, match=key.replace(".", r"\.")):
        _llama(**changes)


def test_fp8_keeps_bf16_tensors_and_an_fp8_weight_copy():
    """FP8 training: activations, gradients and messages in bf16 (2 bytes), the linears' GEMMs
    in fp8, weights 2 + 1 bytes per parameter (bf16 and the FP8 copy)."""
    fp8, bf16 = _llama(dtype="fp8"), _llama()
    assert (fp8.dtype_bytes, fp8.compute_dtype, fp8.linear_dtype, fp8.weight_bytes_per_param) == (2, "bf16", "fp8", 3)
    assert (bf16.dtype_bytes, bf16.compute_dtype, bf16.linear_dtype, bf16.weight_bytes_per_param) == (2, "bf16", None, 2)
    assert fp8.layer_flops() == bf16.layer_flops()
