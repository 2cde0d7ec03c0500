"""Memory of a DP x PP x TP job, held to a hand count and to Korthikanti et al.'s formulas."""

from __future__ import annotations

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.job_memory import job_memory_per_rank, layers_in_flight
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.pipeline import PipelineShape

MODEL = ModelConfig("hand", hidden=1024, heads=16, layers=8, batch=2, seq=512)
LAYOUT = ParallelLayout(DeviceMesh(4, 1), pp=2, dp=4)


def memory(**kwargs):
    args = {"micro_batch": 2, "n_microbatches": 8, "zero": 1} | kwargs
    return job_memory_per_rank(MODEL, LAYOUT, **args)


def test_hand_count_of_one_configuration():
    """h = 1024, 16 heads, 8 layers, s = 512, fp16; TP 4 (1D), PP 2, DP 4; micro-batch 2, 8 of
    them, 1F1B, ZeRO-1. Per layer and TP rank: linear weights 12h²/4 = 3,145,728, biases
    7h/4 + 2h = 3840, LayerNorms 4h = 4096; 4 layers a stage: 12,614,656 parameters.
    Activations of one layer and micro-batch (T = 1024 tokens): LayerNorm/QKV/FC1 inputs and
    dropout masks T·h·10 = 10,485,760; Q, K, V 3·2·T·h/4 = 1,572,864; attention output
    2·T·h/4 = 524,288; GeLU in/out 2·2·T·4h/4 = 4,194,304; softmax and dropout of 8 (sample,
    head) pairs 5·8·512² = 10,485,760; LayerNorm statistics 16·T = 16,384: 27,279,360 bytes.
    Stage 0 of a 2-stage 1F1B holds 2 micro-batches of 4 layers."""
    got = memory()
    assert got.params_per_rank == 12_614_656
    assert got.weights_bytes == got.gradients_bytes == 2 * 12_614_656
    assert got.optimizer_bytes == 12 * 12_614_656 / 4
    assert got.layers_in_flight == 8
    assert got.activations_bytes == 8 * 27_279_360
    assert got.total_bytes == 4 * 12_614_656 + 3 * 12_614_656 + 8 * 27_279_360


def test_the_embedding_shard_sits_on_the_first_stage():
    assert memory(vocab=32768).params_per_rank == 12_614_656 + 32768 * 1024 / 4


def test_activations_are_korthikantis_sbh_formula():
    """sbh(10 + 24/t + 5as/(ht)) plus the LayerNorm statistics, per layer and micro-batch."""
    s, b, h, a, t = 512, 2, 1024, 16, 4
    per_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) + 16 * s * b
    assert memory().activations_bytes == pytest.approx(8 * per_layer, rel=1e-12)


def test_recomputation_and_sequence_parallelism():
    base = 27_279_360
    assert memory(recompute="selective").activations_bytes == 8 * (base - 10_485_760)
    assert memory(recompute="full").activations_bytes == 8 * 1024 * 1024 * 2
    sp = memory(sequence_parallel=True).activations_bytes
    assert sp == 8 * ((10_485_760 + 16_384) / 4 + 1_572_864 + 524_288 + 4_194_304 + 10_485_760)


def test_zero_stages_shard_more_state():
    totals = [memory(zero=z) for z in (0, 1, 2, 3)]
    assert totals[0].optimizer_bytes == 4 * totals[1].optimizer_bytes
    assert totals[2].gradients_bytes == totals[1].gradients_bytes / 4
    assert totals[3].weights_bytes == totals[2].weights_bytes / 4
    assert [m.total_bytes for m in totals] == sorted((m.total_bytes for m in totals), reverse=True)


@pytest.mark.parametrize(
    "schedule,p,m,v,layers",
    [("1f1b", 4, 8, 1, 16), ("1f1b", 4, 2, 1, 8), ("gpipe", 4, 8, 1, 32), ("interleaved-1f1b", 4, 8, 2, 16 * (1 + 3 / 8))],
)
def test_layers_in_flight_follow_the_schedule(schedule, p, m, v, layers):
    """16 layers: 1F1B holds p micro-batches of L/p layers (m when m < p), GPipe m, and the
    interleaved schedule L(1 + (p - 1)/(p v)) (Korthikanti et al., Section 4.2.3)."""
    assert layers_in_flight(16, PipelineShape(p, m, v), schedule) == pytest.approx(layers)


@pytest.mark.parametrize(
    "kwargs,key",
    [({"zero": 4}, "zero"), ({"recompute": "some"}, "recompute"), ({"virtual_stages": 3}, "pp")],
)
def test_bad_options_name_their_key(kwargs, key):
    with pytest.raises(SimulationError) as caught:
        memory(**kwargs)
    assert caught.value.key == key


def test_sequence_parallelism_needs_1d_tp():
    with pytest.raises(SimulationError) as caught:
        job_memory_per_rank(MODEL, ParallelLayout(DeviceMesh(2, 2)), micro_batch=2,
                            n_microbatches=1, sequence_parallel=True)  # fmt: skip
    assert caught.value.key == "sequence_parallel"
