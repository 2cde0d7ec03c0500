"""The machine a run ran on, and how each of its numbers came to be: one line that every
command, table and report prints (issue 23, "the machine as it is").

A machine is up to five parts, each with a status:

- *hardware*: the GPU profile that computes (:func:`atpsim.compute.hardware.topology_hardware`)
  and its file's ``provenance.status`` (:data:`~atpsim.compute.hardware.PROVENANCE_STATUSES`),
  ``unstated`` for a profile file that gives none;
- *NCCL*: the protocol profile its collectives run (``meta["nccl"]``,
  :func:`atpsim.collectives.protocols.topology_profile`) and its entry's ``provenance`` in
  ``atpsim/data/nccl.yaml``, with which parameters are fitted, measured or derived (its
  ``parts``); ``spec`` (derived: NCCL's line formats, nothing fitted) on an NCCL machine whose
  links name no entry; ``none`` on a theory fabric whose collectives run on bare links
  (:func:`~atpsim.collectives.protocols.runs_nccl`);
- *links* (calibrated presets only, the paper's ic1, ic2): the link rates the preset's fit
  set (``atpsim/data/presets.yaml``: the keys of its ``spec`` entry, which keeps what the fit
  replaced, whose fitted rate the built graph carries), ``fitted``;
- *NIC* (InfiniBand clusters only): the port rate, ``spec`` where the builder took its
  generation's DGX NIC (:data:`~atpsim.topology.builders.cluster.DGX_NIC_BPS`), ``fitted``
  where a calibrated preset's fit set it (ic4), ``given`` where the caller named it;
- *GPU-NIC PCIe* (InfiniBand clusters only): the x16 link's generation and rate, ``spec``
  (PCI-SIG, :data:`~atpsim.topology.builders.pcie.PCIE_X16_BPS`).

A topology without NICs or GPU-NIC PCIe links has no such parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from atpsim.collectives import protocols
from atpsim.compute.hardware import PROVENANCE_STATUSES, hardware_profile, topology_hardware
from atpsim.errors import AtpsimError
from atpsim.topology.builders.cluster import DGX_NIC_BPS, HDR_BPS, NDR_BPS
from atpsim.topology.builders.pcie import PCIE_X16_BPS
from atpsim.topology.graph import Topology
from atpsim.topology.presets import preset_info
from atpsim.topology.spec import load_topology
from atpsim.units import parse_bandwidth

#: A part's status: how its numbers came to be (:data:`PROVENANCE_STATUSES`), or ``given`` (the
#: caller's number), ``unstated`` (a file that says nothing) or ``none`` (no such machinery).
PART_STATUSES = (*PROVENANCE_STATUSES, "given", "unstated", "none")
#: How each kind of part is named in the line.
PART_LABELS = {"hardware": "hardware", "nccl": "NCCL", "links": "links of", "nic": "NIC",
               "pcie": "GPU-NIC PCIe"}  # fmt: skip
#: The preset parameter of an ib-cluster's NIC rate.
NIC_KEY = "nic_bandwidth_Bps"
#: InfiniBand rates by name (per port and direction, B/s).
NIC_NAMES = {HDR_BPS: "HDR", NDR_BPS: "NDR"}
_NCCL_KEYS = {"status", "parts", "summary"}
#: What the line says of :data:`~atpsim.collectives.protocols.SPEC_PROFILE`.
SPEC_BREAKDOWN = (("derived", ("line formats only",)),)


@dataclass(frozen=True)
class MachinePart:
    """One part of a machine: its *kind* (a key of :data:`PART_LABELS`), *name* (a profile
    name, or a rate as the line prints it), *status* (one of :data:`PART_STATUSES`), a short
    *note* (whose default, what a fit replaced) and, for an NCCL profile, its *breakdown*:
    (status, parameter groups) pairs in the data file's order."""

    kind: str
    name: str
    status: str
    note: str = ""
    breakdown: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def text(self) -> str:
        """``NIC 400 Gb/s NDR (spec, the DGX H100's)``; an NCCL profile with a breakdown
        ``NCCL h100 (fitted: Simple, NVLS; derived: LL128, fixed costs)``."""
        if self.breakdown:
            detail = "; ".join(f"{status}: {', '.join(names)}" for status, names in self.breakdown)
        elif self.status == "none":
            detail = self.note
        else:
            detail = ", ".join(part for part in (self.status, self.note) if part)
        return f"{PART_LABELS[self.kind]} {self.name} ({detail})"


@dataclass(frozen=True)
class MachineProvenance:
    """The machine *topology* (its name) ran as: its :class:`MachinePart` s, hardware first."""

    topology: str
    parts: tuple[MachinePart, ...]

    def part(self, kind: str) -> MachinePart | None:
        """The part of *kind* (``hardware``, ``nccl``, ``nic``, ``pcie``), None where the
        machine has none."""
        return next((part for part in self.parts if part.kind == kind), None)

    def text(self) -> str:
        """The parts, comma-separated."""
        return ", ".join(part.text() for part in self.parts)

    def line(self, label: str | None = None) -> str:
        """``# machine: hardware h100-sxm (fitted), NCCL h100 (...), ...``; with *label* (one
        of several machines) ``# machine (LABEL): ...``."""
        head = "# machine" if label is None else f"# machine ({label})"
        return f"{head}: {self.text()}"


