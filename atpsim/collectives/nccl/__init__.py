"""NCCL's planning, as data: what NCCL would run for one collective call, before any timing.

:mod:`~.algorithms` lists the algorithm names NCCL runs per op and what its tuner chooses
among; :mod:`~.plan` lays one algorithm over the machine (channel rings per NIC rail,
hierarchical all-reduce, double binary tree, NVLS) as a schedule the engine takes
(:class:`~atpsim.collectives.planned.PlannedPattern` or a registry name); :mod:`~.latency`
counts the protocol's fixed latency of its steps; :mod:`~.candidates` pairs algorithms with
protocols and bounds each one's time from below. The engine times the candidates and keeps the
fastest (:func:`atpsim.engine.nccl.run_nccl`), as NCCL's tuner keeps the fastest by its model.
"""

from atpsim.collectives.nccl.algorithms import (
    AUTO_CANDIDATES,
    NCCL_ALGORITHMS,
    auto_algorithms,
    channel_algorithms,
    check_channels_used,
    check_nccl_algorithm,
    nccl_algorithm_names,
)
from atpsim.collectives.nccl.candidates import Candidate, NcclPlanner
from atpsim.collectives.nccl.plan import NcclPlan, plan_algorithm

__all__ = [
    "AUTO_CANDIDATES",
    "NCCL_ALGORITHMS",
    "Candidate",
    "NcclPlan",
    "NcclPlanner",
    "auto_algorithms",
    "channel_algorithms",
    "check_channels_used",
    "check_nccl_algorithm",
    "nccl_algorithm_names",
    "plan_algorithm",
]
