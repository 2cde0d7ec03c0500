"""The paper's analytical model: Eq. 3 (mesh bandwidths from the matrix), Eq. 4 (Rabenseifner),
Eq. 2 (tensor-parallel communication time), the IC5/IC6 closed form, and ATP's mesh choice.

**Eq. 2 in bytes.** The paper writes T_comm = 2·L·b·s·(7h/(d1·B2) + 2h/(d2·B1)) with tensor
sizes in elements; with B in bytes/s we multiply by the element size (2 bytes for fp16). With the
paper's calibrated IC1 bandwidths (B1 = 1.20 GB/s, B2 = 4.95 GB/s on DeviceMesh(2, 4);
B1 = 0.97 GB/s on DeviceMesh(8, 1)) this gives, per layer of M2 (b = 4, s = 2048, h = 4096):
0.151 s on DeviceMesh(2, 4) and 0.277 s on DeviceMesh(8, 1), 45.5 % less (the paper's "46 %").
Table 3's 3.45 TFLOP/s per GPU for M2 on IC1 is a 0.353 s step per layer (9.75 x 2^40 FLOP /
3.45 / 8 GPUs); so Eq. 2 in fp16 bytes leaves about 0.2 s to compute and overheads, far more
than an A100 needs for 1.3 TFLOP: the calibrated bandwidths explain the ranking, not the whole
step. (Counting 4 bytes per element would give 0.30 s, closer to the step; we keep the model's
dtype, as the tensors the paper all-reduces are fp16.)

**Eq. 3, generalized.** The paper divides the group bandwidth of every layer that mesh dimension
1 spans by d2, "since d2 groups of all-reduce share the interconnection bandwidth", and corrects
a group bandwidth by the P2P matrix "when the all-reduce algorithm cannot utilize the full group
bandwidth" (Figure 7(a): B'2 of DeviceMesh(8, 2) is one GPU pair's 200 GB/s, not 600). Here:

    B'_k = min over the ranks r (of any layer) that a dimension-k group spans of
           min(GroupBW(r), sum of P2P(r, r') over the other ranks r' of that group) / s(r)

where s(r) is the number of dimension-k groups with GPUs in rank r. That is d2 at a layer whose
ranks hold whole mesh rows (the paper's case: 12.5 GB/s for DeviceMesh(8, 2) on Figure 7(a)) and
1 where a rank is one GPU, which is what makes B'1 = B'2 = GroupBW on an NVLink-Network switch,
as the paper assumes for IC5 and IC6 (Section 5.4). ``sharing="paper"`` divides by d2 at every
layer of dimension 1 instead, as Eq. 3 is printed. The two readings disagree on single-layer
fabrics: on 8 GPUs of one switch, the closed form below (the paper's own) gives DeviceMesh(4, 2)
3.25 Delta and DeviceMesh(8, 1) 3.5 Delta, so "ranks" picks (4, 2), while "paper" picks (8, 1),
which is the choice the paper reports for IC3. A P2P sum of 0 (the ranks of a group are not
neighbours, e.g. rings 0 and 2 of a 4x4 torus) means traffic is relayed through other ranks;
the group bandwidth is then used uncorrected.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

import numpy as np

from atpsim.analytic.hcm import HcmGroup, HierarchicalCommMatrix, derive_hcm
from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh, factorizations
from atpsim.topology.graph import Topology

Sharing = Literal["ranks", "paper"]
SHARING_MODES: tuple[str, ...] = ("ranks", "paper")
#: How a calibration names a mesh: the mesh, ``(d1, d2)`` or ``"d1xd2"``.
MeshKey = DeviceMesh | tuple[int, int] | str

#: The paper's calibrated IC1 all-reduce bandwidths (Section 5.3), bytes/s, Eq. 2's B1 and B2.
PAPER_IC1_CALIBRATION: dict[tuple[int, int], dict[str, float]] = {
    (2, 4): {"B1_Bps": 1.20e9, "B2_Bps": 4.95e9},
    (8, 1): {"B1_Bps": 0.97e9},
}


class MeshEstimate(NamedTuple):
    """One mesh of the analytical plan: Eq. 2's time and the Eq. 4 bandwidths it used (bytes/s;
    infinite for a mesh dimension of size 1, which does not communicate)."""

    mesh: DeviceMesh
    t_comm_s: float
    B1_Bps: float
    B2_Bps: float


# -- Eq. 3 ------------------------------------------------------------------------------------
def mesh_bandwidths(
    hcm: HierarchicalCommMatrix, mesh: DeviceMesh, sharing: Sharing = "ranks"
) -> tuple[float, float]:
    """(B'1, B'2) of *mesh* on the matrix *hcm* by Eq. 3 (bytes/s; inf for a size-1 dimension)."""
    if sharing not in SHARING_MODES:
        raise AtpsimError(f"sharing must be one of {list(SHARING_MODES)}, got {sharing!r}")
    if mesh.size > hcm.n_gpus:
        raise AtpsimError(f"{mesh} needs {mesh.size} GPUs; {hcm.topology_name} has {hcm.n_gpus}")
    return _dimension_bandwidth(hcm, mesh, 1, sharing), _dimension_bandwidth(hcm, mesh, 2, sharing)


def _dimension_bandwidth(
    hcm: HierarchicalCommMatrix, mesh: DeviceMesh, dim: int, sharing: Sharing
) -> float:
    if mesh.dim_size(dim) == 1:
        return math.inf
    groups = mesh.groups(dim)
    sharers = _sharers(hcm, groups)
    best = math.inf
    for group in groups:
        for (layer, g), ranks in _spanned_ranks(hcm, group).items():
            if sharing == "paper" and dim == 1:
                shares = np.full(len(ranks), float(mesh.d2))
            else:
                shares = np.array([len(sharers[layer, g, r]) for r in ranks], dtype=float)
            corrected = _corrected_group_Bps(hcm.group(layer, g), ranks)
            best = min(best, float(np.min(corrected / shares)))
    return best


def _sharers(
    hcm: HierarchicalCommMatrix, groups: list[list[int]]
) -> dict[tuple[int, int, int], set[int]]:
    """For every (layer, group, rank) position, the mesh groups with a GPU in that rank."""
    sharers: dict[tuple[int, int, int], set[int]] = defaultdict(set)
    for index, group in enumerate(groups):
        for gpu in group:
            for position in hcm.positions(gpu):
                sharers[position].add(index)
    return sharers


def _spanned_ranks(
    hcm: HierarchicalCommMatrix, gpus: Iterable[int]
) -> dict[tuple[int, int], list[int]]:
    """The (layer, group) parents in which *gpus* fall into two or more ranks, with those ranks."""
    ranks: dict[tuple[int, int], set[int]] = defaultdict(set)
    for gpu in gpus:
        for layer, g, r in hcm.positions(gpu):
            ranks[layer, g].add(r)
    return {key: sorted(found) for key, found in sorted(ranks.items()) if len(found) > 1}


def _corrected_group_Bps(parent: HcmGroup, ranks: list[int]) -> np.ndarray:
    """GroupBW of each of *ranks*, capped by its P2P bandwidth to the other *ranks* where that
    is > 0 (0: the ranks are not neighbours and traffic is relayed, so no cap)."""
    group = parent.group_bandwidths_Bps()[ranks]
    p2p = parent.p2p_sums_Bps(ranks)
    return np.where(p2p > 0, np.minimum(group, p2p), group)


# -- Eq. 4 and Eq. 2 -------------------------------------------------------------------------
def algo_bandwidth(bprime_Bps: float, d: int) -> float:
    """Eq. 4: all-reduce algorithm bandwidth d / (2(d - 1)) * B' of Rabenseifner's algorithm on
    *d* ranks, latency ignored; infinite for d = 1 (nothing to reduce)."""
    if d < 1:
        raise AtpsimError(f"a mesh dimension must be >= 1, got {d}")
    return math.inf if d == 1 else d / (2 * (d - 1)) * bprime_Bps


def t_comm_s(model: ModelConfig, mesh: DeviceMesh, B1_Bps: float, B2_Bps: float) -> float:
    """Eq. 2: 2·L·b·s·(7h/(d1·B2) + 2h/(d2·B1)) · bytes per element, in seconds; the B2 term is
    0 when d2 = 1 and the B1 term 0 when d1 = 1 (no communication on that dimension)."""
    d1, d2, h = mesh.d1, mesh.d2, model.hidden
    dim2 = 0.0 if d2 == 1 else 7 * h / (d1 * _positive(B2_Bps, "B2"))
    dim1 = 0.0 if d1 == 1 else 2 * h / (d2 * _positive(B1_Bps, "B1"))
    return 2 * model.layers * model.batch * model.seq * (dim2 + dim1) * model.dtype_bytes


def _positive(bandwidth: float, name: str) -> float:
    if not bandwidth > 0:
        raise AtpsimError(f"{name} must be a positive bandwidth in bytes/s, got {bandwidth!r}")
    return bandwidth


# -- IC5 / IC6 closed form ------------------------------------------------------------------
def delta_s(model: ModelConfig, group_bw_Bps: float) -> float:
    """Delta = 2·L·b·s·h · bytes per element / GroupBW (paper Section 5.4), seconds."""
    layer_bytes = model.layers * model.batch * model.seq * model.hidden * model.dtype_bytes
    return 2 * layer_bytes / _positive(group_bw_Bps, "GroupBW")


def closed_form_units(d1: int, d2: int) -> float:
    """T_comm in units of Delta when B'1 = B'2 = GroupBW: (14·d2 + 4·d1 - 18) / (d1·d2).

    From Eq. 2 and 4: 7h/(d1·B2) = 14h(d2 - 1)/(d1·d2·G) and 2h/(d2·B1) = 4h(d1 - 1)/(d1·d2·G);
    their sum is h(14·d2 + 4·d1 - 18)/(d1·d2·G), and 2·L·b·s·h/G is Delta."""
    return (14 * d2 + 4 * d1 - 18) / (d1 * d2)


def closed_form_t_comm_s(model: ModelConfig, mesh: DeviceMesh, group_bw_Bps: float) -> float:
    """The IC5/IC6 closed form Delta·(14·d2 + 4·d1 - 18)/(d1·d2), seconds."""
    return delta_s(model, group_bw_Bps) * closed_form_units(mesh.d1, mesh.d2)


# -- ATP's choice -----------------------------------------------------------------------------
def estimate_mesh(
    hcm: HierarchicalCommMatrix, model: ModelConfig, mesh: DeviceMesh, sharing: Sharing = "ranks"
) -> MeshEstimate:
    """Eq. 3 -> Eq. 4 -> Eq. 2 for one mesh on the matrix *hcm*."""
    b1_prime, b2_prime = mesh_bandwidths(hcm, mesh, sharing)
    b1, b2 = algo_bandwidth(b1_prime, mesh.d1), algo_bandwidth(b2_prime, mesh.d2)
    return MeshEstimate(mesh, t_comm_s(model, mesh, b1, b2), b1, b2)


def plan_analytic(
    source: Topology | HierarchicalCommMatrix | None,
    model: ModelConfig,
    n_devices: int,
    calibration: Mapping[MeshKey, Mapping[str, float]] | None = None,
    *,
    sharing: Sharing = "ranks",
    include_uncalibrated: bool = False,
    placement: str = "row-major",
) -> list[MeshEstimate]:
    """Every DeviceMesh(d1, d2) of *n_devices* GPUs with Eq. 2's T_comm, fastest first (ties:
    smaller d2 first); ATP's choice is the first.

    *source* (a topology or its matrix) gives B1, B2 through Eq. 3 and 4. *calibration*
    ``{(d1, d2) or "d1xd2": {"B1_Bps": ..., "B2_Bps": ...}}`` replaces them for the meshes it
    names (a value it leaves out is derived). When a calibration is given, only the calibrated
    meshes are ranked unless *include_uncalibrated*: calibrated and derived bandwidths are on
    different footings (IC1 was calibrated because its matrix cannot predict it), so mixing them
    would rank the model's error."""
    table = normalize_calibration(calibration)
    hcm = derive_hcm(source) if isinstance(source, Topology) else source
    meshes = [DeviceMesh(m.d1, m.d2, placement) for m in factorizations(n_devices)]
    if table and not include_uncalibrated:
        meshes = [m for m in meshes if (m.d1, m.d2) in table]
        if not meshes:
            raise AtpsimError(
                f"no calibrated mesh has {n_devices} devices; calibrated: {sorted(table)}",
                key="calibration",
            )
    estimates = [
        _estimate(hcm, model, mesh, table.get((mesh.d1, mesh.d2), {}), sharing) for mesh in meshes
    ]
    return sorted(estimates, key=lambda e: (e.t_comm_s, e.mesh.d2))


