"""Uneven pipelines, the arithmetic (:mod:`atpsim.parallel.partition`): the D'Hondt-style split
is the exact minimax on hand-checkable cases and against every split of small ones; bad
partitions are refused by key; the per-stage memory follows each stage's own layers."""

from __future__ import annotations

from itertools import product

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.atp import params_per_rank
from atpsim.parallel.head import head_params_per_rank
from atpsim.parallel.job_memory import job_memory_per_rank, job_memory_per_stage
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.partition import (
    balanced_layers,
    check_partition,
    end_costs,
    stage_costs,
    stage_layers,
)


def test_the_balanced_split_of_a_hand_checked_case():
    """10 layers of 1 s on 4 stages whose ends cost 2.5 s (first) and 1.5 s (last). Each
    stage's costs as it takes layers: stage 0 3.5, 4.5, ...; stages 1 and 2 1, 2, 3, 4, ...;
    stage 3 2.5, 3.5, ... The 10 smallest of these are 1, 1, 2, 2, 2.5, 3, 3, 3.5, 3.5 and
    one of the two 4s (the tie goes to the later stage, 2): counts (1, 3, 4, 2), stage costs
    (3.5, 3, 4, 3.5), the largest 4 s; even's (3, 2, 2, 3) would be (5.5, ...) -- no even
    split of 10 over 4 exists anyway."""
    ends = end_costs(4, 2.5, 1.5)
    assert ends == (2.5, 0.0, 0.0, 1.5)
    counts = balanced_layers(10, 1.0, ends)
    assert counts == (1, 3, 4, 2)
    assert stage_costs(counts, 1.0, ends) == (3.5, 3.0, 4.0, 3.5)


def _best_max(layers: int, layer_s: float, ends: tuple[float, ...]) -> float:
    """The least largest stage cost over every split of *layers* (brute force)."""
    splits = (c for c in product(range(layers + 1), repeat=len(ends)) if sum(c) == layers)
    return min(max(stage_costs(c, layer_s, ends)) for c in splits)


@pytest.mark.parametrize("layers, ends", [
    (7, (0.0, 0.0, 0.0)), (9, (0.3, 0.0, 2.2)), (12, (0.01, 0.0, 0.0, 1.13)),
    (5, (4.0, 0.0, 0.0, 4.0)), (3, (0.0, 0.0, 0.0, 0.0, 0.7)), (11, (1.0, 1.0)), (6, (0.5,)),
])  # fmt: skip
def test_the_balanced_split_minimises_the_largest_stage_cost(layers, ends):
    counts = balanced_layers(layers, 1.0, ends)
    assert sum(counts) == layers and min(counts) >= 0
    assert max(stage_costs(counts, 1.0, ends)) == pytest.approx(_best_max(layers, 1.0, ends))


def test_without_ends_the_split_is_even_or_puts_the_extra_layers_last():
    """No end costs: p dividing L gives even's counts; 70 over 12 gives 10 stages of 6 and
    the first two of 5 (ties go to the later stages, which hold fewer micro-batches)."""
    assert balanced_layers(12, 2.0, (0.0,) * 4) == (3, 3, 3, 3) == stage_layers("even", 12, 4)
    assert balanced_layers(70, 1.0, (0.0,) * 12) == (5, 5) + (6,) * 10


@pytest.mark.parametrize("partition, pp, virtual, key, fragment", [
    ((3, 3, 3), 4, 1, "partition", "names 3 stages; expected one count per pipeline stage (4)"),
    ((3, 3, 3, 2), 4, 1, "partition", "holds 11 layers; expected the model's 12"),
    ((6, 6, -2, 2), 4, 1, "partition", "expected whole layer counts >= 0, got -2"),
    ((3, 3, 3.0, 3), 4, 1, "partition", "expected whole layer counts >= 0, got 3.0"),
    ("balanced", 4, 1, "partition", "expected partition even, auto or a list"),
    ("auto", 2, 2, "partition", "with 2 virtual stages"),
    ((6, 6), 2, 2, "partition", "with 2 virtual stages"),
    ("even", 5, 1, "pp", "12 layers do not split over 5 (virtual) pipeline stages"),
])  # fmt: skip
def test_bad_partitions_are_refused_by_key(partition, pp, virtual, key, fragment):
    with pytest.raises(SimulationError) as error:
        check_partition(partition, 12, pp, virtual)
    assert error.value.key == key and fragment in str(error.value)


def test_an_even_partition_with_virtual_stages_is_as_before():
    check_partition("even", 12, 2, 3)  # 12 = 2 stages x 3 chunks x 2 layers
    check_partition((0, 12), 12, 2)  # an empty stage is allowed


MODEL = ModelConfig("m", hidden=512, heads=8, layers=12, batch=1, seq=256)
LAYOUT = ParallelLayout(DeviceMesh(2, 1), pp=4, dp=1)
ARGS = {"micro_batch": 1, "n_microbatches": 8, "schedule": "1f1b", "vocab": 1024, "zero": 0}


def test_each_stage_holds_its_own_layers_in_memory():
    """1F1B with 4 stages and 8 micro-batches: stage s holds 4 - s micro-batches in flight.
    With [2, 4, 4, 2], stage 0 keeps 4 x 2 = 8 layers' activations, stage 1 3 x 4 = 12, stage
    2 2 x 4 = 8, stage 3 1 x 2 = 2; stage 0's parameters are 2 layers' and the embedding's,
    stage 1's 4 layers'. The busiest rank is the stage that needs the most."""
    mesh = LAYOUT.tp
    stages = job_memory_per_stage(MODEL, LAYOUT, stage_layers=(2, 4, 4, 2), **ARGS)
    assert [m.layers_in_flight for m in stages] == [8, 12, 8, 2]
    layer = params_per_rank(ModelConfig("m", hidden=512, heads=8, layers=1, seq=256), mesh)
    vocab = head_params_per_rank(1024, MODEL, mesh)
    assert stages[0].params_per_rank == pytest.approx(2 * layer + vocab)
    assert stages[1].params_per_rank == pytest.approx(4 * layer)
    assert stages[3].params_per_rank == pytest.approx(2 * layer + vocab)  # the tied head's copy
    busiest = max(stages, key=lambda m: m.total_bytes)
    assert busiest.stage == 1
    assert job_memory_per_rank(MODEL, LAYOUT, stage_layers=(2, 4, 4, 2), **ARGS) == busiest


def test_the_even_split_is_the_first_stage_as_before():
    """Even: every stage holds 3 layers, the first the most micro-batches (4 x 3 = 12 layers
    in flight), so the busiest rank is stage 0's, the same with counts given or not."""
    even = job_memory_per_rank(MODEL, LAYOUT, **ARGS)
    assert even.stage == 0 and even.layers_in_flight == 12
    assert job_memory_per_rank(MODEL, LAYOUT, stage_layers=(3, 3, 3, 3), **ARGS) == even
