"""The ATP layer equals the single-process reference on every mesh of 4 ranks (issue 6).

One spawn of 4 gloo processes (FileStore in a temp dir) runs every (mesh, chunks) case and
writes each rank's checks to JSON; the tests below read them. The spawn also records the
torch process groups of each mesh dimension, checked against atpsim's DeviceMesh convention,
and runs the layer once with the conjugate operators the way Section 3.2.1's prose states
them (f1, f3 reducing over dimension 1 in the forward pass), which must fail; and it records
every collective one forward + backward issues, which must be the collectives of atpsim's own
program for the layer (:func:`atpsim.parallel.atp.build_step_program`), so the simulator
models the kernel that is measured.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import asdict

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from atpsim.compute.models import ModelConfig
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh
from validation.comm import F2, F4, Conjugate
from validation.mesh import init_mesh
from validation.numerics import TINY, check_all, check_layer

WORLD = 4
MESHES = [(4, 1), (2, 2), (1, 4)]
CHUNKS = [1, 2]
PROSE_READING = {
    "qkv": Conjugate("f1 as in the prose", forward_dim=1, backward_dim=2),
    "proj": F2,
    "fc1": Conjugate("f3 as in the prose", forward_dim=1, backward_dim=2),
    "fc2": F4,
}


def _worker(rank: int, store_path: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, WORLD)
    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD, timeout=timeout)
    groups, collectives = {}, {}
    for d1, d2 in MESHES:
        mesh = init_mesh(d1, d2, "cpu")
        for dim in (1, 2):
            groups[f"{d1}x{d2} dim{dim}"] = dist.get_process_group_ranks(mesh.group(dim))
        collectives[f"{d1}x{d2}"] = _collectives_of_one_step(mesh, chunks=2)
    checks = check_all(TINY, CHUNKS, "cpu", MESHES)
    prose = check_layer(TINY, init_mesh(2, 2, "cpu"), 1, operators=PROSE_READING)
    result = {
        "groups": groups,
        "collectives": collectives,
        "checks": [asdict(c) for c in checks],
        "prose": [asdict(c) for c in prose],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as out:
        json.dump(result, out)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    folder = tmp_path_factory.mktemp("atp_numerics")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        mp.spawn(_worker, args=(str(folder / "store"), str(folder)), nprocs=WORLD, join=True)
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize(("d1", "d2"), MESHES)
def test_layer_matches_reference(ranks: list[dict], d1: int, d2: int, chunks: int) -> None:
    checks = [
        c
        for rank in ranks
        for c in rank["checks"]
        if (c["d1"], c["d2"], c["chunks"]) == (d1, d2, chunks)
    ]
    tensors = {c["tensor"] for c in checks}
    assert len(checks) == WORLD * len(tensors)
    assert {
        "output",
        "input.grad",
        "qkv.weight.grad",
        "fc2.bias.grad",
        "ln1.weight.grad",
    } <= tensors
    assert [c for c in checks if not c["ok"]] == []


def test_prose_reading_of_f1_f3_fails_numerics(ranks: list[dict]) -> None:
    failed = {c["tensor"] for rank in ranks for c in rank["prose"] if not c["ok"]}
    assert "output" in failed


@pytest.mark.parametrize(("d1", "d2"), MESHES)
def test_mesh_groups_follow_atpsim_convention(ranks: list[dict], d1: int, d2: int) -> None:
    for dim in (1, 2):
        expected = DeviceMesh(d1, d2).groups(dim)
        for rank, result in enumerate(ranks):
            mine = next(group for group in expected if rank in group)
            assert result["groups"][f"{d1}x{d2} dim{dim}"] == mine


def _collectives_of_one_step(mesh, chunks: int) -> list[list]:
    """[collective, mesh dimension, bytes] of every collective one forward + backward issues."""
    import validation.comm as comm
    from validation.layer import ATPTransformerLayer

    dims = {tuple(dist.get_process_group_ranks(mesh.group(d))): d for d in (1, 2)}
    log: list[list] = []
    all_reduce, all_gather = dist.all_reduce, comm.all_gather_single

    def recording(kind, original, buffer_arg):
        def call(*args, group=None, **kwargs):
            buffer = args[buffer_arg]
            nbytes = buffer.numel() * buffer.element_size()
            log.append([kind, dims[tuple(dist.get_process_group_ranks(group))], nbytes])
            return original(*args, group=group, **kwargs)

        return call

    dist.all_reduce = recording("all_reduce", all_reduce, 0)
    comm.all_gather_single = recording("all_gather", all_gather, 0)
    try:
        layer = ATPTransformerLayer(TINY, mesh, chunks)
        x = torch.randn(TINY.batch, TINY.seq, TINY.hidden // mesh.d2, requires_grad=True)
        layer(x).sum().backward()
    finally:
        dist.all_reduce, comm.all_gather_single = all_reduce, all_gather
    return sorted(log)


@pytest.mark.parametrize(("d1", "d2"), MESHES)
def test_kernel_issues_the_collectives_of_atpsims_program(
    ranks: list[dict], d1: int, d2: int
) -> None:
    model = ModelConfig(
        "tiny", TINY.hidden, TINY.heads, batch=TINY.batch, seq=TINY.seq, dtype="fp32"
    )
    program = build_step_program(model, DeviceMesh(d1, d2), chunks=2)
    expected = sorted([op.collective, op.dim, op.bytes] for op in program.comm_ops())
    for result in ranks:
        assert result["collectives"][f"{d1}x{d2}"] == expected
