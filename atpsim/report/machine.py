"""The machines a report's results ran on, one line each (issue 23, "the machine as it is"):
for every distinct (topology, hardware) of the results table, its hardware, NCCL profile, NIC
and GPU-NIC PCIe, each with how it came to be (:mod:`atpsim.calibrate.provenance`).

A report is rebuilt from its folder alone, so the topology is rebuilt from the scenario copy:
the entry whose label is the table's ``topology`` value, at the entry's own size (no part of
the line depends on the GPU count). Where it cannot be (the copy names no such topology, a
custom file is not beside it, a hardware file is gone), the line says so and the page still
builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from atpsim.calibrate.provenance import machine_provenance
from atpsim.errors import AtpsimError
from atpsim.scenario.entries import TopologyEntry
from atpsim.scenario.loader import parse_yaml

#: What a line says where the topology cannot be rebuilt from the scenario copy.
NOT_REBUILT = "not shown: the topology cannot be rebuilt from scenario.yaml"


def machine_lines(frame: pd.DataFrame, scenario_text: str, folder: Path) -> list[str]:
    """``Machine LABEL: hardware ... (fitted), NCCL ... .`` for each distinct (topology,
    hardware) of *frame*, in the table's order; *scenario_text* is the run's scenario (its
    relative files resolved against *folder*)."""
    if "topology" not in frame or "hardware" not in frame:
        return []
    pairs = frame[["topology", "hardware"]].dropna().drop_duplicates()
    if pairs.empty:
        return []
    specs = topology_specs(scenario_text, folder)
    return [_line(str(label), str(hardware), specs.get(str(label)))
            for label, hardware in pairs.itertuples(index=False)]  # fmt: skip


def _line(label: str, hardware: str, spec: Any) -> str:
    """One machine's line; :data:`NOT_REBUILT` where *spec* is None or does not build."""
    if spec is None:
        return f"Machine {label} with {hardware}: {NOT_REBUILT}."
    try:
        return f"Machine {label}: {machine_provenance(spec, hardware).text()}."
    except AtpsimError:
        return f"Machine {label} with {hardware}: {NOT_REBUILT}."


def topology_specs(scenario_text: str, folder: Path) -> dict[str, Any]:
    """Label -> the spec mapping :func:`atpsim.topology.spec.load_topology` takes, for every
    topology entry of the scenario *scenario_text* (its cases' included) that still validates
    on its own (:class:`~atpsim.scenario.entries.TopologyEntry`: a custom file must be there),
    the first of a label kept; empty where the text is not a mapping."""
    try:
        raw = parse_yaml(scenario_text, "scenario.yaml")
    except AtpsimError:
        return {}
    parts = [raw, *(raw.get("cases") or [])] if isinstance(raw, dict) else []
    specs: dict[str, Any] = {}
    for part in parts:
        listed = part.get("topology") if isinstance(part, dict) else None
        for item in listed if isinstance(listed, list) else [listed] if listed else []:
            try:
                entry = TopologyEntry.model_validate(item, context={"base_dir": str(folder)})
            except ValidationError:
                continue
            specs.setdefault(entry.label(), entry.spec_mapping())
    return specs
