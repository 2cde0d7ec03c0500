"""A pipeline stage boundary sends each rank's ``[b·s, h/d2]`` share of the activations
(atpsim.training.calls.activation_bytes): ATP's layer output is split over the mesh's
dimension 2 (``d2``), and a micro-batch of ``b`` sequences of ``s`` tokens of hidden size
``h`` in bf16 (2 bytes) is ``b·s·h·2`` bytes in all.

Guards issue 25's mutation 5 (the send divided by ``d1`` instead of ``d2``): the other tests'
meshes were (t, 1) or square, where the two agree or the send was not checked."""

from __future__ import annotations

import pytest

from atpsim.compute.hardware import hardware_profile
from atpsim.compute.models import ModelConfig
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology
from atpsim.training.calls import JobComm, activation_bytes
from atpsim.training.config import check_job, job_config

#: b·s·h·2 = 2 · 1024 · 1024 · 2 bytes = 4 MiB of activations per micro-batch of 2 sequences.
MODEL = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
MICRO_BATCH = 2
MIB = 2**20


@pytest.mark.parametrize(
    "d1, d2, expected", [(8, 1, 4 * MIB), (4, 2, 2 * MIB), (2, 4, 1 * MIB), (1, 8, MIB // 2)]
)
def test_a_stage_sends_its_share_of_the_activations_over_d2(d1, d2, expected):
    """4 MiB / d2: the (4, 2) mesh sends 2 MiB per rank, the (2, 4) mesh 1 MiB."""
    config = job_config(MODEL, ParallelLayout(DeviceMesh(d1, d2), pp=2, dp=1), MICRO_BATCH, 4)
    check_job(config)
    assert activation_bytes(config) == expected
    comm = JobComm(load_topology("ib-cluster:2x8"), hardware_profile("a100-sxm4-80gb"), config)
    send = comm.send(0, 1)
    assert send is not None and send.nbytes == expected
    assert send.groups == tuple((r, r + 8) for r in range(8))


def test_context_parallelism_sends_its_share_of_the_tokens():
    """With cp = 2 each rank holds s/2 = 512 tokens of each sequence: 2 · 512 · 1024/2 · 2 =
    1 MiB on the (4, 2) mesh."""
    config = job_config(MODEL, ParallelLayout(DeviceMesh(4, 2), pp=2, dp=1, cp=2), MICRO_BATCH, 4)
    assert activation_bytes(config) == 1 * MIB
