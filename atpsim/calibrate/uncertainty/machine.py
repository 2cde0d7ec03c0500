"""A machine's fitted parameters, as one step and one whole job both draw them: which fits a
topology and hardware profile have, the refusal of draws where none has, and the drawn machine.

A step point (:mod:`atpsim.api.uncertainty`), a job point and the job planner
(:func:`atpsim.training.layouts.plan_job`) all run on a topology and a hardware profile; a
draw perturbs the same three things for each (:mod:`~atpsim.calibrate.uncertainty.apply`):
the GEMM curve and efficiencies of the profile, the NCCL profile the topology runs, and a
calibrated preset's or a fitted star's links. One function builds the drawn machine for all of
them, so a step's interval and a job's come from the same draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from atpsim.calibrate.uncertainty.apply import (
    ParameterDraw,
    drawn_profile,
    drawn_topology,
    nccl_source,
    preset_targets,
    profile_records,
    spec_kind,
)
from atpsim.calibrate.uncertainty.sources import fitted_record
from atpsim.compute.hardware import HardwareProfile
from atpsim.errors import AtpsimError
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology


def topology_sources(spec: str | Mapping[str, Any], n_gpus: int | None) -> list[str]:
    """The fits whose parameters topology *spec* (sized to *n_gpus*) has: its preset's fitted
    links, a fitted star's link, its NCCL profile's fit."""
    kind, name, params = spec_kind(spec)
    found = []
    if kind == "preset" and preset_targets(name, params):
        found.append(preset_targets(name, params)[0][0].source)
    if kind == "file" and (record := fitted_record(name, "link")) is not None:
        found.append(record.source)
    nccl = nccl_source(load_topology(spec, n_gpus=n_gpus))
    if nccl is not None:
        found.append(nccl.source)
    return found


def machine_sources(spec: str | Mapping[str, Any], n_gpus: int | None, hardware: str) -> tuple[str, ...]:
    """The fits a draw of topology *spec* (sized to *n_gpus*) with hardware profile *hardware*
    perturbs (the topology's, then the profile's), each once, in a stable order."""
    found = topology_sources(spec, n_gpus) + [r.source for r in profile_records(hardware)]
    return tuple(dict.fromkeys(found))


def require_sources(sources: tuple[str, ...], what: str, key: str | None = None) -> None:
    """The refusal (at *key*, else about the *uncertainty* parameter) of a request for draws
    of something with no fitted parameter."""
    if not sources:
        raise AtpsimError(
            f"{what} has no fitted parameter with a recorded uncertainty (spec-sheet numbers "
            "are taken as exact), so every draw would be the point estimate; leave out the "
            "draws, or use a calibrated preset, a profile with a fitted GEMM curve or an "
            "`atpsim validate` fit", key=key, param="uncertainty",
        )  # fmt: skip


def drawn_machine(spec: str | Mapping[str, Any], n_gpus: int | None, profile: HardwareProfile,
                  hardware: str, draw: ParameterDraw) -> tuple[Topology, HardwareProfile]:  # fmt: skip
    """Topology *spec* (sized to *n_gpus*) and *profile* (loaded as *hardware*) under *draw*:
    the inputs a step or a job runs on in that draw."""
    return drawn_topology(spec, n_gpus, draw), drawn_profile(profile, hardware, draw)