def machine_provenance(
    topology: Topology | str | Mapping[str, Any], hardware: str | None = None
) -> MachineProvenance:
    """The machine a run on *topology* (a Topology, or a spec :func:`load_topology` takes)
    with *hardware* (None: the topology's, :func:`topology_hardware`) runs as, each part with
    its status (module docstring). Raises AtpsimError where the profile or an NCCL entry's
    provenance cannot be read."""
    topo = topology if isinstance(topology, Topology) else load_topology(topology)
    name = topology_hardware(topo, hardware)
    parts = [hardware_part(name), nccl_part(topo)]
    fitted = preset_fitted_keys(topo)
    links = [key for key in fitted if key != NIC_KEY]
    if links:
        parts.append(links_part(str(topo.meta["preset"]), links))
    if "nic_Bps" in topo.meta:
        parts.append(nic_part(topo.meta, NIC_KEY in fitted))
    if "pcie_gen" in topo.meta and "nic_Bps" in topo.meta:
        parts.append(pcie_part(int(topo.meta["pcie_gen"])))
    return MachineProvenance(topo.name, tuple(parts))


def hardware_part(name: str) -> MachinePart:
    """Hardware profile *name* (packaged or a file) with its file's status."""
    status = hardware_profile(name).provenance_status
    return MachinePart("hardware", name, status or "unstated")


def nccl_part(topology: Topology) -> MachinePart:
    """The NCCL profile *topology* runs, with its entry's status and breakdown."""
    if not protocols.runs_nccl(topology):
        return MachinePart("nccl", "none", "none", "bare links")
    profile = protocols.topology_profile(topology)
    if profile is protocols.SPEC_PROFILE:
        return MachinePart("nccl", profile.name, "derived", breakdown=SPEC_BREAKDOWN)
    found = protocols.profile_provenance(profile.name)
    if not found:
        return MachinePart("nccl", profile.name, "unstated")
    status, breakdown = checked_nccl_provenance(profile.name, found)
    return MachinePart("nccl", profile.name, status, breakdown=breakdown)


def checked_nccl_provenance(
    name: str, found: Mapping[str, Any]
) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    """(status, breakdown) of NCCL entry *name*'s provenance mapping *found*: keys
    ``status``, ``parts`` (``{status: [parameter group, ...]}``), ``summary``; every status
    one of :data:`PROVENANCE_STATUSES`. Errors name the key in ``nccl.yaml``."""
    key = f"{name}.provenance"
    unknown = sorted(set(found) - _NCCL_KEYS)
    if unknown:
        raise AtpsimError(f"unknown key; expected {sorted(_NCCL_KEYS)}", source="nccl.yaml",
                          key=f"{key}.{unknown[0]}")  # fmt: skip
    parts = found.get("parts") or {}
    if not isinstance(parts, Mapping):
        raise AtpsimError("expected a mapping of status -> parameter groups", source="nccl.yaml",
                          key=f"{key}.parts")  # fmt: skip
    for status, where in [(found.get("status"), "status"), *((s, f"parts.{s}") for s in parts)]:
        if status not in PROVENANCE_STATUSES:
            raise AtpsimError(f"expected one of {list(PROVENANCE_STATUSES)}, got {status!r}",
                              source="nccl.yaml", key=f"{key}.{where}")  # fmt: skip
    breakdown = tuple((str(s), tuple(str(n) for n in names)) for s, names in parts.items())
    return str(found["status"]), breakdown


def preset_fitted_keys(topology: Topology) -> list[str]:
    """The parameters of *topology*'s preset that its calibration fitted (the keys of the
    preset's ``spec`` entry) and that *topology* carries at the fitted rate (a link of that
    bandwidth; an override gives another), in the data file's order."""
    preset = topology.meta.get("preset")
    if not isinstance(preset, str):
        return []
    info = preset_info(preset)
    params = info.get("params") or {}
    rates = {float(bandwidth) for bandwidth in topology.links.bandwidth_Bps}
    return [key for key in info.get("spec") or {}
            if key in params and parse_bandwidth(params[key]) in rates]  # fmt: skip


def links_part(preset: str, keys: list[str]) -> MachinePart:
    """The link rates of *preset* its calibration fitted (*keys*, its parameters)."""
    names = tuple(key.removesuffix("_Bps").removesuffix("_bandwidth").replace("_", " ") for key in keys)
    return MachinePart("links", preset, "fitted", breakdown=(("fitted", names),))


def nic_part(meta: Mapping[str, Any], fitted: bool = False) -> MachinePart:
    """An InfiniBand cluster's NIC (its *meta*: ``nic_Bps``, ``nic_given``, ``dgx_defaults``,
    ``preset``): the generation's DGX NIC (spec), a calibrated preset's (*fitted*, with the
    rate its fit replaced) or the caller's (given)."""
    nic_Bps = float(meta["nic_Bps"])
    named = NIC_NAMES.get(nic_Bps)
    name = f"{nic_Bps * 8 / 1e9:.4g} Gb/s" + (f" {named}" if named else "")
    if not meta.get("nic_given"):
        generation = str(meta.get("dgx_defaults", ""))
        default = DGX_NIC_BPS.get(generation) == nic_Bps
        return MachinePart("nic", name, "spec", f"the DGX {generation.upper()}'s" if default else "")
    if fitted:
        spec = preset_info(str(meta["preset"]))["spec"][NIC_KEY]
        return MachinePart("nic", name, "fitted", f"the {meta['preset']} preset's; spec {spec}")
    return MachinePart("nic", name, "given")


def pcie_part(generation: int) -> MachinePart:
    """The GPU-NIC PCIe x16 link of *generation* (4 or 5) at its spec rate."""
    return MachinePart("pcie", f"Gen{generation} x16 {PCIE_X16_BPS[generation] / 1e9:g} GB/s", "spec")
