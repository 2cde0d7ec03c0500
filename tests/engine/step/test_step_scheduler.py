"""The step simulator: in-order streams, dependencies, groups that start on their last member."""

import numpy as np
import pytest

from atpsim.engine.step.scheduler import CommTiming, simulate_step
from atpsim.program import CommOp, ComputeOp, StepProgram, Task

GEMM_A = ComputeOp("a", "gemm")
GEMM_B = ComputeOp("b", "gemm")
ALL_REDUCE = CommOp("f", "all_reduce", dim=1, bytes=1.0)
DURATION_S = {"a": 1.0, "b": 1.5}


def _compute_time(op):
    return DURATION_S[op.name]


def _one_group_of(n_ranks, seconds):
    def timing(op):
        return CommTiming.of([list(range(n_ranks))], [seconds])

    return timing


def _overlap_program():
    """a; f(a) on the comm stream; b (independent of f) on the compute stream."""
    return StepProgram(
        (
            Task(0, GEMM_A, chunk=0, phase="fwd"),
            Task(1, ALL_REDUCE, chunk=0, phase="fwd", deps=(0,)),
            Task(2, GEMM_B, chunk=1, phase="fwd"),
        )
    )


def test_communication_overlaps_independent_compute():
    """a runs [0, 1]; f waits for a and runs [1, 3]; b runs right after a, [1, 2.5].
    Step = 3 s; compute busy 2.5 s; f's 2 s overlap b for 1.5 s, so 0.5 s is exposed."""
    timeline = simulate_step(_overlap_program(), 2, _compute_time, _one_group_of(2, 2.0))
    assert timeline.intervals(0, "compute") == [(0.0, 1.0), (1.0, 2.5)]
    assert timeline.intervals(0, "comm") == [(1.0, 3.0)]
    assert timeline.step_time_s == pytest.approx(3.0)
    assert timeline.busy_s(0, "compute") == pytest.approx(2.5)
    assert timeline.exposed_comm_s(0) == pytest.approx(0.5)


def test_a_dependency_serialises_compute_behind_communication():
    """b depends on f: a [0,1], f [1,3], b [3,4.5]; nothing overlaps, all 2 s are exposed."""
    program = StepProgram(
        (
            Task(0, GEMM_A, chunk=0, phase="fwd"),
            Task(1, ALL_REDUCE, chunk=0, phase="fwd", deps=(0,)),
            Task(2, GEMM_B, chunk=0, phase="fwd", deps=(1,)),
        )
    )
    timeline = simulate_step(program, 1, _compute_time, _one_group_of(1, 2.0))
    assert timeline.step_time_s == pytest.approx(4.5)
    assert timeline.exposed_comm_s(0) == pytest.approx(2.0)


def test_groups_finish_on_their_own_time_and_start_on_their_last_member():
    """Two groups of two; the second group's collective is slower, so only its ranks lag."""

    def timing(op):
        return CommTiming.of([[0, 1], [2, 3]], [1.0, 2.0])

    timeline = simulate_step(_overlap_program(), 4, _compute_time, timing)
    np.testing.assert_allclose(timeline.finish_s[1], [2.0, 2.0, 3.0, 3.0])
    assert timeline.critical_rank() == 2
    assert timeline.step_time_s == pytest.approx(3.0)


def test_comm_stream_is_in_order():
    """Two collectives issued back to back queue on the comm stream even when both are ready."""
    program = StepProgram(
        (
            Task(0, ALL_REDUCE, chunk=0, phase="fwd"),
            Task(1, ALL_REDUCE, chunk=1, phase="fwd"),
        )
    )
    timeline = simulate_step(program, 2, _compute_time, _one_group_of(2, 2.0))
    assert timeline.intervals(1, "comm") == [(0.0, 2.0), (2.0, 4.0)]


def test_chrome_trace_has_a_track_per_rank_and_stream_and_per_dimension():
    from atpsim.report.trace import chrome_trace

    timeline = simulate_step(_overlap_program(), 2, _compute_time, _one_group_of(2, 2.0))
    events = chrome_trace(timeline)["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in spans} == {(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)}
    f_on_rank0 = next(e for e in spans if e["pid"] == 0 and e["name"] == "f")
    assert (f_on_rank0["ts"], f_on_rank0["dur"]) == (1e6, 2e6)


def _brute_exposed(timeline, rank):
    """Every comm interval against every compute interval (the definition, no bisection)."""
    compute = timeline.intervals(rank, "compute")
    exposed = 0.0
    for start, end in timeline.intervals(rank, "comm"):
        exposed += (end - start) - sum(max(0.0, min(end, c1) - max(start, c0)) for c0, c1 in compute)
    return exposed


@pytest.mark.parametrize("seed", range(6))
def test_exposed_comm_by_bisection_is_the_full_scan_bit_for_bit(seed):
    """exposed_comm_s looks only at the compute intervals near each comm interval where the
    compute stream's intervals come one after another (as a stream runs them); the answer is
    the scan over all of them, exactly, and so where the intervals are out of order."""
    from atpsim.engine.step.scheduler import StepTimeline

    rng = np.random.default_rng(seed)
    n = 40
    tasks = tuple(Task(i, GEMM_A if i % 3 else ALL_REDUCE, 0, "fwd") for i in range(n))
    program = StepProgram(tasks)
    is_compute = np.arange(n) % 3 > 0
    steps = rng.uniform(0.0, 1.0, n) * is_compute
    finishes = np.cumsum(steps)  # compute back to back, each within its own step
    starts = finishes - steps * rng.uniform(0.0, 1.0, n)
    comm_starts = rng.uniform(0.0, finishes[-1], n)
    starts = np.where(is_compute, starts, comm_starts)
    finishes = np.where(is_compute, finishes, comm_starts + rng.uniform(0.0, 3.0, n))
    ordered = StepTimeline(program, starts[:, None], finishes[:, None])
    compute = ordered.intervals(0, "compute")
    assert all(a[1] <= b[0] for a, b in zip(compute, compute[1:], strict=False))  # the bisection's case
    assert ordered.exposed_comm_s(0) == _brute_exposed(ordered, 0) > 0
    shuffled = StepTimeline(program, starts[::-1, None].copy(), finishes[::-1, None].copy())
    assert shuffled.exposed_comm_s(0) == _brute_exposed(shuffled, 0)
