"""Unit tests of the validation kernels that need no second process: the chunk scheduler's
order, argument checks, and the whole layer on a world of one rank."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import Replicate, Shard

from validation.comm import Pending
from validation.layer import ATPTransformerLayer, interleave
from validation.linear import COLUMN_FIRST, ATPLinear
from validation.mesh import init_mesh
from validation.numerics import TINY, check_layer
from validation.reference import LayerConfig


class _Logged(Pending):
    def __init__(self, log: list, name: tuple):
        super().__init__()
        self.log, self.name = log, name

    def wait(self) -> None:
        self.log.append(("wait", *self.name))


def _chunk(log: list, chunk: int, collectives: int):
    for step in range(collectives):
        log.append(("launch", chunk, step))
        yield _Logged(log, (chunk, step))
    return torch.tensor(chunk)


def test_interleave_computes_the_next_chunk_while_a_collective_is_in_flight() -> None:
    log: list = []
    results = interleave([_chunk(log, 0, 2), _chunk(log, 1, 2)])
    assert [int(r) for r in results] == [0, 1]
    assert log == [
        ("launch", 0, 0),
        ("launch", 1, 0),
        ("wait", 0, 0),
        ("launch", 0, 1),
        ("wait", 1, 0),
        ("launch", 1, 1),
        ("wait", 0, 1),
        ("wait", 1, 1),
    ]


def test_one_chunk_waits_right_after_each_launch() -> None:
    log: list = []
    interleave([_chunk(log, 0, 2)])
    assert log == [("launch", 0, 0), ("wait", 0, 0), ("launch", 0, 1), ("wait", 0, 1)]


def test_layer_config_rejects_heads_not_dividing_hidden() -> None:
    with pytest.raises(ValueError, match=r"hidden \(30\) must be divisible by heads \(4\)"):
        LayerConfig(hidden=30, heads=4, batch=2, seq=8)


@pytest.fixture
def world_of_one(tmp_path):
    store = dist.FileStore(os.fspath(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield init_mesh(1, 1, "cpu")
    dist.destroy_process_group()


def test_single_rank_layer_equals_reference(world_of_one) -> None:
    checks = check_layer(TINY, world_of_one, chunks=2)
    assert len(checks) == 14
    assert [c.tensor for c in checks if not c.ok] == []


def test_linear_rejects_a_spec_that_is_neither_row_nor_column_first(world_of_one) -> None:
    with pytest.raises(ValueError, match=r"weight_spec \[Replicate\(\), Shard\(dim=0\)\]"):
        ATPLinear(8, 8, world_of_one, (Replicate(), Shard(0)))


def test_linear_local_shapes_follow_the_spec(world_of_one) -> None:
    linear = ATPLinear(8, 24, world_of_one, COLUMN_FIRST)
    assert tuple(linear.weight.shape) == (8, 24)
    assert linear.specs["bias"] == (Shard(0), Replicate())


def test_layer_rejects_chunks_not_dividing_the_batch(world_of_one) -> None:
    with pytest.raises(ValueError, match=r"chunks \(3\) must divide the batch \(2\)"):
        ATPTransformerLayer(TINY, world_of_one, chunks=3)


def test_init_mesh_rejects_a_mesh_of_another_size(world_of_one) -> None:
    with pytest.raises(ValueError, match=r"DeviceMesh\(2, 2\) needs 4 ranks, the world has 1"):
        init_mesh(2, 2, "cpu")


def test_layer_with_dropout_runs_forward_and_backward(world_of_one) -> None:
    config = LayerConfig(hidden=32, heads=4, batch=2, seq=8, dropout=0.1)
    layer = ATPTransformerLayer(config, world_of_one, chunks=2)
    x = torch.randn(2, 8, 32, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())
