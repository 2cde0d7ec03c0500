"""SageMaker-style TP over data-parallel ranks (Karakus et al., Section 5, Figure 6): the
compute of data parallelism, the collectives of distributed linears."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import build_sagemaker_program

MODEL = ModelConfig("sm", hidden=1024, heads=16, layers=2, batch=8, seq=256)


def test_one_rank_is_the_single_gpu_layer():
    single = build_step_program(MODEL, DeviceMesh(1, 1), 2)
    sagemaker = build_sagemaker_program(MODEL, 1, 2)
    assert [t.op for t in sagemaker.tasks] == [t.op for t in single.tasks]
    assert [t.deps for t in sagemaker.tasks] == [t.deps for t in single.tasks]


@pytest.mark.parametrize("t", [2, 4, 8])
def test_each_rank_computes_what_data_parallelism_computes(t):
    """The distributed linears run 1/t of the weights on t times the samples."""
    local = build_step_program(replace(MODEL, batch=MODEL.batch // t), DeviceMesh(1, 1))
    sagemaker = build_sagemaker_program(MODEL, t)
    flops = lambda program: sum(op.flops for op in program.compute_ops())  # noqa: E731
    assert flops(sagemaker) == pytest.approx(flops(local), rel=1e-12)


def test_collectives_of_the_distributed_linears():
    """Per layer forward: an all-to-all of each linear's input (the rank's T/t tokens x fin)
    and a reduce-scatter of its output over the group's T tokens; backward: the all-gather of
    the output gradient and the all-to-all of the input gradient."""
    t, b = 4, 2
    tokens = MODEL.batch // t * MODEL.seq
    h, f = MODEL.hidden, 4 * MODEL.hidden
    program = build_sagemaker_program(MODEL, t)
    fwd = [(op.collective, op.bytes) for task in program.tasks if task.phase == "fwd"
           for op in [task.op] if hasattr(op, "collective")]  # fmt: skip
    fins, fouts = (h, h, h, f), (3 * h, h, f, h)
    expected = [pair for fin, fout in zip(fins, fouts, strict=True)
                for pair in (("all_to_all", tokens * fin * b), ("reduce_scatter", t * tokens * fout * b))]  # fmt: skip
    assert fwd == expected * MODEL.layers
    kinds = [op.collective for op in program.comm_ops()]
    assert kinds.count("all_gather") == kinds.count("reduce_scatter") == 4 * MODEL.layers
    assert kinds.count("all_to_all") == 8 * MODEL.layers
    assert {op.dim for op in program.comm_ops()} == {1}


def test_the_batch_must_split_over_the_group():
    with pytest.raises(SimulationError, match="must split over 16 ranks"):
        build_sagemaker_program(MODEL, 16)
