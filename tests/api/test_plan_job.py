"""plan_job: every layout that divides the model and fits, simulated and ranked."""

from __future__ import annotations

import pytest

from atpsim.api import simulate_job
from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.training.layouts import plan_job

SMALL = ModelConfig("gpt-1.3b", hidden=2048, heads=16, layers=24, batch=1, seq=2048)


def test_candidates_are_ranked_and_match_simulate_job():
    plan = plan_job("ib-cluster:2x8", SMALL, devices=16, global_batch=32, pipelines=(1, 2),
                    micro_batches=(1, 2))  # fmt: skip
    times = [c.prediction.iteration_time_s for c in plan.candidates]
    assert times == sorted(times) and len(times) >= 10  # the 10 fastest at least (the rest may be bounded out)
    best = plan.best.config
    again = simulate_job("ib-cluster:2x8", SMALL, tp=best.layout.tp, pp=best.layout.pp,
                         dp=best.layout.dp, micro_batch=best.micro_batch, global_batch=32,
                         sequence_parallel=best.sequence_parallel)  # fmt: skip
    assert again.iteration_time_s == plan.best.prediction.iteration_time_s


def test_layouts_that_do_not_fit_are_pruned_before_simulation():
    """A 40-layer, h = 5120 model (about 13B parameters, 16 bytes each with Adam) cannot sit on
    one 80 GB GPU's worth of TP x PP: every layout with too few model-parallel ranks is cut.
    ZeRO 0 (asked): every rank holds its shard's whole optimizer state (ZeRO-1, the default,
    splits it over the DP replicas); sequence parallelism off, each layout simulated once."""
    big = ModelConfig("13b", hidden=5120, heads=40, layers=40, batch=1, seq=2048)
    plan = plan_job("ib-cluster:2x8", big, devices=16, global_batch=16, pipelines=(1, 2, 4, 8),
                    micro_batches=(1,), zero=0, sequence_parallel=False)  # fmt: skip
    assert plan.pruned["memory"] > 0
    assert all(c.prediction.fits_memory for c in plan.candidates)
    assert all(c.config.layout.tp.size * c.config.layout.pp >= 4 for c in plan.candidates)


def test_indivisible_layouts_are_pruned_and_an_empty_plan_says_so():
    odd = ModelConfig("odd", hidden=1000, heads=10, layers=3, batch=1, seq=128)
    plan = plan_job("ib-cluster:1x8", odd, devices=8, global_batch=7, pipelines=(1,), micro_batches=(1,))
    assert plan.pruned["divisibility"] > 0 and not plan.candidates
    with pytest.raises(SimulationError, match="no layout"):
        plan.best  # noqa: B018


def test_chunk_counts_are_searched_and_match_simulate_job():
    """Chunks 1 and 2 on micro-batches of 1 and 2: a 2-chunk pass needs a micro-batch of 2
    (chunks split the micro-batch), so 2 chunks on micro-batch 1 are pruned by divisibility;
    a chunked candidate's time is simulate_job's with the same chunks (and sequence
    parallelism: the plan tries each 1D layout with and without it)."""
    one = plan_job("ib-cluster:1x8", SMALL, devices=8, global_batch=8, pipelines=(1,),
                   micro_batches=(1, 2), chunk_counts=(1,), exhaustive=True)  # fmt: skip
    both = plan_job("ib-cluster:1x8", SMALL, devices=8, global_batch=8, pipelines=(1,),
                    micro_batches=(1, 2), chunk_counts=(1, 2), exhaustive=True)  # fmt: skip
    chunked = [c for c in both.candidates if c.config.chunks == 2]
    assert chunked and all(c.config.micro_batch == 2 for c in chunked)
    assert len(both.candidates) == len(one.candidates) + len(chunked)
    assert both.pruned["divisibility"] > one.pruned["divisibility"]
    c = chunked[0]
    again = simulate_job("ib-cluster:1x8", SMALL, tp=c.config.layout.tp, pp=1, dp=c.config.layout.dp,
                         micro_batch=2, global_batch=8, chunks=2,
                         sequence_parallel=c.config.sequence_parallel)  # fmt: skip
    assert again.iteration_time_s == c.prediction.iteration_time_s
    assert c.label.endswith(", chunks 2")


@pytest.mark.parametrize("top", [1, 3])
def test_the_bounded_plan_has_the_exhaustive_plans_fastest(top):
    """plan_job simulates layouts in the order of their compute-only bounds and stops where a
    bound passes the *top*-th fastest: its *top* fastest are the exhaustive plan's, exactly,
    and it skipped some (the rest: each bound above the top-th time)."""
    args = dict(devices=16, global_batch=32, pipelines=(1, 2), micro_batches=(1, 2), chunk_counts=(1, 2))
    every = plan_job("ib-cluster:2x8", SMALL, **args, exhaustive=True)
    some = plan_job("ib-cluster:2x8", SMALL, **args, top=top)
    assert every.not_simulated == 0 and some.not_simulated > 0
    assert len(some.candidates) + some.not_simulated == len(every.candidates)
    assert some.unmade == every.unmade
    fastest = [(c.label, c.prediction.iteration_time_s) for c in every.candidates[:top]]
    assert [(c.label, c.prediction.iteration_time_s) for c in some.candidates[:top]] == fastest
