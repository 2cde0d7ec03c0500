"""The measured-machine fit: fit a measurements folder and write the fitted files beside it.

``fit_folder(DIR)`` reads ``DIR`` (:mod:`atpsim.calibrate.measurements.folder`), fits

* the collectives (CSV rows and nccl-tests logs) -> one link class, bandwidth and latency
  (:mod:`atpsim.calibrate.fit.link`), written as a star of the machine's ranks
  (:mod:`atpsim.calibrate.fit.star`) to ``DIR/fitted/topology.yaml``;
* the GEMMs -> a hardware profile (:mod:`atpsim.calibrate.fit.profile`), whose memory
  efficiency, one value and one per op class, is fitted to the measured memory-bound ops when
  the folder has them (:mod:`atpsim.calibrate.fit.memory`), else taken with the bandwidth from
  the machine description (:mod:`atpsim.calibrate.measurements.description`), to
  ``DIR/fitted/hardware.yaml``;

and saves every fit point's residual to ``DIR/fitted/residuals.csv`` and the fitted numbers
with their RMS errors to ``DIR/fitted/fit.yaml``, whose ``uncertainty`` block records how well
the points pinned them (``link``: the link's, ``profile``: the GEMM and memory fields', each
fit's 1-sigmas and correlation, :mod:`atpsim.calibrate.uncertainty`): what
``--uncertainty N`` draws when a scenario or plan names the fitted files. Only collectives, GEMMs and memory-bound
ops are fit points; the layers are check points (:mod:`atpsim.calibrate.compare`) and are
never read here. The files are rewritten byte for byte from the same measurements.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from atpsim.calibrate.fit.link import LinkFit, fit_link
from atpsim.calibrate.fit.memory import MemoryFit, fit_memory_bandwidth
from atpsim.calibrate.fit.profile import ProfileFit, fit_profile
from atpsim.calibrate.fit.star import star_topology
from atpsim.calibrate.measurements.description import base_profile, describe
from atpsim.calibrate.measurements.folder import Measurements, read_measurements
from atpsim.calibrate.measurements.settings import read_settings
from atpsim.calibrate.uncertainty.record import block_diagonal
from atpsim.compute.hardware import profile_to_dict
from atpsim.errors import AtpsimError

log = logging.getLogger(__name__)

FITTED = "fitted"
TOPOLOGY_FILE = "topology.yaml"
PROFILE_FILE = "hardware.yaml"
RESIDUALS_FILE = "residuals.csv"
SUMMARY_FILE = "fit.yaml"
#: The collective algorithm the fit assumes: gloo's and NCCL's default ring.
ALGORITHM = "ring"
_RESIDUAL_COLUMNS = ("kind", "label", "role", "measured_s", "predicted_s", "rel_error")


@dataclass(frozen=True)
class FolderFit:
    """The fits of one folder (None where it holds no points of that kind) and where the
    fitted files went."""

    folder: Path
    link: LinkFit | None
    profile: ProfileFit | None
    n_ranks: int
    statistic: str = "median"
    memory: MemoryFit | None = None

    @property
    def fitted_dir(self) -> Path:
        return self.folder / FITTED


def fitted_paths(folder: str | Path) -> tuple[Path, Path]:
    """(topology, profile) files a fit of *folder* writes."""
    fitted = Path(folder) / FITTED
    return fitted / TOPOLOGY_FILE, fitted / PROFILE_FILE


def read_fit_summary(folder: str | Path) -> dict[str, Any]:
    """The fitted numbers of ``folder/fitted/fit.yaml`` as written by :func:`fit_folder`
    (empty when there is no such file): what a validation report quotes of the fit."""
    path = Path(folder) / FITTED / SUMMARY_FILE
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def fit_folder(folder: str | Path) -> FolderFit:
    """Fit the collectives and GEMMs of *folder* and write ``fitted/`` (module docstring)."""
    statistic = read_settings(folder, require_tolerance=False).statistic
    measurements = read_measurements(folder, statistic)
    if not measurements.collectives and not measurements.gemms:
        raise AtpsimError(
            "no collectives and no GEMMs to fit (expected CSVs with columns op, group_size, "
            "bytes, time_s or m, n, k, dtype, time_s, or an all_reduce_perf log)",
            source=str(folder),
        )
    link = fit_link(measurements.collectives, ALGORITHM) if measurements.collectives else None
    profile = _fit_profile(measurements) if measurements.gemms else None
    memory = None
    if measurements.memory_ops:
        overhead_s = profile.profile.launch_overhead_s if profile else 0.0
        memory = fit_memory_bandwidth(measurements.memory_ops, overhead_s)
        if profile is not None:
            profile = _refit_under_measured_bandwidth(profile, memory, measurements)
            profile = profile_with_memory_fit(profile, memory)
    result = FolderFit(measurements.folder, link, profile, measurements.n_ranks, statistic,
                       memory)  # fmt: skip
    _write(result, measurements)
    return result


def _fit_profile(measurements: Measurements, bandwidth_Bps: float | None = None) -> ProfileFit:
    """The GEMM fit from the folder's base profile (:func:`base_profile`), its memory bandwidth
    *bandwidth_Bps* at full efficiency where given (the GEMM curve's roofline)."""
    base = base_profile(f"fitted-{measurements.folder.resolve().name}", measurements.machine,
                        measurements.n_ranks)  # fmt: skip
    if bandwidth_Bps is not None:
        sources = dict(base.sources)
        sources["memory_bandwidth_Bps"] = (
            "the fastest memory-bound op class measured in this folder (calibrate.fit.memory): "
            "the description names no bundled GPU"
        )
        base = replace(base, memory_bandwidth_Bps=bandwidth_Bps, memory_efficiency=1.0,
                       sources=tuple(sorted(sources.items())))  # fmt: skip
    return fit_profile(measurements.gemms, base)


def _refit_under_measured_bandwidth(
    fit: ProfileFit, memory: MemoryFit, measurements: Measurements
) -> ProfileFit:
    """*fit* again with its base's memory bandwidth raised to the fastest memory-bound op
    measured, where one ran faster than the base assumes: a GPU with no bundled profile starts
    from the CPU's assumed DDR4 channel (:func:`base_profile`), whose roofline makes every
    GEMM memory-bound (an H200 fitted so before it had a profile: GEMM RMS error 4,629%). The
    bundled GPUs and the CPU folders, whose ops stay under their base's figure, fit once."""
    fastest = _fastest_Bps(memory)
    if fastest <= fit.profile.memory_bandwidth_Bps:
        return fit
    return _fit_profile(measurements, float(f"{fastest:.6g}"))


def _fastest_Bps(memory: MemoryFit) -> float:
    """The fastest fitted bandwidth (B/s): all ops' or one class's."""
    return max(memory.bandwidth_Bps, *(b for _, b in memory.class_bandwidth_Bps))


def profile_with_memory_fit(fit: ProfileFit, memory: MemoryFit) -> ProfileFit:
    """*fit* with the memory-bound ops' fitted bandwidths: the profile's bandwidth stays (a
    datasheet figure or the CPU assumption, raised to the fastest fitted bandwidth if one
    exceeds it), ``memory_efficiency`` becomes all ops' fitted share of it and
    ``memory_efficiency_by_class`` each class's."""
    profile = fit.profile
    bandwidth = float(f"{max(profile.memory_bandwidth_Bps, _fastest_Bps(memory)):.6g}")
    sources = dict(profile.sources)
    sources["memory_efficiency"] = (
        "fitted to this folder's memory-bound ops, per op class (calibrate.fit.memory): effective "
        "bandwidth / memory_bandwidth_Bps"
    )
    profile = replace(
        profile,
        memory_bandwidth_Bps=bandwidth,
        memory_efficiency=min(1.0, _share(memory.bandwidth_Bps, bandwidth)),
        memory_efficiency_by_class=tuple(
            (c, min(1.0, _share(b, bandwidth))) for c, b in memory.class_bandwidth_Bps
        ),
        sources=tuple(sorted(sources.items())),
    )
    return replace(fit, profile=profile)


def _share(bandwidth_Bps: float, reference_Bps: float) -> float:
    return float(f"{bandwidth_Bps / reference_Bps:.4g}")


def _write(result: FolderFit, measurements: Measurements) -> None:
    fitted = result.fitted_dir
    fitted.mkdir(exist_ok=True)
    header = (
        f"# Written by atpsim.calibrate.machine from the measurements in {result.folder.name}/ "
        "(collectives, GEMMs and memory-bound ops only; the layers are the check points). "
        "Refit, don't edit:\n"
        f"#   atpsim validate --refit path/to/{result.folder.resolve().name}\n"
    )
    if result.link is not None:
        topology = star_topology(
            result.n_ranks, result.link, name=f"fitted-{result.folder.resolve().name}"
        )
        _write_yaml(fitted / TOPOLOGY_FILE, header, topology)
    if result.profile is not None:
        _write_yaml(fitted / PROFILE_FILE, header, _profile_data(result.profile))
    _write_yaml(fitted / SUMMARY_FILE, header, summary(result, measurements))
    _write_residuals(fitted / RESIDUALS_FILE, result)
    log.info("wrote the fit of %s to %s", result.folder, fitted)


def _profile_data(fit: ProfileFit) -> dict[str, Any]:
    """The profile's YAML mapping; a zero collective overhead (which this fit never sets) is
    left out, so the file also loads where profiles predate that key."""
    data = profile_to_dict(fit.profile)
    if not data.get("collective_overhead_s"):
        data.pop("collective_overhead_s", None)
    return data


def _write_yaml(path: Path, header: str, data: dict[str, Any]) -> None:
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def summary(result: FolderFit, measurements: Measurements) -> dict[str, Any]:
    """The fitted numbers and their RMS relative errors, as a YAML-ready mapping."""
    data: dict[str, Any] = {
        "machine": describe(measurements.machine),
        "ranks": result.n_ranks,
        "statistic": result.statistic,
    }
    if result.link is not None:
        data["link"] = {
            "algorithm": result.link.algorithm,
            "bandwidth_Bps": float(f"{result.link.bandwidth_Bps:.6g}"),
            "latency_s": float(f"{result.link.latency_s:.6g}"),
            "points": len(result.link.residuals),
            "rms_rel_error_fitted_points": _round(
                result.link.rms_rel_error(("small", "large", "both"))
            ),
            "rms_rel_error_all_points": _round(result.link.rms_rel_error()),
        }
    if result.profile is not None:
        profile = result.profile.profile
        data["gemm"] = {
            "dtype": profile.gemm.points_dtype,
            "peak_flops": float(f"{dict(profile.peak_flops)[profile.gemm.points_dtype]:.6g}"),
            "launch_overhead_s": float(f"{profile.launch_overhead_s:.6g}"),
            "efficiency_max": profile.gemm.efficiency_max,
            "output_half_elements": profile.gemm.output_half_elements,
            "k_half": profile.gemm.k_half,
            "points": len(result.profile.residuals),
            "rms_rel_error_curve": _round(result.profile.rms_rel_error(curve=True)),
            "rms_rel_error_profile": _round(result.profile.rms_rel_error()),
            "memory_bandwidth_Bps": float(f"{profile.memory_bandwidth_Bps:.6g}"),
            "memory_efficiency": profile.memory_efficiency,
        }
    if result.memory is not None:
        data["memory_ops"] = _memory_summary(result.memory)
    uncertainty = _uncertainty(result, measurements)
    if uncertainty:
        data["uncertainty"] = uncertainty
    return data


def _uncertainty(result: FolderFit, measurements: Measurements) -> dict[str, Any]:
    """The ``uncertainty`` block: the link's record, and the profile's (GEMM fields and, where
    fitted, the memory fields, uncorrelated with each other)."""
    block: dict[str, Any] = {}
    if result.link is not None:
        block["link"] = result.link.uncertainty().to_dict()
    if result.profile is not None:
        records = [result.profile.uncertainty(measurements.gemms)]
        if result.memory is not None:
            records.append(result.memory.uncertainty())
        block["profile"] = block_diagonal("profile", *records).to_dict()
    return block


def _memory_summary(memory: MemoryFit) -> dict[str, Any]:
    """All ops' and each class's effective bandwidth, point count and RMS residual."""
    classes = {}
    for op_class, bandwidth in memory.class_bandwidth_Bps:
        members = [s for s, _ in memory.residuals if s.op_class == op_class]
        classes[op_class] = {
            "effective_bandwidth_Bps": float(f"{bandwidth:.6g}"),
            "points": len(members),
            "rms_rel_error": _round(memory.rms_rel_error(op_class)),
        }
    return {
        "effective_bandwidth_Bps": float(f"{memory.bandwidth_Bps:.6g}"),
        "points": len(memory.residuals),
        "rms_rel_error": _round(memory.rms_rel_error()),
        "classes": classes,
    }


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def _write_residuals(path: Path, result: FolderFit) -> None:
    rows: list[tuple[Any, ...]] = []
    if result.link is not None:
        for r in result.link.residuals:
            rows.append(("collective", r.sample.label, r.role, r.sample.time_s, r.predicted_s,
                         r.rel_error))  # fmt: skip
    if result.profile is not None:
        for g in result.profile.residuals:
            rows.append(("gemm", g.sample.label, g.role, g.sample.time_s, g.predicted_s,
                         g.rel_error))  # fmt: skip
    if result.memory is not None:
        for sample, predicted in result.memory.residuals:
            rows.append(("memory_op", sample.label, sample.op_class, sample.time_s, predicted,
                         (predicted - sample.time_s) / sample.time_s))  # fmt: skip
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(_RESIDUAL_COLUMNS)
        for kind, label, role, measured, predicted, error in rows:
            writer.writerow([kind, label, role, f"{measured:.6g}", f"{predicted:.6g}",
                             f"{error:.4f}"])  # fmt: skip
