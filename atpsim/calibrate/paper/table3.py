"""The paper's Table 3 and IC1 calibration as data, and the simulation of one Table 3 cell.

Source: Cheng et al., "ATP: Adaptive Tensor Parallelism for Foundation Models", Table 3
("Overlapping Optimization for Different Interconnect Topologies (TeraFLOP/s per GPU)": 8 GPUs,
M2-M4 on IC1-IC4, Baseline = chunk 1, then chunk 2 and 4; shared/paper/
atp-adaptive-tensor-parallelism.md, Section 5.2) and Section 5.3 (IC1's calibrated all-reduce
bandwidths). Units: TFLOP/s per GPU in the paper's 2^40 unit (atp-paper-facts.md, "Units").
The M4 rows are held out for blind validation: they are not here and nothing fits to them.

A cell's prediction is the best simulated mesh among the factorizations of 8 GPUs, because
the paper's baseline "represents the performance under the optimal ATP strategy".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from atpsim.analytic.model import PAPER_IC1_CALIBRATION
from atpsim.compute.hardware import load_profile, topology_hardware
from atpsim.compute.models import ModelConfig, model_preset
from atpsim.engine.collective import run_collective
from atpsim.engine.step.run import simulate_des_step
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.topology.graph import Topology
from atpsim.topology.presets import build_preset

SOURCE = (
    "ATP paper (Cheng et al.), Table 3, Section 5.2: TFLOP/s per GPU (2^40 unit), 8 GPUs, "
    "optimal ATP mesh; shared/paper/atp-adaptive-tensor-parallelism.md"
)
PAPER_UNIT_FLOPS = 2.0**40
N_GPUS = 8
TOPOLOGIES = ("ic1", "ic2", "ic3", "ic4")
CHUNKS = (1, 2, 4)
#: Chunk counts whose cells are fitted (the Baseline row) and those kept to check the fit.
FIT_CHUNKS = (1,)
CHECK_CHUNKS = (2, 4)

#: Table 3, rows M2 and M3: model -> topology -> (Baseline, Chunk=2, Chunk=4).
_TABLE3: dict[str, dict[str, tuple[float, float, float]]] = {
    "M2": {
        "ic1": (3.45, 3.46, 3.51),
        "ic2": (42.82, 43.59, 43.73),
        "ic3": (97.45, 100.38, 98.20),
        "ic4": (15.31, 17.20, 18.62),
    },
    "M3": {
        "ic1": (6.68, 6.79, 6.72),
        "ic2": (73.61, 75.27, 75.95),
        "ic3": (151.98, 152.64, 151.79),
        "ic4": (22.47, 26.09, 26.18),
    },
}

#: The optimal mesh the paper reports at 8 GPUs without chunking (Section 5.3 and Figure 11):
#: IC1 DeviceMesh(2, 4) ("mainly due to the use of DeviceMesh(2,4)", Section 5.1), IC2 and IC3
#: ATP-1 = DeviceMesh(8, 1). None is known for IC4 at 8 GPUs (Figure 11 shows 16).
PAPER_OPTIMAL_MESH: dict[str, tuple[int, int]] = {"ic1": (2, 4), "ic2": (8, 1), "ic3": (8, 1)}

#: Bytes per element under which the paper's calibrated IC1 bandwidths are read. Eq. 2 counts
#: tensor sizes in elements; the printed B values match Table 3's IC1 cells only if an element
#: is counted as 4 bytes (the lead's note in atpsim.analytic.model and `python -m
#: atpsim.calibrate.paper --b-element-bytes 2`, which fits far worse), so the bandwidth in
#: fp16 bytes per second is the printed value x 2 / 4. An interpretation, kept visible.
PAPER_B_ELEMENT_BYTES = 4
#: Message size (bytes per rank) at which IC1's all-reduce bandwidths are simulated: M2's
#: [b·s, h] fp16 activation, large enough that latency does not matter.
B_MESSAGE_BYTES = 4 * 2048 * 4096 * 2


@dataclass(frozen=True)
class Table3Cell:
    """One cell: *model* (M2, M3 or M4) on *topology* (ic1..ic4) with *chunks*; *paper* is the
    paper's TFLOP/s per GPU (2^40 unit), None where held out."""

    model: str
    topology: str
    chunks: int
    paper: float | None = None

    @property
    def label(self) -> str:
        return f"{self.model} {self.topology} chunk={self.chunks}"


@dataclass(frozen=True)
class BandwidthTarget:
    """One of IC1's calibrated all-reduce bandwidths (Section 5.3): dimension *dim* of
    *mesh*; *paper_Bps* as printed, *target_Bps* in fp16 bytes/s (see PAPER_B_ELEMENT_BYTES)."""

    name: str
    mesh: DeviceMesh
    dim: int
    paper_Bps: float
    target_Bps: float


