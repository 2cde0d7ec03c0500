"""The plain joint run of a job's iteration beside the engine with its shortcuts: the cost of
simulating every flow of every call in one network, and the check that the shortcuts give
the same task ends (``bench/bench_joint.py`` prints these)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from atpsim.compute.models import ModelConfig, model_preset
from atpsim.engine.joint.engine import run_graph
from atpsim.engine.joint.plain import run_plain
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.training.config import JobConfig, check_job
from atpsim.training.job import joint_job, load_machine


@dataclass(frozen=True)
class PlainRun:
    """One iteration's task graph run both ways: its *tasks*, the plain run's *flows* and
    rate solves (*events*) and wall time (*plain_s*), the shortcut engine's wall time
    (*fast_s*) and whether every task ends at the same time to 1e-9 (*agree*)."""

    tasks: int
    flows: int
    events: int
    plain_s: float
    fast_s: float
    agree: bool

    @property
    def events_per_s(self) -> float:
        return self.events / self.plain_s if self.plain_s > 0 else float("inf")


def compare_plain(topology: str | Mapping[str, Any], model: str | ModelConfig, *,
                  tp: tuple[int, int] = (1, 1), pp: int = 1, dp: int = 1, micro_batch: int = 1,
                  global_batch: int | None = None, **options: Any) -> PlainRun:
    """Build the iteration's graph (as :func:`atpsim.training.job.simulate_job` does) and run it
    plain and with the shortcuts, timing both (wall clock of this process)."""
    config = JobConfig(model if isinstance(model, ModelConfig) else model_preset(model),
                       ParallelLayout(DeviceMesh(*tp), pp, dp), micro_batch,
                       global_batch or micro_batch * dp * pp, **options)  # fmt: skip
    check_job(config)
    machine, profile = load_machine(topology, config.layout.size, None)
    job = joint_job(machine, profile, config)
    start = time.perf_counter()
    reference = run_plain(job.graph, job.machine)
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    fast = run_graph(job.graph, job.machine)
    fast_s = time.perf_counter() - start
    agree = bool(np.allclose(fast.finish_s, reference.finish_s, rtol=1e-9, atol=0))
    return PlainRun(len(job.graph), reference.stats["flows"], reference.stats["rate_solves"],
                    plain_s, fast_s, agree)  # fmt: skip
