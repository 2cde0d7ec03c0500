"""`atpsim plan`: rank every mesh (and chunk count) by simulated step time, Eq. 2 beside it.

Each candidate is a :class:`SweepPoint` simulated twice through :func:`atpsim.api.simulate_point`,
once by the event engine (``des``) and once by the paper's model (``analytic``), so the plan
uses exactly the code paths a sweep uses. The DES ranks the candidates; the analytic column
shows what ATP's own planner (hierarchical matrix + Eq. 2-4) would have chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from atpsim.compute.models import ModelConfig
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.scenario.point import SweepPoint


@dataclass(frozen=True)
class PlanEntry:
    """One candidate: its DES row and its analytic row (None where Eq. 2 has no footing)."""

    mesh: DeviceMesh
    chunks: int
    des: dict[str, Any]
    analytic: dict[str, Any] | None


@dataclass(frozen=True)
class Plan:
    """Candidates fastest first by simulated step time, and each mode's choice of mesh."""

    topology_label: str
    n_devices: int
    model: ModelConfig
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
        return min(candidates, key=lambda e: (e.analytic["comm_time_s"], e.mesh.d2))  # type: ignore[index]

    @property
    def agree(self) -> bool:
        choice = self.analytic_choice
        return choice is None or (choice.mesh.d1, choice.mesh.d2) == (
            self.des_choice.mesh.d1,
            self.des_choice.mesh.d2,
        )


def plan_meshes(
    topology_spec: Any,
    model: ModelConfig,
    *,
    n_devices: int | None = None,
    chunks: tuple[int, ...] = (1,),
    algorithm: str = "ring",
    hardware: str | None = None,
    placement: str = "row-major",
    calibration: dict[tuple[int, int], dict[str, float]] | None = None,
) -> Plan:
    """Simulate every DeviceMesh(d1, d2) of *n_devices* GPUs for each of *chunks* on the
    topology *topology_spec*; *calibration* (Eq. 2's B1, B2 per mesh) feeds the analytic column."""
    from atpsim.api import simulate_point
    from atpsim.topology.spec import load_topology, topology_label

    topology = load_topology(topology_spec, n_gpus=n_devices, source=f"--topology {topology_spec}")
    n = n_devices or topology.n_gpus
    profile = hardware or topology.meta.get("hardware", "a100-sxm4-80gb")
    label = topology_label(topology_spec)
    entries = []
    for mesh in factorizations(n):
        placed = DeviceMesh(mesh.d1, mesh.d2, placement)
        calibrated = (calibration or {}).get((mesh.d1, mesh.d2))
        for chunk in chunks:
            point = SweepPoint("plan", topology_spec, label, n, profile, model, placed, chunk, algorithm, "des")
            des = simulate_point(point)
            analytic = None
            if calibration is None or calibrated is not None:
                analytic = simulate_point(_as_analytic(point, calibrated))
            entries.append(PlanEntry(placed, chunk, des, analytic))
    entries.sort(key=lambda e: (e.des["step_time_s"], e.mesh.d2, e.chunks))
    note = "paper's calibrated B1, B2 (Section 5.3)" if calibration else "derived from the topology's matrix"
    return Plan(label, n, model, tuple(entries), note)


def _as_analytic(point: SweepPoint, calibrated: dict[str, float] | None) -> SweepPoint:
    from dataclasses import replace

    return replace(point, mode="analytic", calibration=calibrated)
