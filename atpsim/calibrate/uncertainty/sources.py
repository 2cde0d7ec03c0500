"""Where each fit's uncertainty is recorded, beside its values, and which records a point uses.

- ``paper-fit``: the paper machines' fit (``python -m atpsim.calibrate.paper``), the block
  ``uncertainty`` of ``atpsim/data/calibration/paper-fit.yaml``; its parameters set presets
  ``ic1``, ``ic2``, ``ic4`` and the profile ``a100-sxm4-80gb-paper-stack`` (each parameter's
  ``target``), drawn together.
- ``nccl:a100``: the NCCL curve fit (``python -m atpsim.calibrate.fit.nccl_curve``), the block
  ``uncertainty`` of the ``a100`` entry of ``atpsim/data/nccl.yaml``. The ``h100`` entry's
  derived parameters come from it (its block says ``derived_from: a100``): their draws are the
  a100 draws put through the same derivation; its Simple and NVLS NVLink efficiencies, fitted
  to one measured figure each (``python -m atpsim.calibrate.fit.nccl_h100``), have no residual
  to bootstrap and are held at their values.
- ``gemm:NAME``: the GEMM efficiency curve of hardware profile NAME
  (``python -m atpsim.calibrate.fit.gemm_curve``), ``atpsim/data/calibration/gemm-curve.yaml``.
- ``fitted:DIR``: an ``atpsim validate`` fit, the block ``uncertainty`` of ``DIR/fit.yaml``
  beside the fitted ``topology.yaml`` (its ``link`` part) and ``hardware.yaml`` (its
  ``profile`` part).

Parameters with no record (spec-sheet link rates, assumptions) are taken as exact: an interval
covers what the fits leave uncertain, not what no one measured.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from atpsim.calibrate.uncertainty.record import FitUncertainty, from_dict

PAPER_FIT = "paper-fit"
GEMM_CURVE_FILE = ("data", "calibration", "gemm-curve.yaml")
#: The validate fit's summary file and its folder (atpsim.calibrate.machine).
FIT_SUMMARY, FITTED_DIR = "fit.yaml", "fitted"


def package_file(*parts: str) -> Path:
    """A file of the installed ``atpsim`` package (the working tree in an editable install)."""
    return Path(str(resources.files("atpsim").joinpath(*parts)))


@cache
def paper_fit_record() -> FitUncertainty | None:
    """The paper fit's record, None where the record file has no ``uncertainty`` block."""
    data = _yaml(package_file("data", "calibration", "paper-fit.yaml"))
    block = data.get("uncertainty")
    return from_dict(PAPER_FIT, block) if block else None


@cache
def nccl_entries() -> dict[str, Any]:
    """The entries of ``atpsim/data/nccl.yaml`` (profile name -> its mapping)."""
    return {str(k): v for k, v in _yaml(package_file("data", "nccl.yaml")).items()}


@cache
def nccl_record(name: str) -> FitUncertainty | None:
    """The record of NCCL profile *name*'s own fit (None: none, or derived from another's)."""
    block = (nccl_entries().get(name) or {}).get("uncertainty")
    if not block or "derived_from" in block:
        return None
    return from_dict(f"nccl:{name}", block, f"nccl:{name}:")


def nccl_derived_from(name: str) -> str | None:
    """The profile whose fit NCCL profile *name* is derived from, if it is."""
    block = (nccl_entries().get(name) or {}).get("uncertainty") or {}
    return block.get("derived_from") if isinstance(block, dict) else None


@cache
def gemm_record(profile: str) -> FitUncertainty | None:
    """The GEMM curve record of packaged hardware profile *profile*, if it has one."""
    path = package_file(*GEMM_CURVE_FILE)
    block = (_yaml(path) if path.exists() else {}).get(profile)
    return from_dict(f"gemm:{profile}", block, f"profile:{profile}:gemm.") if block else None


def fitted_record(path: str | Path, part: str) -> FitUncertainty | None:
    """The ``part`` (``link`` or ``profile``) record of the validate fit that wrote *path* (a
    file in a ``fitted/`` folder beside ``fit.yaml``), None where there is none."""
    summary = fit_summary(path)
    if summary is None:
        return None
    return _fitted_record(str(summary.resolve()), summary.stat().st_mtime_ns, part)


def fit_summary(path: str | Path) -> Path | None:
    """The ``fit.yaml`` of the validate fit that wrote *path* (a file in a ``fitted/``
    folder beside it), None where *path* is no such file: what its draws are read from."""
    folder = Path(path).parent
    summary = folder / FIT_SUMMARY
    return summary if folder.name == FITTED_DIR and summary.is_file() else None


@cache
def _fitted_record(summary: str, _mtime: int, part: str) -> FitUncertainty | None:
    block = (_yaml(Path(summary)).get("uncertainty") or {}).get(part)
    prefix = "link:" if part == "link" else "profile:*:"
    return from_dict(f"fitted:{Path(summary).parent.parent.name}:{part}", block, prefix) \
        if block else None  # fmt: skip


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def clear_caches() -> None:
    """Forget the records read (tests that rewrite a data file use this)."""
    for fn in (paper_fit_record, nccl_entries, nccl_record, gemm_record, _fitted_record):
        fn.cache_clear()
