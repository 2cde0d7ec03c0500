"""Pipeline schedules and their simulation, held to the closed forms of Megatron-LM's paper
(Narayanan et al., SC'21, Section 2.2): with uniform op times t_f, t_b and free transfers the
step lasts (m + p - 1)(t_f + t_b) for GPipe and 1F1B, i.e. a bubble of (p - 1)/(m + p - 1) of
the step, and m(t_f + t_b) + (p - 1)(t_f + t_b)/v for the interleaved schedule."""

from __future__ import annotations

from collections import Counter

import pytest

from atpsim.engine.step.pipeline import simulate_pipeline
from atpsim.errors import SimulationError
from atpsim.parallel.pipeline import PipelineOp, PipelineShape, schedule_names, stage_orders

T_F, T_B = 1.0, 2.0


def uniform(v: int = 1):
    return lambda stage, op: (T_F if op.kind == "F" else T_B) / v


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 1), (2, 3), (4, 4), (4, 8), (8, 5), (3, 16)])
def test_bubble_is_the_closed_form(schedule, p, m):
    shape = PipelineShape(p, m)
    timeline = simulate_pipeline(stage_orders(schedule, shape), shape, uniform())
    assert timeline.step_time_s == pytest.approx((m + p - 1) * (T_F + T_B), rel=1e-12)
    for stage in range(p):
        assert timeline.bubble_fraction(stage) == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)


@pytest.mark.parametrize("p,m,v", [(2, 2, 2), (4, 4, 2), (4, 8, 2), (4, 8, 4), (2, 6, 3)])
def test_interleaving_divides_the_bubble_by_the_chunks(p, m, v):
    shape = PipelineShape(p, m, v)
    timeline = simulate_pipeline(stage_orders("interleaved-1f1b", shape), shape, uniform(v))
    ideal = m * (T_F + T_B)
    assert timeline.step_time_s == pytest.approx(ideal + (p - 1) * (T_F + T_B) / v, rel=1e-12)


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2)])
def test_every_stage_runs_each_pass_once(schedule, v):
    shape = PipelineShape(4, 8, v)
    for order in stage_orders(schedule, shape):
        counts = Counter((op.kind, op.microbatch, op.chunk) for op in order)
        assert set(counts.values()) == {1}
        assert len(counts) == 2 * 8 * v


def test_1f1b_holds_at_most_p_minus_s_microbatches_in_flight():
    """PipeDream-Flush's memory bound: forwards run ahead of backwards by p - s at most."""
    p, m = 4, 8
    for stage, order in enumerate(stage_orders("1f1b", PipelineShape(p, m))):
        in_flight = peak = 0
        for op in order:
            in_flight += 1 if op.kind == "F" else -1
            peak = max(peak, in_flight)
        assert peak == min(p - stage, m)


def test_transfers_delay_the_pipeline_by_the_hops_of_its_critical_path():
    """p = 2, m = 1, a transfer of d between the stages: F0, d, F1, B1, d, B0."""
    d = 0.25
    shape = PipelineShape(2, 1)
    timeline = simulate_pipeline(stage_orders("1f1b", shape), shape, uniform(),
                                 lambda src, dst, op: d if src != dst else 0.0)  # fmt: skip
    assert timeline.step_time_s == pytest.approx(2 * T_F + 2 * T_B + 2 * d)


def test_slow_stage_sets_the_pace():
    """In steady state the slowest stage's op time bounds the step: (m - 1) of its F + B."""
    p, m = 3, 12
    slow = 2.0

    def op_time(stage, op):
        base = T_F if op.kind == "F" else T_B
        return base * (slow if stage == 1 else 1.0)

    shape = PipelineShape(p, m)
    timeline = simulate_pipeline(stage_orders("1f1b", shape), shape, op_time)
    assert timeline.step_time_s >= m * (T_F + T_B) * slow


@pytest.mark.parametrize(
    "name,shape,key",
    [
        ("1f1b", PipelineShape(0, 4), "pp"),
        ("1f1b", PipelineShape(2, 0), "micro_batches"),
        ("1f1b", PipelineShape(2, 4, 2), "virtual_stages"),
        ("interleaved-1f1b", PipelineShape(4, 6, 2), "micro_batches"),
        ("1f1b-flush", PipelineShape(2, 4), "schedule"),
    ],
)
def test_bad_shapes_name_their_key(name, shape, key):
    with pytest.raises(SimulationError) as caught:
        stage_orders(name, shape)
    assert caught.value.key == key


def test_a_schedule_that_waits_on_itself_is_an_error():
    shape = PipelineShape(2, 1)
    orders = ((PipelineOp("B", 0), PipelineOp("F", 0)), (PipelineOp("F", 0), PipelineOp("B", 0)))
    with pytest.raises(SimulationError, match="waits on itself"):
        simulate_pipeline(orders, shape, uniform())


def test_the_schedules_are_registered():
    assert schedule_names() == ["1f1b", "gpipe", "interleaved-1f1b"]
