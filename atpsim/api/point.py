"""One sweep point, simulated: scenario point -> topology -> program -> engine -> results row.

Two modes (the ``mode`` methods of :mod:`atpsim.engine.methods`), compared and never confused:
- ``des``: the ATP program runs on per-rank compute and communication streams; every
  collective is simulated link by link by the event engine (:mod:`atpsim.engine.step.run`).
- ``analytic``: the paper's model: T_comm by Eq. 2 with B1, B2 from the hierarchical
  communication matrix (Eq. 3, 4) or from a calibration, plus the same compute time, with no
  overlap (step = compute + T_comm).

A point's ``scheme`` picks the program: ATP's mesh (``atp``), 2D / 2.5D SUMMA (``summa``) or
SageMaker-style TP over data-parallel ranks (``sagemaker``), whose step-program builders are
registered in :mod:`atpsim.parallel.schemes` and picked by the point's ``tp``; the other
schemes are des only (Eq. 2 is ATP's, so an analytic point of another scheme fails with a
clear error). Their memory columns are :func:`atpsim.parallel.memory.memory_per_rank`'s
estimates.
"""

from __future__ import annotations

import math
from typing import Any

from atpsim.analytic.hcm import derive_hcm
from atpsim.analytic.model import delta_s as paper_delta_s
from atpsim.analytic.model import estimate_mesh
from atpsim.analytic.model import t_comm_s as paper_t_comm_s
from atpsim.compute.hardware import HardwareProfile, hardware_profile
from atpsim.compute.models import ModelConfig
from atpsim.compute.timing import compute_time_s
from atpsim.engine.methods import ANALYTIC, find, names
from atpsim.engine.step.run import layer_overhead_s, simulate_des_step
from atpsim.errors import SimulationError
from atpsim.parallel.atp import build_step_program
from atpsim.parallel.memory import memory_per_rank
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.point import SweepPoint
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology

TERA = 1e12
PAPER_TERA = 2.0**40  # Table 2/3's unit (atp-paper-facts.md, "Units")


def simulate_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one sweep point and return its result columns (see atpsim.results.schema)."""
    return simulate_point_on(point, topology_for(point), hardware_profile(point.hardware))


def simulate_point_on(point: SweepPoint, topology: Topology, profile: HardwareProfile) -> dict[str, Any]:
    """Simulate *point* on *topology* with *profile* (its own, or a parameter draw of them:
    :mod:`atpsim.api.uncertainty`) and return its result columns."""
    method = find("mode", point.mode)
    if method is None:
        expected = " or ".join(map(repr, names("mode")))
        raise SimulationError(f"unknown mode {point.mode!r}; expected {expected}")
    simulate = _analytic_times if method.kind == ANALYTIC else _des_times
    times = simulate(point, topology, profile)
    return {**times, **_derived_columns(point, topology, profile, times)}


def topology_for(point: SweepPoint) -> Topology:
    """The point's topology, sized to its device count where the spec leaves size open."""
    spec = point.topology if isinstance(point.topology, str) else dict(point.topology)
    topology = load_topology(spec, n_gpus=point.n_devices)
    if topology.n_gpus < point.n_devices:
        raise SimulationError(
            f"{point.topology_label} has {topology.n_gpus} GPUs; the point needs {point.n_devices}"
        )
    return topology


def _des_times(point: SweepPoint, topology: Topology, profile: HardwareProfile) -> dict[str, float]:
    result = simulate_des_step(topology, profile, point.model, point.tp, point.chunks,
                               point.algorithm)  # fmt: skip
    return {
        "step_time_s": result.step_time_s,
        "compute_time_s": result.compute_time_s,
        "comm_time_s": result.comm_time_s,
        "exposed_comm_s": result.exposed_comm_s,
    }


