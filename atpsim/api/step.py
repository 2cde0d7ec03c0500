"""`atpsim.simulate`: one training step of a model on a tensor-parallel mesh, typed.

A thin, typed front of :func:`atpsim.api.point.simulate_point` (the function every sweep
point goes through), so a Python caller gets exactly the numbers a scenario's results table
holds for the same configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from atpsim.api.point import hardware_profile, simulate_point, topology_for
from atpsim.compute.hardware import topology_hardware
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.engine.methods import names as method_names
from atpsim.engine.step.run import simulate_des_step
from atpsim.errors import SimulationError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.report.trace import write_chrome_trace
from atpsim.scenario.point import SweepPoint
from atpsim.topology.spec import load_topology, topology_label

MODES = tuple(method_names("mode"))


@dataclass(frozen=True)
class StepPrediction:
    """What one step costs (seconds on the critical rank) and what follows from it.

    *mode* ``des`` is the event simulation (overlap is whatever the streams allow); ``analytic``
    is the paper's Eq. 2 plus serial compute. *tflops_per_gpu* is in 10^12 FLOP/s,
    *tflops_per_gpu_paper_unit* in the paper's 2^40. *comm_over_delta* and *group_bw_Bps* are
    None where the topology has no single group bandwidth (Section 5.4's Delta)."""

    mode: str
    mesh: DeviceMesh
    chunks: int
    step_time_s: float
    compute_time_s: float
    comm_time_s: float
    exposed_comm_s: float
    tflops_per_gpu: float
    tflops_per_gpu_paper_unit: float
    comm_over_delta: float | None
    group_bw_Bps: float | None
    memory_per_rank_bytes: float
    fits_memory: bool

    @classmethod
    def from_row(cls, point: SweepPoint, row: Mapping[str, Any]) -> StepPrediction:
        """The prediction held in a results row of *point*."""
        measured = {f.name: row[f.name] for f in fields(cls) if f.name in row}
        return cls(mode=point.mode, mesh=point.mesh, chunks=point.chunks, **measured)


def simulate(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig = "M2",
    mesh: tuple[int, int] | DeviceMesh = (1, 1),
    chunks: int = 1,
    *,
    devices: int | None = None,
    algorithm: str = "auto",
    hardware: str | None = None,
    placement: str = "row-major",
    mode: str = "des",
    calibration: Mapping[str, float] | None = None,
) -> StepPrediction:
    """Simulate one training step of *model* (a preset name ``M1``..``M4`` or a
    :class:`ModelConfig`) with ATP tensor parallelism on *mesh* = (d1, d2), the batch split
    into *chunks*, on *topology* (a preset such as ``"dgx-h100"``, a builder spec such as
    ``"torus:8x8"``, a YAML path, or a mapping as in a scenario file).

    *devices* defaults to ``d1 * d2``; *hardware* to the topology's profile; *algorithm* is
    the all-reduce algorithm; *mode* is ``"des"`` (event simulation) or ``"analytic"``
    (Eq. 2, with *calibration*'s ``B1_Bps``/``B2_Bps`` where given).

    >>> import atpsim
    >>> step = atpsim.simulate("dgx-h100", "M3", mesh=(4, 2), chunks=2)
    >>> round(step.step_time_s, 3) > 0
    True
    """
    point = step_point(topology, model, mesh, chunks, devices=devices, algorithm=algorithm,
                       hardware=hardware, placement=placement, mode=mode,
                       calibration=calibration)  # fmt: skip
    return StepPrediction.from_row(point, simulate_point(point))


def step_point(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig,
    mesh: tuple[int, int] | DeviceMesh,
    chunks: int,
    *,
    devices: int | None = None,
    algorithm: str = "auto",
    hardware: str | None = None,
    placement: str = "row-major",
    mode: str = "des",
    calibration: Mapping[str, float] | None = None,
) -> SweepPoint:
    """The :class:`SweepPoint` that :func:`simulate` runs (checked: mode, chunks, mesh size)."""
    if mode not in MODES:
        raise SimulationError(f"expected mode 'des' or 'analytic', got {mode!r}", key="mode")
    if chunks < 1:
        raise SimulationError(f"expected chunks >= 1, got {chunks}", key="chunks")
    placed = _as_mesh(mesh, placement)
    n = devices or placed.size
    if n != placed.size:
        raise SimulationError(f"{placed} has {placed.size} ranks, not {n} devices", key="mesh")
    config = model if isinstance(model, ModelConfig) else model_preset(model)
    spec = topology if isinstance(topology, str) else dict(topology)
    profile = topology_hardware(load_topology(spec, n_gpus=n), hardware)
    return SweepPoint("api", spec, topology_label(spec), n, profile, config, placed, chunks,
                      algorithm, mode, calibration)  # fmt: skip


def _as_mesh(mesh: tuple[int, int] | DeviceMesh, placement: str) -> DeviceMesh:
    if isinstance(mesh, DeviceMesh):
        return mesh
    d1, d2 = mesh
    return DeviceMesh(int(d1), int(d2), placement)


def write_trace(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig,
    mesh: tuple[int, int] | DeviceMesh,
    chunks: int,
    path: str | Path,
    *,
    algorithm: str = "auto",
    hardware: str | None = None,
    placement: str = "row-major",
) -> Path:
    """Simulate one step as :func:`simulate` does (mode ``des``) and write its per-rank
    timeline to *path* as a Chrome/Perfetto trace (JSON); returns the path written."""
    point = step_point(topology, model, mesh, chunks, algorithm=algorithm, hardware=hardware,
                       placement=placement)  # fmt: skip
    result = simulate_des_step(topology_for(point), hardware_profile(point.hardware), point.model,
                               point.mesh, chunks, algorithm)  # fmt: skip
    return Path(write_chrome_trace(result.timeline, path))
