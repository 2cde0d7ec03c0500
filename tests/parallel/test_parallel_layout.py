"""The DP x PP x TP layout: every GPU is used once, groups partition the ranks, and the order
puts the innermost dimension on consecutive ranks."""

from __future__ import annotations

import itertools

import pytest

from atpsim.errors import SimulationError
from atpsim.parallel.grid import Grid
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh


def partition(groups):
    flat = sorted(itertools.chain.from_iterable(groups))
    return flat == sorted(set(flat))


@pytest.mark.parametrize("order", list(itertools.permutations(("tp", "pp", "dp"))))
def test_every_rank_once_and_groups_partition_the_job(order):
    layout = ParallelLayout(DeviceMesh(2, 2), pp=3, dp=2, order=order)
    ranks = [layout.rank(r, s, t) for r in range(2) for s in range(3) for t in range(4)]
    assert sorted(ranks) == list(range(layout.size)) == list(range(24))
    for groups in (layout.tp_groups(1), layout.tp_groups(2), layout.dp_groups()):
        assert partition(groups) and len(list(itertools.chain.from_iterable(groups))) == 24


def test_default_order_keeps_tp_groups_consecutive_then_stages_then_replicas():
    """Megatron-LM's default: TP innermost. 8-way TP, 2 stages, 2 replicas on 32 GPUs: stage 1
    of replica 0 is GPUs 8..15, replica 1 starts at 16, DP pairs GPU t with t + 16."""
    layout = ParallelLayout(DeviceMesh(8, 1), pp=2, dp=2)
    assert layout.stage_ranks(0, 1) == list(range(8, 16))
    assert layout.stage_ranks(1, 0) == list(range(16, 24))
    assert layout.tp_groups(1)[0] == list(range(8))
    assert layout.dp_groups()[3] == [3, 19]
    assert layout.send_pairs(0, 1)[:2] == [(0, 8), (1, 9)]
    assert [layout.stage_of(r) for r in (0, 7, 8, 15, 16, 31)] == [0, 0, 1, 1, 0, 1]


def test_dp_innermost_puts_replicas_side_by_side():
    layout = ParallelLayout(DeviceMesh(2, 1), pp=1, dp=4, order=("dp", "tp", "pp"))
    assert layout.dp_groups() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert layout.tp_groups(1) == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_atp_mesh_groups_keep_their_placement_inside_each_stage():
    mesh = DeviceMesh(2, 4, "column-major")
    layout = ParallelLayout(mesh, pp=2)
    offset = [[g + 8 for g in group] for group in mesh.groups(2)]
    assert layout.tp_groups(2) == mesh.groups(2) + offset


def test_a_summa_grid_is_a_tp_mesh_too():
    layout = ParallelLayout(Grid(2, 2), pp=1, dp=2)
    assert layout.size == 16
    assert partition(layout.tp_groups(3))


@pytest.mark.parametrize(
    "kwargs,key", [({"pp": 0}, "pp"), ({"dp": 0}, "dp"), ({"order": ("tp", "tp", "dp")}, "order")]
)
def test_bad_layouts_name_their_key(kwargs, key):
    with pytest.raises(SimulationError) as caught:
        ParallelLayout(DeviceMesh(2, 1), **kwargs)
    assert caught.value.key == key


def test_sends_go_between_stages_of_the_pipeline():
    layout = ParallelLayout(DeviceMesh(2, 1), pp=2, dp=2, order=("pp", "tp", "dp"))
    assert layout.send_pairs(1, 0) == [(1, 0), (3, 2), (5, 4), (7, 6)]
    assert [layout.stage_of(r) for r in range(8)] == [0, 1] * 4
    with pytest.raises(SimulationError, match="not one of the 2 pipeline stages"):
        layout.send_pairs(1, 2)