@dataclass(frozen=True)
class CellPrediction:
    """A simulated cell: the best mesh, its TFLOP/s per GPU (2^40 unit) and every mesh's."""

    cell: Table3Cell
    mesh: DeviceMesh
    tflops: float
    by_mesh: Mapping[tuple[int, int], float]

    @property
    def error(self) -> float | None:
        """Relative error against the paper (prediction / paper - 1), None where held out."""
        return None if self.cell.paper is None else self.tflops / self.cell.paper - 1.0


def table3_cells(chunks: tuple[int, ...] = CHUNKS) -> list[Table3Cell]:
    """The paper's cells (M2, M3 on IC1-IC4) with these chunk counts, model-major."""
    return [
        Table3Cell(model, topo, c, values[CHUNKS.index(c)])
        for model, by_topo in _TABLE3.items()
        for topo, values in by_topo.items()
        for c in chunks
    ]


def fit_cells() -> list[Table3Cell]:
    """The fit set's cells: the Baseline (chunk 1) row of M2 and M3 on IC1-IC4."""
    return table3_cells(FIT_CHUNKS)


def check_cells() -> list[Table3Cell]:
    """The check set: the chunk 2 and 4 cells, predicted and never fitted."""
    return table3_cells(CHECK_CHUNKS)


def held_out_cells() -> list[Table3Cell]:
    """M4 on IC1-IC4 at every chunk count, without paper values (held out, Table 3)."""
    return [Table3Cell("M4", topo, c) for topo in TOPOLOGIES for c in CHUNKS]


def bandwidth_targets(element_bytes: int = PAPER_B_ELEMENT_BYTES) -> list[BandwidthTarget]:
    """IC1's three calibrated bandwidths (Section 5.3) with their fp16-byte targets."""
    names = {(2, 4, "B1_Bps"): "B1 of (2,4)", (2, 4, "B2_Bps"): "B2 of (2,4)"}
    targets = []
    for (d1, d2), values in PAPER_IC1_CALIBRATION.items():
        for key, paper_Bps in values.items():
            name = names.get((d1, d2, key), f"{key[:2]} of ({d1},{d2})")
            dim = 1 if key.startswith("B1") else 2
            target = paper_Bps * 2 / element_bytes
            targets.append(BandwidthTarget(name, DeviceMesh(d1, d2), dim, paper_Bps, target))
    return targets


def candidate_meshes(n_gpus: int = N_GPUS) -> list[DeviceMesh]:
    """Every DeviceMesh(d1, d2) with d1 · d2 = *n_gpus*: the search space of the optimal mesh."""
    return factorizations(n_gpus)


def cell_topology(name: str, overrides: Mapping[str, Any] | None = None) -> Topology:
    """Preset *name* (8 GPUs; ic4 resized to 2 nodes) with parameter *overrides*."""
    return build_preset(name, dict(overrides or {}), n_gpus=N_GPUS)


def tflops_paper_unit(model: ModelConfig, step_time_s: float, n_gpus: int = N_GPUS) -> float:
    """TFLOP/s per GPU in the paper's 2^40 unit: step FLOPs / 2^40 / step time / GPUs."""
    return model.step_flops() / PAPER_UNIT_FLOPS / step_time_s / n_gpus


def simulate_cell(
    cell: Table3Cell, topology: Topology | None = None, profile: Any = None
) -> CellPrediction:
    """Simulate *cell* on every candidate mesh (the step simulator's default: collectives as
    NCCL runs them, its tuner's algorithm) and keep the best. *topology* defaults to the preset, *profile* to the preset's hardware profile."""
    topology = topology or cell_topology(cell.topology)
    profile = profile or load_profile(topology_hardware(topology))
    model = model_preset(cell.model)
    by_mesh = {}
    for mesh in candidate_meshes():
        result = simulate_des_step(topology, profile, model, mesh, cell.chunks, "auto")
        by_mesh[(mesh.d1, mesh.d2)] = tflops_paper_unit(model, result.step_time_s)
    best = max(by_mesh, key=lambda key: (by_mesh[key], key))
    return CellPrediction(cell, DeviceMesh(*best), by_mesh[best], by_mesh)


def simulate_bandwidths(
    topology: Topology, targets: list[BandwidthTarget] | None = None
) -> dict[str, float]:
    """The all-reduce algorithm bandwidth (message bytes / time, fp16 bytes/s) the event
    engine gives each of IC1's calibrated mesh dimensions on *topology*, all groups at once."""
    result = {}
    for target in targets or bandwidth_targets():
        groups = target.mesh.groups(target.dim)
        run = run_collective(topology, "all_reduce", "ring", groups, B_MESSAGE_BYTES)
        result[target.name] = B_MESSAGE_BYTES / run.time_s
    return result
