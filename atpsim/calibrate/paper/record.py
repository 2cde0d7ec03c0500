"""The paper fit's record, a data file: ``atpsim/data/calibration/paper-fit.yaml``.

``python -m atpsim.calibrate.paper`` writes it (:func:`write_record`); the tests hold the data
files and the simulation to it (:func:`load_record`). It is plain YAML: parameters in SI units,
TFLOP/s per GPU in the paper's 2^40 unit, ``simulated`` the best mesh's value, and a mesh
DeviceMesh(d1, d2) written ``d1xd2`` (a cell's ``mesh`` and the keys of its ``by_mesh``).
:func:`load_record` gives the meshes back as ``(d1, d2)`` tuples, so the record reads as the
fit made it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from atpsim.calibrate.paper import parameters as params

if TYPE_CHECKING:
    from atpsim.calibrate.paper.fit import FitResult
    from atpsim.calibrate.paper.table3 import CellPrediction

#: The record's path inside the ``atpsim`` package.
RECORD_FILE = ("data", "calibration", "paper-fit.yaml")
#: The sections whose entries are simulated cells (a mesh and a value per mesh).
CELL_SECTIONS = ("fit_cells", "check_cells", "held_out_cells")
_HEADER = (
    "# The last fit of the paper's machines to its Table 3, written by\n"
    "# `python -m atpsim.calibrate.paper` (atpsim/calibrate/paper/record.py). Generated: do not\n"
    "# edit. Parameters in SI units; TFLOP/s per GPU in the paper's 2^40 unit; `simulated` is\n"
    "# the best mesh's value; DeviceMesh(d1, d2) is written d1xd2. Tests hold the data files to\n"
    "# it (tests/calibrate/paper/test_fitted_data.py). `uncertainty`: each parameter's 1-sigma\n"
    "# (of its logarithm; of the value for an overhead) and their correlation, drawn by\n"
    "# --uncertainty N (atpsim/calibrate/uncertainty).\n"
)


def record_path() -> Path:
    """The record of the installed ``atpsim`` package (the working tree in an editable
    install)."""
    return Path(str(resources.files("atpsim").joinpath(*RECORD_FILE)))


def _cell_entry(c: CellPrediction) -> dict[str, Any]:
    return {
        "mesh": (c.mesh.d1, c.mesh.d2),
        "simulated": round(c.tflops, 4),
        "paper": c.cell.paper,
        "by_mesh": {k: round(v, 4) for k, v in sorted(c.by_mesh.items())},
    }


def record_data(result: FitResult) -> dict[str, Any]:
    """The fit as plain data: parameters, measured constants, predictions, errors."""
    fit = result.fit
    measured = params.measured_collective()
    return {
        "b_element_bytes": result.element_bytes,
        "parameters": {k: float(f"{v:.6g}") for k, v in fit.values.items()},
        "measured": {
            "collective_overhead_s": float(f"{measured.overhead_s:.6g}"),
        },
        "fit_rms": round(fit.rms(), 4),
        "fit_cells": {c.cell.label: _cell_entry(c) for c in fit.cells},
        "bandwidths_Bps": {
            t.name: {
                "simulated": float(f"{fit.bandwidths_Bps[t.name]:.6g}"),
                "target": t.target_Bps,
            }
            for t in fit.targets
        },
        "check_cells": {c.cell.label: _cell_entry(c) for c in result.check},
        "held_out_cells": {c.cell.label: _cell_entry(c) for c in result.held_out},
        **({"uncertainty": result.uncertainty.to_dict()} if result.uncertainty else {}),
    }


def dump_record(data: dict[str, Any]) -> str:
    """The record file's text for *data* (as :func:`record_data` makes it)."""
    plain = _map_cells(data, _mesh_text)
    return _HEADER + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


def parse_record(text: str) -> dict[str, Any]:
    """The data of a record file's *text*, meshes as ``(d1, d2)`` tuples."""
    return _map_cells(yaml.safe_load(text), _mesh_tuple)


def load_record(path: str | Path | None = None) -> dict[str, Any]:
    """The record at *path* (default: the package's, the last fit's)."""
    return parse_record(Path(path or record_path()).read_text())


def write_record(result: FitResult, path: str | Path | None = None) -> Path:
    """Write the record of *result* to *path* (default: the package's); return the path."""
    target = Path(path or record_path())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(dump_record(record_data(result)))
    return target


def _map_cells(data: dict[str, Any], mesh: Callable[[Any], Any]) -> dict[str, Any]:
    """*data* with *mesh* applied to every cell's ``mesh`` and ``by_mesh`` keys (key order
    kept)."""
    return {
        key: {label: _map_cell(entry, mesh) for label, entry in value.items()}
        if key in CELL_SECTIONS
        else value
        for key, value in data.items()
    }


def _map_cell(entry: dict[str, Any], mesh: Callable[[Any], Any]) -> dict[str, Any]:
    by_mesh = {mesh(k): v for k, v in entry["by_mesh"].items()}
    return {**entry, "mesh": mesh(entry["mesh"]), "by_mesh": by_mesh}


def _mesh_text(mesh: tuple[int, int]) -> str:
    return f"{mesh[0]}x{mesh[1]}"


def _mesh_tuple(text: str) -> tuple[int, int]:
    d1, d2 = text.split("x")
    return int(d1), int(d2)
