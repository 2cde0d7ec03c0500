"""Read a measurements folder (``validation/measurements/<machine>/``) into typed samples.

What the folder holds (the torch benchmarks of ``validation/bench`` write the CSVs; a user may
add nccl-tests logs):

* CSV tables of collectives, GEMMs, memory-bound ops and layers, each recognised by its
  columns (:mod:`.tables`);
* nccl-tests logs: files named ``*_perf*.log`` or ``*_perf*.txt`` (``all_reduce_perf`` output,
  :mod:`.nccl_tests`);
* the machine description: ``machine.json``/``machine.yaml`` and any ``*machine*`` JSON/YAML
  (e.g. each benchmark's ``<name>.machine.json``), merged, the first file named wins a key
  (what it says about the hardware: :mod:`.description`).

Outputs of the fit and the comparison (``fitted/``, ``validation_report.*``) are never read as
measurements.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from atpsim.calibrate.measurements.nccl_tests import nccl_samples, read_nccl_tests
from atpsim.calibrate.measurements.samples import (
    CollectiveSample,
    GemmSample,
    LayerPoint,
    MemoryOpSample,
)
from atpsim.calibrate.measurements.tables import read_table
from atpsim.errors import AtpsimError, read_text

log = logging.getLogger(__name__)

REPORT_PREFIX = "validation_report"


@dataclass(frozen=True)
class Measurements:
    """Everything a folder holds; *machine* is the parsed description (empty if none)."""

    folder: Path
    collectives: tuple[CollectiveSample, ...] = ()
    gemms: tuple[GemmSample, ...] = ()
    layers: tuple[LayerPoint, ...] = ()
    machine: dict[str, Any] = field(default_factory=dict)
    memory_ops: tuple[MemoryOpSample, ...] = ()

    @property
    def n_ranks(self) -> int:
        """The most ranks any measurement used (the size of the fitted fabric)."""
        sizes = [s.group_size * s.n_groups for s in self.collectives]
        sizes += [p.d1 * p.d2 for p in self.layers]
        return max(sizes, default=1)


def read_measurements(folder: str | Path, statistic: str = "median") -> Measurements:
    """Every measurement in *folder* (not its subfolders), by kind, each configuration's time
    the *statistic* of its repetitions; errors name the file."""
    root = Path(folder)
    if not root.is_dir():
        raise AtpsimError(f"measurements folder {str(folder)!r} does not exist")
    found: dict[str, list[Any]] = {"collectives": [], "gemms": [], "layers": [], "memory_ops": []}
    for path in sorted(root.glob("*.csv")):
        if path.name.startswith(REPORT_PREFIX):
            continue
        kind, samples = read_table(path, statistic)
        found[kind].extend(samples)
    collectives: list[CollectiveSample] = found["collectives"]
    for path in sorted([*root.glob("*_perf*.log"), *root.glob("*_perf*.txt")]):
        log_file = read_nccl_tests(path)
        for warning in log_file.warnings:
            log.warning("%s: %s", path, warning)
        collectives.extend(nccl_samples(log_file))
    return Measurements(
        root,
        tuple(collectives),
        tuple(found["gemms"]),
        tuple(found["layers"]),
        _read_machine(root),
        tuple(found["memory_ops"]),
    )


def _read_machine(root: Path) -> dict[str, Any]:
    """The machine descriptions (JSON or YAML mappings) merged, the first file read winning a
    key (``machine.*`` first, then ``*machine*`` by name); {} when the folder has none."""
    candidates = [root / n for n in ("machine.json", "machine.yaml", "machine.yml")]
    candidates += sorted(
        p for p in root.glob("*machine*") if p.suffix in (".json", ".yaml", ".yml")
    )
    merged: dict[str, Any] = {}
    for path in dict.fromkeys(candidates):
        if path.is_file():
            merged = _read_mapping(path) | merged
    return merged


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = read_text(path, "the machine description")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise AtpsimError(
            f"cannot read the machine description: {error}", source=str(path)
        ) from None
    if not isinstance(data, dict):
        raise AtpsimError("expected a mapping", source=str(path))
    return data
