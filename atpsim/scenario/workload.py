"""The two workloads a scenario sweeps, by name: ``step`` (one transformer layer's pass on one
tensor-parallel group: :class:`~atpsim.scenario.point.SweepPoint`) and ``job`` (a whole
training iteration of a TP x PP x DP layout: :class:`~atpsim.scenario.job_point.JobPoint`).

A step is not a job with pp = dp = 1 here: an iteration adds the embedding, the optimizer and
the pipeline, so the two keep their own points, tables and reports. Every place that treats
them differently keeps one registry keyed by these names (the scenario expanders of
:mod:`atpsim.scenario.sweep`, the API's of :mod:`atpsim.api.workloads`) rather than a test of
which one a scenario is.
"""

from __future__ import annotations

from atpsim.results.schema import JOB, STEP, WORKLOADS, Workload

__all__ = ["JOB", "STEP", "WORKLOADS", "Workload"]