def _estimate(
    hcm: HierarchicalCommMatrix | None,
    model: ModelConfig,
    mesh: DeviceMesh,
    calibrated: Mapping[str, float],
    sharing: Sharing,
) -> MeshEstimate:
    needed = [name for name, d in (("B1_Bps", mesh.d1), ("B2_Bps", mesh.d2)) if d > 1]
    if all(name in calibrated for name in needed):
        derived = {"B1_Bps": math.inf, "B2_Bps": math.inf}
    elif hcm is None:
        missing = [name for name in needed if name not in calibrated]
        raise AtpsimError(
            f"{mesh} needs {' and '.join(missing)}: give a topology or calibrate them",
            key=f"calibration.{mesh.d1}x{mesh.d2}",
        )
    else:
        derived = estimate_mesh(hcm, model, mesh, sharing)._asdict()
    b1 = calibrated.get("B1_Bps", derived["B1_Bps"]) if mesh.d1 > 1 else math.inf
    b2 = calibrated.get("B2_Bps", derived["B2_Bps"]) if mesh.d2 > 1 else math.inf
    return MeshEstimate(mesh, t_comm_s(model, mesh, b1, b2), b1, b2)


_MESH_KEY = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


def normalize_calibration(
    calibration: Mapping[MeshKey, Mapping[str, float]] | None,
) -> dict[tuple[int, int], dict[str, float]]:
    """``{(d1, d2): {"B1_Bps", "B2_Bps"}}`` from tuple or "d1xd2" keys; bad keys or values
    raise :class:`AtpsimError` naming them."""
    table: dict[tuple[int, int], dict[str, float]] = {}
    for key, entry in (calibration or {}).items():
        mesh = _mesh_key(key)
        values = {}
        for name, value in entry.items():
            if name not in ("B1_Bps", "B2_Bps"):
                raise AtpsimError(
                    f"unknown bandwidth {name!r}; expected 'B1_Bps' or 'B2_Bps'",
                    key=f"calibration.{mesh[0]}x{mesh[1]}",
                )
            values[name] = _positive(float(value), name)
        table[mesh] = values
    return table


def _mesh_key(key: MeshKey) -> tuple[int, int]:
    if isinstance(key, DeviceMesh):
        return key.d1, key.d2
    if isinstance(key, tuple) and len(key) == 2 and all(isinstance(d, int) for d in key):
        return key
    match = _MESH_KEY.match(str(key))
    if not match:
        raise AtpsimError(f"expected a mesh (d1, d2) or 'd1xd2', got {key!r}", key="calibration")
    return int(match.group(1)), int(match.group(2))
