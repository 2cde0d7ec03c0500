"""`atpsim.plan`: rank every mesh (and chunk count) by simulated step time, Eq. 2 beside it.

Each candidate is a :class:`SweepPoint` simulated twice through
:func:`atpsim.api.point.simulate_point`, once by the event engine (``des``) and once by the
paper's model (``analytic``), so a plan uses exactly the code paths a sweep uses. The DES
ranks the candidates; the analytic column shows what ATP's own planner (hierarchical matrix +
Eq. 2-4) would have chosen.

With *uncertainty* = N, every DES candidate is also simulated under N seeded draws of the
fitted parameters, the same draws for every candidate (:mod:`atpsim.api.uncertainty`): each
entry gets its p10/p50/p90, and the plan says how likely its choice is to be the fastest and
what choosing it costs, on average over the draws, against each draw's fastest
(:class:`~atpsim.calibrate.uncertainty.summary.RankingConfidence`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from atpsim.analytic.model import PAPER_IC1_CALIBRATION
from atpsim.api.point import simulate_point
from atpsim.api.step import StepPrediction
from atpsim.api.uncertainty import Draws, PointDraws, point_draws, point_sources, require_sources
from atpsim.calibrate.uncertainty.summary import RankingConfidence, ranking_confidence
from atpsim.collectives.nccl import check_nccl_algorithm
from atpsim.compute.hardware import profile_names, topology_hardware
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import AtpsimError, SimulationError, did_you_mean, param
from atpsim.parallel.mesh import DeviceMesh, placement_names
from atpsim.scenario.point import SweepPoint
from atpsim.sweep.estimate import long_sweep_warning
from atpsim.topology.spec import load_topology, topology_label
from atpsim.training.layouts import tp_meshes

log = logging.getLogger(__name__)

#: Eq. 2's calibrated B1, B2 per mesh (d1, d2), bytes/s.
Calibration = Mapping[tuple[int, int], Mapping[str, float]]
CALIBRATIONS = ("auto", "none", "paper-ic1")


@dataclass(frozen=True)
class PlanEntry:
    """One candidate: its DES prediction and its analytic one (None where Eq. 2 has no
    footing: a mesh the calibration does not cover)."""

    mesh: DeviceMesh
    chunks: int
    des: StepPrediction
    analytic: StepPrediction | None
    draws: PointDraws | None = None


@dataclass(frozen=True)
class Plan:
    """Candidates fastest first by simulated step time, and each mode's choice of mesh."""
    topology_label: str
    n_devices: int
    model: ModelConfig
    hardware: str
    algorithm: str
    entries: tuple[PlanEntry, ...]
    calibration_note: str
    confidence: RankingConfidence | None = None
    uncertainty: Draws | None = None

    @property
    def des_choice(self) -> PlanEntry:
        return self.entries[0]

    @property
    def analytic_choice(self) -> PlanEntry | None:
        """The mesh with the smallest Eq. 2 T_comm (the paper ignores chunking: chunks=1)."""
        ranked = [e for e in self.entries if e.analytic is not None and e.chunks == self.entries[0].chunks]
        candidates = ranked or [e for e in self.entries if e.analytic is not None]
        if not candidates:
            return None
        return min(candidates, key=_analytic_comm_key)

    @property
    def agree(self) -> bool:
        choice = self.analytic_choice
        return choice is None or (choice.mesh.d1, choice.mesh.d2) == (
            self.des_choice.mesh.d1,
            self.des_choice.mesh.d2,
        )


def _analytic_comm_key(entry: PlanEntry) -> tuple[float, int]:
    comm_s = entry.analytic.comm_time_s if entry.analytic is not None else math.inf
    return comm_s, entry.mesh.d2


def plan(
    topology: str | Mapping[str, Any],
    model: str | ModelConfig = "M2",
    *,
    devices: int | None = None,
    chunks: Sequence[int] = (1,),
    algorithm: str = "auto",
    hardware: str | None = None,
    placement: str = "row-major",
    calibration: str = "auto",
    uncertainty: int | None = None,
    seed: int = 0,
) -> Plan:
    """Simulate every DeviceMesh(d1, d2) of *devices* GPUs (default: all of the topology) for
    each chunk count in *chunks* and rank them by simulated step time.

    *calibration* picks Eq. 2's B1, B2 for the analytic column: ``"auto"`` (the paper's
    Section 5.3 values on ``ic1``, else derived from the topology's hierarchical matrix),
    ``"paper-ic1"`` or ``"none"`` (always derived). *uncertainty* = N adds N draws of the
    fitted parameters from *seed* (module docstring; about N + 1 times the cost).

    >>> import atpsim
    >>> best = atpsim.plan("ic1", "M2").des_choice
    >>> (best.mesh.d1, best.mesh.d2)
    (2, 4)
    """

    _check_plan_options(devices, chunks)
    draws = None if uncertainty is None else Draws(uncertainty, seed)
    check_nccl_algorithm("all_reduce", algorithm)
    config = model if isinstance(model, ModelConfig) else _keyed(model_preset, model, "model")
    uneven = [c for c in chunks if config.batch % c]
    if uneven:  # before the size warning: such a plan never runs
        raise SimulationError(f"expected chunk counts that divide {config.name}'s batch "
                              f"({config.batch}), got {uneven[0]}", param="chunks")  # fmt: skip
    _check_names(hardware, placement)
    chosen = _calibration(calibration, topology)
    topo = load_topology(topology, n_gpus=devices, source=param("topology", topology))
    n = devices or topo.n_gpus
    profile = topology_hardware(topo, hardware)
    label = topology_label(topology)
    candidates = []
    for mesh in _meshes_splitting(config, n, placement):
        calibrated = None if chosen is None else chosen.get((mesh.d1, mesh.d2))
        for chunk in chunks:
            point = SweepPoint("plan", topology, label, n, profile, config, mesh, chunk, algorithm, "des")
            candidates.append((point, calibrated))
    sources = _uncertainty_sources(candidates[0][0], draws)
    runs = 2 + (draws.n if draws else 0)
    warning = long_sweep_warning([p for p, _ in candidates] * runs, 1, "plan", f"fewer {param('devices')} or {param('chunks')} shorten it")
    if warning:
        log.warning(warning)
    entries = [_entry(point, chosen is None or calibrated is not None, calibrated, draws, sources)
               for point, calibrated in candidates]  # fmt: skip
    entries.sort(key=lambda e: (e.des.step_time_s, e.mesh.d2, e.chunks))
    note = _calibration_note(calibration, bool(chosen), topology, label)
    confidence = _confidence(entries) if draws else None
    return Plan(label, n, config, profile, algorithm, tuple(entries), note, confidence, draws)


