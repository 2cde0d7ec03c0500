"""The joint run pauses the cyclic collector (atpsim.engine.joint.collector): it runs with the
collector off, turns it back on after (also on an error), and leaves almost no cyclic garbage
behind, so pausing costs no memory."""

from __future__ import annotations

import gc

import pytest

import atpsim.training.job as job_module
from atpsim.engine.joint.collector import paused_collector
from atpsim.training.job import simulate_job

JOB = {"tp": (4, 1), "pp": 2, "dp": 2, "global_batch": 8, "vocab": 0, "model": "gpt3-1.3b"}


def _job() -> float:
    kwargs = dict(JOB)
    return simulate_job("ib-cluster:2x8", kwargs.pop("model"), network="joint", **kwargs).iteration_time_s


def test_the_run_goes_with_the_collector_off_and_turns_it_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = job_module.run_graph

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(job_module, "run_graph", spy)
    assert gc.isenabled()
    assert _job() > 0
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_failure_inside_turns_it_back_on_and_an_off_collector_stays_off() -> None:
    with pytest.raises(RuntimeError), paused_collector():
        assert not gc.isenabled()
        raise RuntimeError("inside")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_collector():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_joint_run_leaves_almost_no_cyclic_garbage() -> None:
    """What a pass finds after the run is what pausing kept: a few objects, not the run's
    hundreds of thousands (the 512-GPU job: 3,677 in a whole command, bench/README.md)."""
    _job()  # warm: first-use caches (hardware, models) are not the run's garbage
    gc.collect()
    _job()
    assert gc.collect() < 100
