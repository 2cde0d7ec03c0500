"""ZeRO-1 splits the optimizer step over the data-parallel ranks (atpsim.training.experts.
optimizer_shard, atpsim.training.job.optimizer_s): each rank's Adam update moves the bytes of
``1/dp`` of its stage's parameters, so its time less the kernel launch is ZeRO-0's over dp.

Guards issue 25's mutation 6 (ZeRO-1's step not split over dp), which only the committed
reports' snapshots caught."""

from __future__ import annotations

import pytest

from atpsim.compute.hardware import hardware_profile
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import memory_op_class, memory_time_s
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.topology.spec import load_topology
from atpsim.training.calls import JobComm
from atpsim.training.config import check_job, job_config
from atpsim.training.experts import optimizer_shard
from atpsim.training.job import job_stage_calls, optimizer_s, stage_params_per_rank

#: h = 1024, ffn = 4h, 4 layers, no vocabulary, fp16 (Adam moves 24 + 2·2 = 28 bytes/param).
MODEL = ModelConfig("tiny", hidden=1024, heads=16, layers=4, batch=1, seq=1024)
PROFILE = hardware_profile("a100-sxm4-80gb")
DP = 4
#: One TP-8 rank of a 2-layer stage: 2 · (12h²/8 + (3h + 4h)/8 + 2h + 4h)
#: = 2 · (1 572 864 + 896 + 6 144) = 3 159 808 parameters.
STAGE_PARAMS = 3_159_808
ADAM_BYTES_PER_PARAM = 28


def config(zero: int, cp: int = 1):
    c = job_config(MODEL, ParallelLayout(DeviceMesh(8, 1), pp=2, dp=DP, cp=cp), 1, 16, zero=zero)
    check_job(c)
    return c


def adam_s(params: float) -> float:
    return memory_time_s(params * ADAM_BYTES_PER_PARAM, PROFILE, memory_op_class("adam"))


def test_the_stage_holds_the_parameters_counted_by_hand():
    for stage in range(2):
        assert stage_params_per_rank(config(0), stage) == STAGE_PARAMS


def test_zero1_shards_the_optimizer_over_dp():
    """789 952 = 3 159 808 / 4 parameters per rank with ZeRO-1, all of them without; with
    cp = 2 the shard is over the dp·cp = 8 pipelines: 394 976."""
    assert optimizer_shard(config(0), STAGE_PARAMS, 0.0) == STAGE_PARAMS
    assert optimizer_shard(config(1), STAGE_PARAMS, 0.0) == 789_952
    assert optimizer_shard(config(1, cp=2), STAGE_PARAMS, 0.0) == 394_976


@pytest.mark.parametrize("stage", [0, 1])
def test_zero1_optimizer_time_is_zero0_over_dp(stage):
    """Adam of 789 952 parameters x 28 B = 22 118 656 B with ZeRO-1 against 88 474 624 B
    without; less the launch, the time is ZeRO-0's over dp = 4."""
    zero0, zero1 = optimizer_s(PROFILE, config(0), stage), optimizer_s(PROFILE, config(1), stage)
    assert zero0 == adam_s(STAGE_PARAMS)
    assert zero1 == adam_s(STAGE_PARAMS / DP)
    launch = PROFILE.launch_overhead_s
    assert zero1 - launch == pytest.approx((zero0 - launch) / DP, rel=1e-12)


def test_the_stage_calls_carry_the_sharded_step():
    """What the iteration's graph runs: each stage's optimizer step, ZeRO-1's sharded."""
    topology = load_topology("ib-cluster:8x8")
    for zero, params in ((0, STAGE_PARAMS), (1, STAGE_PARAMS / DP)):
        c = config(zero)
        stages = job_stage_calls(JobComm(topology, PROFILE, c), PROFILE, c)
        assert [s.optimizer_s for s in stages] == [adam_s(params)] * 2