def _meshes_splitting(config: ModelConfig, n: int, placement: str = "row-major") -> list[DeviceMesh]:
    """The DeviceMesh(d1, d2) of all *n* GPUs at *placement* whose dimensions both divide the
    hidden size (:func:`~atpsim.training.layouts.tp_meshes`; a warning names how many others
    were skipped; none at all is a SimulationError)."""
    every = tp_meshes(n, sizes=(n,))
    meshes = tp_meshes(n, sizes=(n,), split_hidden=config.hidden, placements=(placement,))
    if not meshes:
        raise SimulationError(f"no DeviceMesh of {n} GPUs splits model.hidden ({config.hidden}): "
                              f"each dimension must divide it", param="devices")
    if len(meshes) < len(every):
        log.warning("skipping %d of the %d meshes of %d GPUs: a dimension does not divide "
                    "model.hidden (%d)", len(every) - len(meshes), len(every), n, config.hidden)
    return meshes


def _calibration_note(calibration: str, calibrated: bool, topology: object, label: str) -> str:
    """Where Eq. 2's B1, B2 came from; IC1's values on another machine are also warned of."""
    if not calibrated:
        return "derived from the topology's matrix"
    if topology == "ic1":
        return "paper's calibrated B1, B2 (Section 5.3)"
    note = f"IC1's calibrated B1, B2 (paper Section 5.3) applied to {label}, another machine"
    log.warning("%s: %s; 'auto' derives them from %s", param("calibration", calibration), note, label)
    return note


def _uncertainty_sources(point: SweepPoint, draws: Draws | None) -> tuple[str, ...]:
    """The fits the draws perturb (every candidate shares topology and profile), or () without
    draws; a request for draws of nothing fitted is refused here, before any simulation."""
    if draws is None:
        return ()
    sources = point_sources(point)
    require_sources(sources, f"{point.topology_label} with {point.hardware}")
    return sources


def _confidence(entries: Sequence[PlanEntry]) -> RankingConfidence:
    """How sure the first entry (the DES choice) is, over the candidates' draws."""
    import numpy as np

    times = np.array([e.draws.step_time_s for e in entries if e.draws is not None]).T
    return ranking_confidence(times, 0)


def _keyed(fn: Any, value: Any, key: str) -> Any:
    """*fn(value)*, its error naming the parameter *key*."""
    try:
        return fn(value)
    except AtpsimError as error:
        raise SimulationError(error.message, param=key) from None


def _check_names(hardware: str | None, placement: str) -> None:
    if hardware is not None and hardware not in profile_names() and not hardware.endswith((".yaml", ".yml")):
        raise SimulationError(f"unknown hardware profile {hardware!r}{did_you_mean(hardware, profile_names())}",
                              param="hardware")  # fmt: skip
    if placement not in placement_names():
        raise SimulationError(f"unknown placement {placement!r}{did_you_mean(placement, placement_names())}",
                              param="placement")  # fmt: skip


def _check_plan_options(devices: int | None, chunks: Sequence[int]) -> None:
    if devices is not None and (isinstance(devices, bool) or devices < 1):
        raise SimulationError(f"expected a GPU count >= 1, got {devices!r}", param="devices")
    if not chunks or any(isinstance(c, bool) or c < 1 for c in chunks):
        raise SimulationError(f"expected chunk counts >= 1, got {list(chunks)!r}", param="chunks")


def _entry(point: SweepPoint, with_analytic: bool, calibrated: Mapping[str, float] | None,
           draws: Draws | None = None, sources: tuple[str, ...] = ()) -> PlanEntry:  # fmt: skip
    des = StepPrediction.from_row(point, simulate_point(point))
    analytic = None
    if with_analytic:
        analytic_point = replace(point, mode="analytic", calibration=calibrated)
        analytic = StepPrediction.from_row(analytic_point, simulate_point(analytic_point))
    drawn = point_draws(point, draws, sources) if draws is not None else None
    return PlanEntry(point.mesh, point.chunks, des, analytic, drawn)


def _calibration(name: str, topology: str | Mapping[str, Any]) -> Calibration | None:
    """Eq. 2's calibrated bandwidths the name asks for, or None to derive them."""
    if name not in CALIBRATIONS:
        raise SimulationError(f"expected one of {list(CALIBRATIONS)}, got {name!r}", param="calibration")
    if name == "paper-ic1" or (name == "auto" and topology == "ic1"):
        return PAPER_IC1_CALIBRATION
    return None
