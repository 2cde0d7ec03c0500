"""One job sweep point, simulated: :class:`~atpsim.scenario.job_point.JobPoint` ->
:class:`~atpsim.training.config.JobConfig` -> :func:`~atpsim.training.job.run_job` -> a results
row of the job schema (:data:`atpsim.results.schema.JOB_SCHEMA`).

A layout whose busiest rank does not fit the GPU's memory is not simulated (as
:func:`atpsim.api.plan_job` prunes it): its row says how much it needs and ``fits_memory``
false, with empty times.
"""

from __future__ import annotations

from typing import Any

from atpsim.compute.hardware import HardwareProfile, hardware_profile
from atpsim.errors import SimulationError
from atpsim.scenario.job_point import JobPoint
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology
from atpsim.training.config import JobConfig, check_job
from atpsim.training.fabric import job_config_at, run_jobs
from atpsim.training.job import JobPrediction, job_memory, run_job
from atpsim.training.links import busiest_columns
from atpsim.training.partition import resolve_partition
from atpsim.training.perturb import job_perturbation


def job_config(point: JobPoint) -> JobConfig:
    """The :class:`JobConfig` *point* stands for (:meth:`JobPoint.config`), checked by
    :func:`check_job`."""
    config = point.config()
    check_job(config)
    return config


def simulate_job_point(point: JobPoint) -> dict[str, Any]:
    """Simulate one job point and return its result columns (memory only when it does not
    fit)."""
    config = job_config(point)
    profile = hardware_profile(point.hardware)
    unfit = _unfit(config, profile)
    if unfit:
        return unfit
    topology = load_topology(job_topology_spec(point), n_gpus=job_gpus(point))
    return simulate_job_point_on(point, topology, profile)


def job_topology_spec(point: JobPoint) -> str | dict[str, Any]:
    """The topology spec of *point*, as :func:`load_topology` takes it."""
    return point.topology if isinstance(point.topology, str) else dict(point.topology)


def job_gpus(point: JobPoint) -> int:
    """The GPUs *point*'s topology is sized to: its job's and its neighbour's."""
    return point.n_devices + point.neighbour_devices


def _unfit(config: JobConfig, profile: HardwareProfile) -> dict[str, Any] | None:
    """The columns of a layout whose busiest rank does not fit *profile*'s memory, or None
    (``partition: auto`` split as on *profile*)."""
    memory = job_memory(resolve_partition(config, profile)).total_bytes
    if memory > profile.memory_capacity_bytes:
        return {"memory_per_rank_bytes": memory, "fits_memory": False}
    return None


def simulate_job_point_on(point: JobPoint, topology: Topology, profile: HardwareProfile) -> dict[str, Any]:
    """Simulate *point* on *topology* with *profile* (its own, or a parameter draw of them:
    :mod:`atpsim.api.uncertainty`) and return its result columns."""
    config = job_config(point)
    unfit = _unfit(config, profile)
    if unfit:
        return unfit
    if point.neighbour:
        return _with_neighbour(topology, profile, config, point)
    perturb = job_perturbation(topology, config, dict(point.perturb)) if point.perturb else None
    prediction = run_job(topology, profile, config, network=point.network, perturb=perturb,
                         links=point.network == "joint")  # fmt: skip
    return prediction_columns(prediction) | busiest_columns(topology, prediction)


def _with_neighbour(topology, profile, config: JobConfig, point: JobPoint) -> dict[str, Any]:
    """The point's job and its neighbour on the next GPUs, together and alone."""
    if point.perturb:
        raise SimulationError("a perturbed job with a neighbour is not simulated", key="perturb")
    if topology.n_gpus < point.n_devices + point.neighbour_devices:
        raise SimulationError(f"the job and its neighbour need {point.n_devices + point.neighbour_devices} "
                              f"GPUs; {topology.name} has {topology.n_gpus}", key="neighbour")  # fmt: skip
    neighbour = job_config_at(dict(point.neighbour), point.n_devices, "neighbour")
    fabric = run_jobs(topology, profile, [config, neighbour])
    return prediction_columns(fabric.together[0]) | {
        "alone_iteration_time_s": fabric.alone[0].iteration_time_s,
        "slowdown": fabric.slowdown[0], "neighbour_slowdown": fabric.slowdown[1]}


def prediction_columns(prediction: JobPrediction) -> dict[str, Any]:
    """The result columns of the job schema from *prediction*."""
    names = ("iteration_time_s", "samples_per_s", "tflops_per_gpu", "hardware_tflops_per_gpu",
             "mfu", "compute_s", "exposed_tp_comm_s", "exposed_dp_comm_s", "exposed_offload_s", "pipeline_bubble_s",
             "other_s", "memory_per_rank_bytes", "fits_memory")  # fmt: skip
    return {name: getattr(prediction, name) for name in names}
