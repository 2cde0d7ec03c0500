"""The step scheduler with ranks that are *not* alike (issue 11, section 5): groups whose
members arrive at different times, and a critical rank other than rank 0. Every expected time
below is derived by hand from the rendezvous rule (a group starts when its last member is
ready; its members finish together), not by calling the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from atpsim.compute.hardware import load_profile
from atpsim.compute.models import model_preset
from atpsim.engine.step.run import simulate_program
from atpsim.engine.step.scheduler import CommTiming, simulate_step
from atpsim.parallel.mesh import DeviceMesh
from atpsim.program import CommOp, ComputeOp, StepProgram, Task
from atpsim.topology.custom import build_custom

PAIRS = [[0, 1], [2, 3]]  # dimension 2 of DeviceMesh(2, 2), row-major
CROSS = [[0, 2], [1, 3]]  # dimension 1


def comm(task_id: int, dim: int, deps: tuple[int, ...] = ()) -> Task:
    return Task(task_id, CommOp(f"c{task_id}", "all_reduce", dim, 1e6), 0, "fwd", deps)


def compute(task_id: int, deps: tuple[int, ...] = ()) -> Task:
    return Task(task_id, ComputeOp(f"k{task_id}", "gemm", flops=1.0), 0, "fwd", deps)


def timings(by_dim: dict[int, tuple[list[list[int]], list[float]]]):
    return lambda op: CommTiming.of(*by_dim[op.dim])


def test_a_group_waits_for_its_last_member_and_finishes_together():
    """Pairs [0,1] take 1 s and [2,3] take 3 s, so ranks 0,1 are ready at 1 and ranks 2,3 at 3.
    The cross groups [0,2] and [1,3] (0.5 s) can start only at 3 (their last member) and end
    at 3.5 on both members; a start at the first member's ready time would give 1.5."""
    program = StepProgram((comm(0, 2), comm(1, 1, deps=(0,))))
    timer = timings({2: (PAIRS, [1.0, 3.0]), 1: (CROSS, [0.5, 0.5])})
    timeline = simulate_step(program, 4, lambda op: 0.0, timer)
    assert timeline.finish_s[0].tolist() == [1.0, 1.0, 3.0, 3.0]
    assert timeline.start_s[1].tolist() == [3.0, 3.0, 3.0, 3.0]
    assert timeline.finish_s[1].tolist() == [3.5, 3.5, 3.5, 3.5]


def test_groups_with_different_ready_times_do_not_wait_for_each_other():
    """The cross groups take 0 s ([0,2]) and 2 s ([1,3]), so ranks 1 and 3 are ready at 2 and
    ranks 0 and 2 at 0. Each pair [0,1], [2,3] has one late member: both start at 2 and end at
    3 (1 s); a member finishing at its own ready time plus 1 would end at 1."""
    program = StepProgram((comm(0, 1), comm(1, 2, deps=(0,))))
    timer = timings({1: (CROSS, [0.0, 2.0]), 2: (PAIRS, [1.0, 1.0])})
    timeline = simulate_step(program, 4, lambda op: 0.0, timer)
    assert timeline.finish_s[0].tolist() == [0.0, 2.0, 0.0, 2.0]
    assert timeline.start_s[1].tolist() == [2.0, 2.0, 2.0, 2.0]
    assert timeline.finish_s[1].tolist() == [3.0, 3.0, 3.0, 3.0]


def _pair_topology(slow_bandwidth: str):
    """Four GPUs on one switch, GPUs 2 and 3 behind links of *slow_bandwidth*."""
    nodes = [{"name": f"g{i}", "kind": "gpu"} for i in range(4)] + [{"name": "sw", "kind": "switch"}]
    links = [
        {"a": f"g{i}", "b": "sw", "bandwidth": bw, "latency": "1 us"}
        for i, bw in enumerate(["100 GB/s", "100 GB/s", slow_bandwidth, slow_bandwidth])
    ]
    return build_custom({"nodes": nodes, "links": links})


def _independent_exposed(start: np.ndarray, finish: np.ndarray, comm_ids, compute_ids, rank):
    """Comm time on *rank* outside every compute interval, by brute-force time sampling-free
    interval arithmetic written here from scratch."""
    total = 0.0
    for c in comm_ids:
        lo, hi = start[c, rank], finish[c, rank]
        pieces = [(lo, hi)]
        for k in compute_ids:
            a, b = start[k, rank], finish[k, rank]
            pieces = [p for lo2, hi2 in pieces for p in ((lo2, min(hi2, a)), (max(lo2, b), hi2))
                      if p[1] > p[0]]  # fmt: skip
        total += sum(h - lo3 for lo3, h in pieces)
    return total


def test_exposed_communication_is_measured_on_the_critical_rank():
    """The pair [2,3] sits behind 10x slower links, so its all-reduce ends last: the critical
    rank is 2, whose exposed communication is far longer than rank 0's."""
    topology = _pair_topology("10 GB/s")
    program = StepProgram((compute(0), comm(1, 2), compute(2, deps=(1,))))
    profile = load_profile("a100-sxm4-80gb")
    result = simulate_program(topology, profile, model_preset("M1"), program, DeviceMesh(2, 2), "ring")
    timeline = result.timeline
    assert timeline.critical_rank() == 2
    start, finish = timeline.start_s, timeline.finish_s
    on_critical = _independent_exposed(start, finish, [1], [0, 2], 2)
    on_rank_0 = _independent_exposed(start, finish, [1], [0, 2], 0)
    assert on_critical > 5 * on_rank_0 > 0
    assert result.exposed_comm_s == pytest.approx(on_critical, rel=1e-12)
    assert result.step_time_s >= finish[:, 2].max()
