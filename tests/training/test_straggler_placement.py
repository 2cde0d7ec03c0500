"""A straggler slows exactly the (replica, stage) its rank belongs to
(atpsim.training.perturb.replica_costs): ``costs(replica, stage)`` is timed on that replica's and
stage's ranks. On a layout of 2 replicas x 2 stages of TP 8 on ``ib-cluster:4x8`` (one node
each, replicas alike), a straggler on replica 1 slows the iteration exactly as one on the
same stage of replica 0, and a straggler on stage 1 differently from one on stage 0.

Guards issue 25's mutation 4 (replica and stage swapped when the perturbed stage's ranks are
looked up): the existing test put its straggler on replica 0, stage 0, where the swap changes
nothing."""

from __future__ import annotations

import pytest

from atpsim.compute.models import ModelConfig
from atpsim.engine.joint.perturb import Perturbation
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.pipeline import PipelineOp
from atpsim.training.config import check_job, job_config
from atpsim.training.job import joint_job, load_machine, simulate_job

MODEL = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
MACHINE = "ib-cluster:4x8"
LAYOUT = ParallelLayout(DeviceMesh(8, 1), pp=2, dp=2)
JOB = {
    "topology": MACHINE,
    "model": MODEL,
    "tp": (8, 1),
    "pp": 2,
    "dp": 2,
    "micro_batch": 1,
    "global_batch": 8,
}
FACTOR = 1.5
PLACES = [(r, s) for r in range(2) for s in range(2)]


def straggler(replica: int, stage: int) -> Perturbation:
    """TP position 3 of (*replica*, *stage*) computes 1.5x slower. With order tp, pp, dp the
    rank is ``8 * (2 * replica + stage) + 3``: 3, 11, 19, 27."""
    rank = LAYOUT.stage_ranks(replica, stage)[3]
    assert rank == 8 * (2 * replica + stage) + 3
    return Perturbation(gpus=((rank, FACTOR),))


@pytest.fixture(scope="module")
def iterations():
    base = simulate_job(**JOB).iteration_time_s
    return base, {
        place: simulate_job(**JOB, perturb=straggler(*place)).iteration_time_s for place in PLACES
    }


def test_a_straggler_on_replica_1_slows_the_iteration_as_one_on_replica_0(iterations):
    base, slow = iterations
    for stage in range(2):
        assert slow[(1, stage)] == slow[(0, stage)]
        assert slow[(0, stage)] > base * 1.1


def test_a_straggler_on_the_last_stage_slows_it_more_than_one_on_the_first(iterations):
    """The stages are not interchangeable (a slow stage 1 stretches the iteration 1.147x, a
    slow stage 0 1.126x, here), so a straggler's stage read as its replica shows."""
    _, slow = iterations
    assert slow[(0, 1)] > slow[(0, 0)] * 1.01


@pytest.mark.parametrize("place", PLACES)
def test_only_the_stragglers_replica_and_stage_are_timed_slower(place):
    """Every (replica, stage)'s forward of one micro-batch: the nominal time everywhere but at
    the straggler's own (replica, stage), where it is longer."""
    config = job_config(MODEL, LAYOUT, 1, 8)
    check_job(config)
    topology, profile = load_machine(MACHINE, LAYOUT.size, None)
    nominal = joint_job(topology, profile, config).costs(0, 0)(0, PipelineOp("F", 0)).time_s
    job = joint_job(topology, profile, config, perturb=straggler(*place))
    for replica, stage in PLACES:
        forward = job.costs(replica, stage)(stage, PipelineOp("F", 0)).time_s
        if (replica, stage) == place:
            assert forward > nominal * 1.1
        else:
            assert forward == nominal
