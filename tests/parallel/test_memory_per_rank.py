"""Memory per rank: ZeRO's 16 bytes per parameter, Korthikanti's activation formula at d2 = 1,
chunking that shrinks only the transient, and points that do not fit flagged."""

import dataclasses

import pytest

from atpsim.compute.hardware import load_profile
from atpsim.compute.models import model_preset
from atpsim.parallel.atp import layer_dims
from atpsim.parallel.memory import (
    activation_bytes_per_layer,
    memory_per_rank,
    params_per_rank,
)
from atpsim.parallel.mesh import DeviceMesh, factorizations

A100 = load_profile("a100-sxm4-80gb")


def test_params_per_layer_match_table_2():
    """Table 2: 12·h² per layer (0.192 billion for M2, in units of 1000·2^20); biases and
    LayerNorms add 13·h, whole on one rank."""
    model = model_preset("M2")
    h = model.hidden
    assert params_per_rank(model, DeviceMesh(1, 1)) == 12 * h * h + 13 * h
    assert 12 * h * h / (1000 * 2**20) == pytest.approx(0.192, abs=5e-4)


@pytest.mark.parametrize("mesh", factorizations(8))
def test_linear_weights_split_over_all_ranks(mesh):
    model = model_preset("M3")
    h = model.hidden
    biases = (3 * h + 4 * h) / mesh.d1 + 2 * h / mesh.d2 + 4 * h / mesh.d2
    assert params_per_rank(model, mesh) == pytest.approx(12 * h * h / 8 + biases)


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    estimate = memory_per_rank(model_preset("M2"), DeviceMesh(8, 1), 1, A100)
    state = estimate.weights_bytes + estimate.gradients_bytes + estimate.optimizer_bytes
    assert state == 16 * estimate.params_per_rank


def test_fp32_training_is_16_bytes_per_parameter_too():
    model = dataclasses.replace(model_preset("M1"), dtype="fp32")
    estimate = memory_per_rank(model, DeviceMesh(4, 1), 1, A100)
    assert estimate.optimizer_bytes == 8 * estimate.params_per_rank
    assert estimate.weights_bytes == 4 * estimate.params_per_rank


@pytest.mark.parametrize("name", ["M1", "M2", "M3", "M4"])
@pytest.mark.parametrize("t", [1, 2, 8])
def test_megatron_activations_match_korthikanti(name, t):
    """d2 = 1, fp16: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes per layer, plus the LayerNorm
    statistics (16 bytes per token) that the formula leaves out."""
    model = model_preset(name)
    s, b, h, a = model.seq, model.batch, model.hidden, model.heads
    korthikanti = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    got = activation_bytes_per_layer(layer_dims(model, DeviceMesh(t, 1), 1), 1)
    assert got == pytest.approx(korthikanti + 16 * s * b)


def test_golden_m2_on_2x4():
    """M2 (h=4096, a=32, b=4, s=2048, fp16) on DeviceMesh(2, 4), T = 8192 tokens:
    hidden-sharded 8192·1024·10 = 83,886,080; QKV 6·8192·512 = 25,165,824; gathered
    2·8192·2048 = 33,554,432; MLP 4·8192·8192 = 268,435,456; attention 5·(4·32/8)·2048² =
    335,544,320; LN statistics 16·8192 = 131,072: 746,717,184 bytes per layer."""
    dims = layer_dims(model_preset("M2"), DeviceMesh(2, 4), 1)
    assert activation_bytes_per_layer(dims, 1) == 746_717_184


def test_chunking_keeps_activations_and_shrinks_the_transient():
    model, mesh = model_preset("M3"), DeviceMesh(4, 2)
    one, four = (memory_per_rank(model, mesh, c, A100) for c in (1, 4))
    assert four.activations_bytes == one.activations_bytes
    assert four.transient_bytes == pytest.approx(one.transient_bytes / 4)
    assert four.total_bytes < one.total_bytes


def test_too_big_points_are_flagged_not_hidden():
    """A GPT-3-sized stack (M4, 96 layers: 174 billion parameters) on 8 GPUs needs ~350 GB of
    weights and Adam state per GPU: it does not fit 80 GiB and says so."""
    model = dataclasses.replace(model_preset("M4"), layers=96)
    estimate = memory_per_rank(model, DeviceMesh(8, 1), 1, A100)
    assert not estimate.fits
    assert estimate.total_bytes > 4 * A100.memory_capacity_bytes
    assert memory_per_rank(model_preset("M2"), DeviceMesh(8, 1), 1, A100).fits


def test_more_ranks_need_less_memory_each():
    model = dataclasses.replace(model_preset("M3"), layers=8)
    totals = [memory_per_rank(model, DeviceMesh(n, 1), 1, A100).total_bytes for n in (1, 2, 4, 8)]
    assert totals == sorted(totals, reverse=True)