def _analytic_times(point: SweepPoint, topology: Topology, profile: HardwareProfile) -> dict[str, float]:
    """Eq. 2's T_comm (calibrated B1, B2 where the point has them) plus serial compute."""
    if point.scheme != "atp":
        raise SimulationError(
            f"analytic mode is defined for scheme 'atp' only (Eq. 2 is ATP's), not {point.scheme!r}"
        )
    b1_Bps, b2_Bps = _analytic_bandwidths(point, topology)
    t_comm = paper_t_comm_s(point.model, point.mesh, b1_Bps, b2_Bps)
    compute_s = serial_compute_time_s(point.model, point.mesh, point.chunks, profile)
    return {
        "step_time_s": compute_s + t_comm,
        "compute_time_s": compute_s,
        "comm_time_s": t_comm,
        "exposed_comm_s": t_comm,
    }


def _analytic_bandwidths(point: SweepPoint, topology: Topology) -> tuple[float, float]:
    """Eq. 4's B1, B2 for the point's mesh: calibrated values where given, else derived from
    the hierarchical communication matrix by Eq. 3 and 4 (a dimension of size 1 needs none)."""
    calibrated = dict(point.calibration or {})
    needed = [name for name, d in (("B1_Bps", point.mesh.d1), ("B2_Bps", point.mesh.d2)) if d > 1]
    if all(name in calibrated for name in needed):
        derived = {"B1_Bps": math.inf, "B2_Bps": math.inf}
    else:
        derived = estimate_mesh(derive_hcm(topology), point.model, point.mesh)._asdict()
    return (
        calibrated.get("B1_Bps", derived["B1_Bps"]) if point.mesh.d1 > 1 else math.inf,
        calibrated.get("B2_Bps", derived["B2_Bps"]) if point.mesh.d2 > 1 else math.inf,
    )


def serial_compute_time_s(
    model: ModelConfig, mesh: DeviceMesh, chunks: int, profile: HardwareProfile
) -> float:
    """Sum of the durations of every compute op of the ATP program on one rank."""
    program = build_step_program(model, mesh, chunks)
    ops_s = sum(compute_time_s(op, profile, model.dtype) for op in program.compute_ops())
    return ops_s + model.layers * layer_overhead_s(profile)


def _derived_columns(
    point: SweepPoint, topology: Topology, profile: HardwareProfile, times: dict[str, float]
) -> dict[str, Any]:
    flops = point.model.step_flops()
    per_gpu_flops_per_s = flops / times["step_time_s"] / point.n_devices
    group_bw = group_bandwidth_Bps(topology, point.n_devices)
    memory = memory_per_rank(point.model, point.tp, point.chunks, profile)
    return {
        "tflops_per_gpu": per_gpu_flops_per_s / TERA,
        "tflops_per_gpu_paper_unit": per_gpu_flops_per_s / PAPER_TERA,
        "comm_over_delta": times["comm_time_s"] / delta_s(point.model, group_bw) if group_bw else None,
        "group_bw_Bps": group_bw,
        "memory_per_rank_bytes": memory.total_bytes,
        "fits_memory": memory.fits,
    }


def delta_s(model: ModelConfig, group_bw_Bps: float) -> float:
    """The paper's Delta = 2·L·b·s·h / GroupBW (Section 5.4), with h in bytes of the dtype."""
    return paper_delta_s(model, group_bw_Bps)


def group_bandwidth_Bps(topology: Topology, n_devices: int) -> float | None:
    """GroupBW per GPU where the topology defines one: every rank of every layer of its
    hierarchical communication matrix offers the same group bandwidth per GPU (a single switch,
    a torus: the paper's IC5 and IC6). None where the layers differ (there is no one Delta)."""
    if topology.n_gpus != n_devices:
        return None
    per_gpu = {
        round(group.group_Bps(r) / len(rank), 3)
        for layer in derive_hcm(topology).layers
        for group in layer.groups
        for r, rank in enumerate(group.ranks)
    }
    if len(per_gpu) != 1:
        return None
    value = per_gpu.pop()
    return value if math.isfinite(value) and value > 0 else None
