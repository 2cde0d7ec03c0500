"""Uneven pipelines in a job (issue 24): ``partition: even | auto | [n1, ..., np]`` through
:func:`atpsim.simulate_job`, the job planner and the stage costs ``auto`` balances."""

from __future__ import annotations

import math

import pytest

from atpsim.api import plan_job, simulate_job
from atpsim.compute.hardware import hardware_profile
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.partition import AUTO
from atpsim.training.config import job_config
from atpsim.training.job import job_memory
from atpsim.training.partition import partition_costs, resolve_partition

#: GPT-3 125M (12 layers, vocabulary 51,200) on 4 stages of TP 2 and 2 replicas: 16 GPUs.
JOB = {"topology": "ib-cluster:2x8", "model": "gpt3-125m", "tp": (2, 1), "pp": 4, "dp": 2,
       "micro_batch": 1, "global_batch": 16}  # fmt: skip
A100 = hardware_profile("a100-sxm4-80gb")  # ib-cluster's


def config(partition: object = "even", **options: object):
    layout = ParallelLayout(DeviceMesh(2, 1), 4, 2)
    return job_config("gpt3-125m", layout, 1, 16, partition=partition, **options)


@pytest.mark.parametrize("network", ["joint", "isolated"])
def test_even_counts_given_as_a_list_are_the_even_job_bit_for_bit(network):
    """[3, 3, 3, 3] runs every stage through its own layer count (the uneven path): the same
    programs, so the same iteration, breakdown and memory as even (today's job) to the bit."""
    even = simulate_job(**JOB, network=network)
    listed = simulate_job(**JOB, network=network, partition=[3, 3, 3, 3])
    for name in ("iteration_time_s", "compute_s", "exposed_tp_comm_s", "exposed_dp_comm_s",
                 "pipeline_bubble_s", "other_s", "memory_per_rank_bytes"):  # fmt: skip
        assert getattr(listed, name) == getattr(even, name), name
    assert even.stage_layers == listed.stage_layers == (3, 3, 3, 3)


def test_an_explicit_split_runs_with_each_stage_its_own_layers():
    """[2, 4, 4, 2] without a vocabulary: the busiest rank is stage 1 (3 micro-batches in
    flight x 4 layers = 12 layers' activations, as even's stage 0 holds 4 x 3, and one
    layer's parameters more): its memory is the job's, and more than even's."""
    listed = simulate_job(**JOB, partition=[2, 4, 4, 2], vocab=0)
    assert listed.stage_layers == (2, 4, 4, 2) and listed.iteration_time_s > 0
    memory = job_memory(config((2, 4, 4, 2), vocab=0))
    assert memory.stage == 1 and memory.layers_in_flight == 12
    assert listed.memory_per_rank_bytes == memory.total_bytes
    even = job_memory(config(vocab=0))
    assert even.stage == 0 and even.layers_in_flight == 12
    assert memory.total_bytes > even.total_bytes


def test_a_stage_without_layers_runs_its_ends_only():
    """[0, 6, 6, 0]: the first stage runs the embedding alone, the last the LM head alone;
    [12, 0] without a vocabulary leaves stage 1 nothing to compute or reduce."""
    ends = simulate_job(**JOB, partition=[0, 6, 6, 0])
    assert ends.stage_layers == (0, 6, 6, 0) and math.isfinite(ends.iteration_time_s)
    bare = simulate_job(**{**JOB, "pp": 2, "dp": 4}, partition=[12, 0], vocab=0)
    assert bare.stage_layers == (12, 0) and math.isfinite(bare.iteration_time_s)


def test_auto_balances_the_stage_costs():
    """On an A100 the LM head and loss of 51,200 tokens cost about 1.13 layers, the embedding
    about 0.01: even's stages cost (3.01, 3, 3, 4.13) layers, and moving one layer off the
    last stage gives (3, 3, 4, 2) with a largest cost of 4 -- the least any split has. The
    iteration is faster for it."""
    costs = partition_costs(config(), A100)
    assert 1.0 < costs.last_s / costs.layer_s < 1.3 and costs.first_s < 0.05 * costs.layer_s
    auto = resolve_partition(config(AUTO), A100)
    assert auto.partition == auto.stage_layers == (3, 3, 4, 2)
    assert max(costs.of(auto.stage_layers)) < max(costs.of((3, 3, 3, 3)))
    balanced = simulate_job(**JOB, partition="auto")
    assert balanced.stage_layers == (3, 3, 4, 2)
    assert balanced.iteration_time_s < simulate_job(**JOB).iteration_time_s


