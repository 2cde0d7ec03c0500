"""`atpsim.plan`: rank every mesh (and chunk count) by simulated step time, Eq. 2 beside it.

Each candidate is a :class:`SweepPoint` simulated twice through
:func:`atpsim.api.point.simulate_point`, once by the event engine (``des``) and once by the
paper's model (``analytic``), so a plan uses exactly the code paths a sweep uses. The DES
ranks the candidates; the analytic column shows what ATP's own planner (hierarchical matrix +
Eq. 2-4) would have chosen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from atpsim.api.point import simulate_point
from atpsim.api.step import DEFAULT_HARDWARE, StepPrediction
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.scenario.point import SweepPoint

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
    algorithm: str = "ring",
    hardware: str | None = None,
    placement: str = "row-major",
    calibration: str = "auto",
) -> Plan:
    """Simulate every DeviceMesh(d1, d2) of *devices* GPUs (default: all of the topology) for
    each chunk count in *chunks* and rank them by simulated step time.

    *calibration* picks Eq. 2's B1, B2 for the analytic column: ``"auto"`` (the paper's
    Section 5.3 values on ``ic1``, else derived from the topology's hierarchical matrix),
    ``"paper-ic1"`` or ``"none"`` (always derived).

    >>> import atpsim
    >>> best = atpsim.plan("ic1", "M2").des_choice
    >>> (best.mesh.d1, best.mesh.d2)
    (2, 4)
    """
    from atpsim.topology.spec import load_topology, topology_label

    config = model if isinstance(model, ModelConfig) else model_preset(model)
    chosen = _calibration(calibration, topology)
    topo = load_topology(topology, n_gpus=devices, source=f"--topology {topology}")
    n = devices or topo.n_gpus
    profile = hardware or topo.meta.get("hardware", DEFAULT_HARDWARE)
    label = topology_label(topology)
    entries = []
    for mesh in factorizations(n):
        placed = DeviceMesh(mesh.d1, mesh.d2, placement)
        calibrated = None if chosen is None else chosen.get((mesh.d1, mesh.d2))
        for chunk in chunks:
            point = SweepPoint("plan", topology, label, n, profile, config, placed, chunk, algorithm, "des")
            entries.append(_entry(point, chosen is None or calibrated is not None, calibrated))
    entries.sort(key=lambda e: (e.des.step_time_s, e.mesh.d2, e.chunks))
    note = "paper's calibrated B1, B2 (Section 5.3)" if chosen else "derived from the topology's matrix"
    return Plan(label, n, config, profile, algorithm, tuple(entries), note)


def _entry(point: SweepPoint, with_analytic: bool, calibrated: Mapping[str, float] | None) -> PlanEntry:
    des = StepPrediction.from_row(point, simulate_point(point))
    analytic = None
    if with_analytic:
        analytic_point = replace(point, mode="analytic", calibration=calibrated)
        analytic = StepPrediction.from_row(analytic_point, simulate_point(analytic_point))
    return PlanEntry(point.mesh, point.chunks, des, analytic)


def _calibration(name: str, topology: str | Mapping[str, Any]) -> Calibration | None:
    """Eq. 2's calibrated bandwidths the name asks for, or None to derive them."""
    from atpsim.analytic.model import PAPER_IC1_CALIBRATION

    if name not in CALIBRATIONS:
        raise SimulationError(f"expected one of {list(CALIBRATIONS)}, got {name!r}", key="--calibration")
    if name == "paper-ic1" or (name == "auto" and topology == "ic1"):
        return PAPER_IC1_CALIBRATION
    return None
