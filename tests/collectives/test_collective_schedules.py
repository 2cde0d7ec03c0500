"""Schedules as data: step counts, bytes per step, who talks to whom, dependencies."""

import numpy as np
import pytest

from atpsim.collectives.registry import (
    algorithm_names,
    build_schedule,
    default_algorithm,
    op_names,
    pattern,
)
from atpsim.errors import SimulationError

N = 1024.0


def per_rank_sent(schedule):
    return np.bincount(schedule.src, weights=schedule.transfer_bytes)


def test_names():
    assert op_names() == ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
                          "sendrecv"]
    assert algorithm_names("all_reduce") == ["bidirectional-ring", "rabenseifner", "ring"]
    assert "bidirectional-ring" in algorithm_names("reduce_scatter")
    assert "pairwise" in algorithm_names()
    assert default_algorithm("all_to_all") == "pairwise"


def test_ring_all_reduce_is_2p_minus_2_steps_of_n_over_p():
    s = build_schedule("all_reduce", "ring", [[3, 1, 2, 0]], N)
    assert len(s.steps) == 6 and s.n_transfers == 24
    assert s.steps[0].src.tolist() == [3, 1, 2, 0] and s.steps[0].dst.tolist() == [1, 2, 0, 3]
    assert set(s.transfer_bytes.tolist()) == {N / 4}


def test_bidirectional_ring_sends_half_each_way_in_two_lanes():
    """p = 4: each of the 6 steps has 0->1, 1->2, 2->3, 3->0 (lane 0) and 0->3, 1->0, 2->1,
    3->2 (lane 1), each n/2/4 bytes; every rank sends 2(p-1)/p n in all, as the ring does."""
    s = build_schedule("all_reduce", "bidirectional-ring", [[0, 1, 2, 3]], N)
    assert len(s.steps) == 6 and s.n_transfers == 48
    first = s.steps[0]
    assert first.src.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert first.dst.tolist() == [1, 2, 3, 0, 3, 0, 1, 2]
    assert first.lanes.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert set(s.transfer_bytes.tolist()) == {N / 8}
    assert per_rank_sent(s) == pytest.approx([2 * 3 / 4 * N] * 4)
    two = build_schedule("all_reduce", "bidirectional-ring", [[0, 1]], N)
    assert two.n_transfers == 4 and two.steps[0].lane is None  # p = 2: the plain ring


def test_lanes_do_not_wait_for_each_other():
    """Bidirectional ring on 3 ranks: step-1 transfer 0->1 (lane 0, flow 6) waits only for
    lane-0 transfers of step 0 at ranks 0 and 1: 0->1 (flow 0), 2->0 (flow 2), 1->2 (flow 1)."""
    s = build_schedule("all_reduce", "bidirectional-ring", [[0, 1, 2]], N)
    indptr, indices = s.dependencies()
    assert sorted(set(indices[indptr[6]:indptr[7]].tolist())) == [0, 1, 2]
    assert sorted(set(indices[indptr[9]:indptr[10]].tolist())) == [3, 4, 5]


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_halves_then_doubles(p):
    """Power of two: log2 p halving steps of n/2, n/4, ..., then the doubling mirror; each
    rank sends 2(p-1)/p n in all, as the ring does."""
    s = build_schedule("all_reduce", "rabenseifner", [list(range(p))], N)
    k = p.bit_length() - 1
    sizes = [float(step.nbytes[0]) for step in s.steps]
    halving = [N / 2 ** (i + 1) for i in range(k)]
    assert sizes == halving + halving[::-1]
    assert all(np.all(step.nbytes == step.nbytes[0]) for step in s.steps)
    assert per_rank_sent(s) == pytest.approx([2 * (p - 1) / p * N] * p)
    assert s.steps[0].dst.tolist() == [r ^ 1 for r in range(p)]


def test_rabenseifner_non_power_of_two_folds_and_unfolds():
    """p = 6: ranks 0 and 2 fold into 1 and 3 (n bytes), the core 1, 3, 4, 5 runs, then 1 and
    3 send the result back."""
    s = build_schedule("all_reduce", "rabenseifner", [list(range(6))], N)
    first, last = s.steps[0], s.steps[-1]
    assert first.src.tolist() == [0, 2] and first.dst.tolist() == [1, 3]
    assert last.src.tolist() == [1, 3] and last.dst.tolist() == [0, 2]
    assert first.nbytes.tolist() == [N, N]
    core = set(np.concatenate([st.src for st in s.steps[1:-1]]).tolist())
    assert core == {1, 3, 4, 5}