def test_bloom_176b_runs_70_layers_on_12_stages():
    """BLOOM-176B (70 layers, a 250,880-token vocabulary) with TP 4 and full recomputation:
    the LM head costs about 0.75 of a layer and the embedding a little, so the least largest
    stage cost is 6 layers': the middle ten stages take 6, the first and the last 5
    (BLOOM's own split, Megatron-DeepSpeed counting the embeddings as layers)."""
    job = simulate_job("ib-cluster:6x8", "bloom-176b", tp=(4, 1), pp=12, dp=1, micro_batch=1,
                       global_batch=12, recompute="full", network="isolated", partition="auto")  # fmt: skip
    assert job.stage_layers == (5,) + (6,) * 10 + (5,)
    assert sum(job.stage_layers) == 70 and job.iteration_time_s > 0


@pytest.mark.parametrize("options, fragment", [
    ({"partition": [3, 3, 3]}, "names 3 stages; expected one count per pipeline stage (4)"),
    ({"partition": [3, 3, 3, 2]}, "holds 11 layers; expected the model's 12"),
    ({"partition": [6, 6, -1, 1]}, "expected whole layer counts >= 0, got -1"),
    ({"partition": "uneven"}, "expected partition even, auto or a list"),
    ({"partition": "auto", "schedule": "interleaved-1f1b", "virtual_stages": 3},
     "with 3 virtual stages"),
])  # fmt: skip
def test_bad_partitions_are_refused_by_key(options, fragment):
    with pytest.raises(SimulationError) as error:
        simulate_job(**JOB, **options)
    assert error.value.key == "partition" and fragment in str(error.value)


def test_auto_has_no_counts_until_resolved():
    with pytest.raises(SimulationError) as error:
        config(AUTO).stage_layers  # noqa: B018
    assert error.value.key == "partition"


def test_plan_job_tries_depths_that_do_not_divide_the_layers_with_auto():
    """gpt3-125m on 5 GPUs without TP: even tries pp 1 only (5 does not divide 12 layers);
    auto also pp 5, its 12 layers split over the 5 stages."""
    args = {"devices": 5, "global_batch": 10, "max_tp": 1, "micro_batches": (1,), "network": "isolated"}
    even = plan_job("ib-cluster:1x8", "gpt3-125m", **args)
    auto = plan_job("ib-cluster:1x8", "gpt3-125m", **args, partition="auto")
    assert sorted(c.config.layout.pp for c in even.candidates) == [1]
    depths = {c.config.layout.pp: c.config.stage_layers for c in auto.candidates}
    assert sorted(depths) == [1, 5] and sum(depths[5]) == 12
    assert "pp 5 [" in next(c.label for c in auto.candidates if c.config.layout.pp == 5)
    with pytest.raises(SimulationError) as error:
        plan_job("ib-cluster:1x8", "gpt3-125m", **args, partition=[5, 5])
    assert error.value.key == "partition"


def test_auto_splits_a_mixture_of_experts_in_whole_moe_groups():
    """With moe_every 2, auto balances pairs of layers (a dense and an MoE one), so every stage
    holds whole pairs: 12 layers on 2 stages of one node, 6 and 6, and the job runs."""
    from dataclasses import replace

    import atpsim
    from atpsim.compute.models import model_preset

    model = replace(model_preset("mixtral-8x7b"), moe_every=2, layers=12)
    job = atpsim.simulate_job("ib-cluster:2x8", model, tp=(8, 1), pp=2, dp=1, micro_batch=1,
                              global_batch=4, partition="auto", network="isolated")  # fmt: skip
    assert sum(job.stage_layers) == 12 and all(count % 2 == 0 for count in job.stage_layers)
