"""The calibrated parameters: what each means, its unit, its spec value, and where it goes.

Fitted to Table 3's Baseline cells of M2 and M3 on IC1-IC4 and IC1's calibrated bandwidths
(:mod:`atpsim.calibrate.paper.fit`):

- ``gemm_efficiency_max`` (fraction of peak): the GEMM plateau of the paper's software stack
  (PyTorch + cuBLAS of 2022, "we do not use optimized kernels"), the ``efficiency_max`` of the
  A100 GEMM curve (:mod:`atpsim.compute.gemm`, ``model: curve``); spec: 0.8457, the curve fitted
  to modern cuBLASLt measurements. Mostly set by IC3, where communication is small.
- ``layer_overhead_s`` (seconds per transformer layer): the paper stack's fixed time per layer
  outside the modelled ops, framework host work per layer plus the step's non-layer work
  (embedding, loss, optimizer) amortised per layer; the paper-stack profile's
  ``layer_overhead_s`` (:mod:`atpsim.compute.hardware`). Spec: 0 (spec-sheet profiles model
  none). A fixed time weighs more on a small model, so it is what lets M2 (h = 4096) run
  further below the GEMM plateau than M3 (h = 8192) on IC3, where both are compute-bound.
- ``ic1_host_staging_Bps``: each socket's host-memory staging link (copies in and out of pinned
  host memory, NCCL's SHM transport with P2P disabled); in-socket rings share it. Spec: the
  measured host-to-device copy rate, 26.3 GB/s.
- ``ic1_socket_bridge_Bps``: the socket bridge's aggregate rate per direction, shared by every
  cross-socket flow. Spec: 64 GB/s, an assumption (the paper names GMI/QPI without a figure).
- ``ic1_cross_socket_gpu_Bps``: the per-GPU cap on traffic it receives from the other socket
  (a device's DMA into remote memory). No spec (the lane is a calibration structure; see
  :mod:`atpsim.topology.builders.pcie`). These three reproduce the paper's calibrated IC1
  bandwidths: 4 cross-socket pairs share the bridge (B1 of (2,4)), one cross-socket hop of the
  8-GPU ring is lane-bound (B1 of (8,1)), 4-GPU in-socket rings share host staging (B2 of (2,4)).
- ``ic2_pcie_Bps``: every PCIe link of Machine B (the path between NVLink pairs). Spec: Gen4
  x16, 31.5 GB/s.
- ``ic4_nic_Bps``: the effective inter-node rate per node (one NIC per 4-GPU node, Figure
  7(a)). Spec: HDR 200 Gb/s = 25 GB/s.

Measured, not fitted (:mod:`atpsim.calibrate.fit.nccl_overhead`): the per-collective overhead of the
paper-stack profile and IC3's effective NVLink rate, from a measured NCCL all-reduce sweep.

Parameters are fitted in log space (they are positive and span decades), starting from their
spec values, except IC1's three rates, which start from the closed form of the paper's
calibrated bandwidths (:func:`ic1_closed_form`), and the layer overhead, whose spec (0) has no
logarithm: it starts at 0.5 ms and its lower bound, 1 us, stands for "none".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from atpsim.calibrate.fit.nccl_overhead import CollectiveFit, fit_collective
from atpsim.calibrate.paper.table3 import PAPER_B_ELEMENT_BYTES, bandwidth_targets
from atpsim.compute.hardware import HardwareProfile, load_profile

BASE_PROFILE = "a100-sxm4-80gb"
PAPER_STACK_PROFILE = "a100-sxm4-80gb-paper-stack"
GB = 1e9


@dataclass(frozen=True)
class FitParameter:
    """A fitted parameter: *name*, *unit* (as written), *meaning*; *topology* and *key* name
    the preset parameter it sets (*topology* None: the paper-stack profile's *key*); *spec*
    is the uncalibrated value with *spec_source*; *initial* (replaced for IC1's rates by
    :func:`ic1_closed_form`) and the bounds start and bound the fit; *scale* converts the SI
    value to the written unit."""

    name: str
    unit: str
    meaning: str
    topology: str | None
    key: str
    spec: float | None
    spec_source: str
    initial: float
    lower: float
    upper: float
    scale: float = 1.0


PARAMETERS: tuple[FitParameter, ...] = (
    FitParameter(
        "gemm_efficiency_max", "fraction of peak", "GEMM plateau of the paper's stack",
        None, "gemm.efficiency_max", 0.8457, "A100 curve fitted to modern cuBLASLt (AZ)",
        0.8457, 0.2, 0.95,
    ),
    FitParameter(
        "layer_overhead_s", "ms", "per-layer time outside the modelled ops",
        None, "layer_overhead_s", 0.0, "none modelled by spec-sheet profiles",
        0.5e-3, 1e-6, 20e-3, 1e-3,
    ),
    FitParameter(
        "ic1_host_staging_Bps", "GB/s", "per-socket host-memory staging, per direction",
        "ic1", "host_staging_bandwidth_Bps", 26.3 * GB, "measured host->device copy (AZ)",
        26.3 * GB, 0.5 * GB, 64 * GB, GB,
    ),
    FitParameter(
        "ic1_socket_bridge_Bps", "GB/s", "socket bridge aggregate, per direction",
        "ic1", "socket_bandwidth_Bps", 64 * GB, "assumption, no figure in the paper",
        64 * GB, 0.1 * GB, 128 * GB, GB,
    ),
    FitParameter(
        "ic1_cross_socket_gpu_Bps", "GB/s", "per-GPU cap on traffic from the other socket",
        "ic1", "cross_socket_gpu_bandwidth_Bps", None, "none: a calibration structure",
        16 * GB, 0.05 * GB, 32 * GB, GB,
    ),
    FitParameter(
        "ic2_pcie_Bps", "GB/s", "PCIe links between NVLink pairs, per direction",
        "ic2", "pcie_bandwidth_Bps", 31.5 * GB, "PCIe Gen4 x16 [S PCI-SIG]",
        31.5 * GB, 1 * GB, 64 * GB, GB,
    ),
    FitParameter(
        "ic4_nic_Bps", "GB/s", "effective inter-node rate per node, per direction",
        "ic4", "nic_bandwidth_Bps", 25 * GB, "HDR 200 Gb/s [S]",
        25 * GB, 0.2 * GB, 50 * GB, GB,
    ),
)  # fmt: skip


def target(p: FitParameter) -> str:
    """What *p* sets, as an uncertainty record names it: ``preset:NAME:KEY`` or
    ``profile:a100-sxm4-80gb-paper-stack:KEY``."""
    return f"preset:{p.topology}:{p.key}" if p.topology else f"profile:{PAPER_STACK_PROFILE}:{p.key}"


def parameter_names() -> list[str]:
    return [p.name for p in PARAMETERS]


def initial_values(element_bytes: int = PAPER_B_ELEMENT_BYTES) -> list[float]:
    """Where the fit starts: the spec values, and IC1's three rates from the closed form of the
    paper's calibrated bandwidths (:func:`ic1_closed_form`), so the start already reproduces
    them and the fit does not wander into a basin where another IC1 link is the bottleneck."""
    start = {p.name: p.initial for p in PARAMETERS}
    start.update(ic1_closed_form(element_bytes))
    return [start[p.name] for p in PARAMETERS]


def ic1_closed_form(element_bytes: int = PAPER_B_ELEMENT_BYTES) -> dict[str, float]:
    """IC1's link rates that give the paper's calibrated bandwidths exactly (fp16 bytes/s,
    targets of :func:`~atpsim.calibrate.paper.table3.bandwidth_targets`), without contention
    elsewhere: the 4 cross-socket pairs of DeviceMesh(2, 4) share the bridge and a pair's
    algbw is its flow rate (B1 = bridge / 4); the two 4-GPU in-socket rings share their
    socket's host staging, 4 flows, algbw = busbw · 4/6 (B2 = host / 4 · 4/6); the 8-GPU ring's
    one crossing each way is lane-bound, algbw = lane · 8/14 (B1 of DeviceMesh(8, 1))."""
    target = {(t.mesh.d1, t.mesh.d2, t.dim): t.target_Bps for t in bandwidth_targets(element_bytes)}
    return {
        "ic1_socket_bridge_Bps": 4 * target[(2, 4, 1)],
        "ic1_host_staging_Bps": 6 * target[(2, 4, 2)],
        "ic1_cross_socket_gpu_Bps": 14 / 8 * target[(8, 1, 1)],
    }


def as_mapping(values: Sequence[float]) -> dict[str, float]:
    """Parameter name -> value, for *values* in the order of :data:`PARAMETERS`."""
    return dict(zip(parameter_names(), (float(v) for v in values), strict=True))


def measured_collective() -> CollectiveFit:
    """Per-collective overhead and NVSwitch bus rate from the measured NCCL sweep."""
    return fit_collective()


def topology_overrides(values: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Preset -> parameter overrides: the fitted links. IC3 keeps its links at spec: the
    NCCL profile its builder names (``a100``, fitted to the Azure curve by
    ``python -m atpsim.calibrate.fit.nccl_curve``) holds what NCCL achieves on them."""
    overrides: dict[str, dict[str, float]] = {"ic1": {}, "ic2": {}, "ic3": {}, "ic4": {}}
    for p in PARAMETERS:
        if p.topology is not None:
            overrides[p.topology][p.key] = values[p.name]
    return overrides


def paper_stack_profile(values: Mapping[str, float]) -> HardwareProfile:
    """The A100 profile with the paper stack's GEMM plateau (curve model, no modern measured
    corrections) and per-layer overhead, and the measured per-collective overhead."""
    base = load_profile(BASE_PROFILE)
    gemm = dataclasses.replace(
        base.gemm, model="curve", efficiency_max=values["gemm_efficiency_max"], points=()
    )
    return dataclasses.replace(
        base,
        name=PAPER_STACK_PROFILE,
        description=f"{base.description}, as run by the ATP paper's software stack (calibrated)",
        gemm=gemm,
        collective_overhead_s=measured_collective().overhead_s,
        layer_overhead_s=values["layer_overhead_s"],
    )