@pytest.mark.parametrize("p", [3, 5, 6, 7, 12])
@pytest.mark.parametrize("op", ["reduce_scatter", "all_gather"])
def test_rabenseifner_pieces_add_up_for_any_p(op, p):
    """Every rank ends with its piece (RS) or the whole buffer (AG): total bytes received by
    a rank in all-gather is at least n - n/p; in reduce-scatter every rank's piece arrives."""
    s = build_schedule(op, "rabenseifner", [list(range(p))], N)
    received = np.bincount(s.dst, weights=s.transfer_bytes, minlength=p)
    if op == "all_gather":
        assert np.all(received >= N - N / p - 1e-9)
    else:
        assert np.all(received >= N / p - 1e-9)


def test_broadcast_and_all_to_all():
    binomial = build_schedule("broadcast", "binomial", [[5, 6, 7, 8, 9]], N)
    assert [st.src.tolist() for st in binomial.steps] == [[5], [5, 6], [5]]
    assert [st.dst.tolist() for st in binomial.steps] == [[6], [7, 8], [9]]
    chain = build_schedule("broadcast", "ring", [[0, 1, 2]], 3 * 2**20)
    assert len(chain.steps) == 2 + 3 - 1
    a2a = build_schedule("all_to_all", "pairwise", [list(range(4))], N)
    assert len(a2a.steps) == 3
    assert per_rank_sent(a2a).tolist() == [3 * N / 4] * 4


def test_groups_are_merged_step_by_step():
    s = build_schedule("all_reduce", "ring", [[0, 1], [2, 3, 4]], N)
    assert len(s.steps) == 4
    assert s.steps[0].group.tolist() == [0, 0, 1, 1, 1]
    assert s.steps[3].group.tolist() == [1, 1, 1]


def test_dependencies_follow_the_rendezvous_rule():
    """Ring on 3 ranks: step-1 transfer 0->1 waits for everything ranks 0 and 1 did in step 0:
    0->1 (flow 0), 2->0 (flow 2) for rank 0; 0->1 again and 1->2 (flow 1) for rank 1."""
    s = build_schedule("all_reduce", "ring", [[0, 1, 2]], N)
    indptr, indices = s.dependencies()
    assert indptr[:4].tolist() == [0, 0, 0, 0]
    assert sorted(indices[indptr[3]:indptr[4]].tolist()) == [0, 0, 1, 2]


def test_a_rank_sitting_out_waits_for_its_last_step():
    """Rabenseifner p = 3: rank 0 folds into 1 in step 0, sits out the core, and the unfold
    1 -> 0 depends on rank 0's fold (its last step) and rank 1's last core step."""
    s = build_schedule("all_reduce", "rabenseifner", [[0, 1, 2]], N)
    indptr, indices = s.dependencies()
    last = s.n_transfers - 1
    deps = set(indices[indptr[last]:indptr[last + 1]].tolist())
    assert 0 in deps
    assert s.step_index[sorted(deps)[-1]] == len(s.steps) - 2


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: build_schedule("all_reduse", "ring", [[0, 1]], N), "did you mean 'all_reduce'"),
        (lambda: build_schedule("all_reduce", "rign", [[0, 1]], N), "did you mean 'ring'"),
        (lambda: build_schedule("all_reduce", "ring", [[0, 1], [1, 2]], N), "groups must be disjoint"),
        (lambda: build_schedule("all_reduce", "ring", [[]], N), "at least one rank"),
        (lambda: build_schedule("all_reduce", "ring", [[0, 1]], -1), "size >= 0"),
    ],
)
def test_bad_requests_name_the_problem(call, message):
    with pytest.raises(SimulationError, match=message):
        call()


def test_patterns_are_cached_and_read_only():
    a = pattern("all_reduce", "ring", 8, N)
    assert a is pattern("all_reduce", "ring", 8, N)
    with pytest.raises(ValueError):
        a[0].src[0] = 3
