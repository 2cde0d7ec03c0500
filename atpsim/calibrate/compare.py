"""Compare: predict each measured layer with the fitted fabric and profile, and score it.

The check points are the whole-layer forward+backward times (never used by the fit, which
sees only collectives, GEMMs and single memory-bound ops). Each is predicted by the event
simulation of one layer (:func:`atpsim.engine.step.run.simulate_des_step`: the ATP program of
:mod:`atpsim.parallel.atp` on the two streams, collectives by the engine on
``fitted/topology.yaml``, compute by ``fitted/hardware.yaml``), ring collectives,
``layers = 1``. On a CPU machine with fewer cores than busy ranks, each rank computes at its
share of a core (:func:`~atpsim.calibrate.measurements.description.cpu_share`; the GEMMs and
memory-bound ops were measured by one process alone), and without a spare core for its
communication a rank's collectives take turns with its compute (the step is their sum, not the
two streams' overlap). The error of a point is ``(predicted - measured) / measured``; the
folder passes when the median absolute error is at most the tolerance written beside the
measurements in ``tolerance.yaml`` (:mod:`atpsim.calibrate.measurements.settings`, which also
says which statistic of the repetitions to use).

The table is saved as ``validation_report.csv`` and summarised in ``validation_report.md``
(the plot, ``validation_report.png``, is drawn by :mod:`atpsim.report.validation_plot`).
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from atpsim.calibrate.machine import FolderFit, fit_folder, fitted_paths
from atpsim.calibrate.measurements.description import comm_overlaps_compute, cpu_share, slowed
from atpsim.calibrate.measurements.folder import REPORT_PREFIX, read_measurements
from atpsim.calibrate.measurements.samples import LayerPoint
from atpsim.calibrate.measurements.settings import TOLERANCE_FILE, read_settings
from atpsim.compute.hardware import HardwareProfile
from atpsim.errors import AtpsimError
from atpsim.topology.graph import Topology

REPORT_COLUMNS = ("label", "d1", "d2", "chunks", "hidden", "heads", "batch", "seq", "dtype",
                  "measured_s", "predicted_s", "compute_s", "comm_s", "exposed_comm_s",
                  "cpu_share", "overlap", "rel_error", "run_delay_s",
                  "rel_error_without_wait")  # fmt: skip


@dataclass(frozen=True)
class CheckResult:
    """A layer point, its simulated step, the step's compute, comm and exposed comm time, the
    share of a core each rank was given (1 on GPUs;
    :func:`~atpsim.calibrate.measurements.description.cpu_share`) and whether communication
    overlapped compute (False: a CPU rank without a spare core, the step is compute + comm;
    :func:`~atpsim.calibrate.measurements.description.comm_overlaps_compute`)."""

    point: LayerPoint
    predicted_s: float
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    cpu_share: float = 1.0
    overlap: bool = True

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.point.time_s) / self.point.time_s

    @property
    def error_without_wait(self) -> float | None:
        """The error against the measured time less its run-queue wait (the time the
        computing thread was runnable but held off the CPU); None when not measured. The
        wait is partly the host's other programs, partly the run's own ranks and threads
        beyond the cores, so this is a bound on the error, not the error."""
        wait = self.point.run_delay_s
        if wait is None or not 0 <= wait < self.point.time_s:
            return None
        undisturbed_s = self.point.time_s - wait
        return (self.predicted_s - undisturbed_s) / undisturbed_s


@dataclass(frozen=True)
class Comparison:
    """Every check point's result, the tolerance, and the fit if this run made one."""

    folder: Path
    results: tuple[CheckResult, ...]
    tolerance: float
    fit: FolderFit | None = None
    statistic: str = "median"

    @property
    def median_abs_error(self) -> float:
        return statistics.median(abs(r.rel_error) for r in self.results)

    @property
    def median_abs_error_without_wait(self) -> float | None:
        """The median |error| against the measured times less their waits (None when the
        measurements carry no waits)."""
        errors = [e for r in self.results if (e := r.error_without_wait) is not None]
        return statistics.median(abs(e) for e in errors) if errors else None

    @property
    def worst(self) -> CheckResult:
        return max(self.results, key=lambda r: (abs(r.rel_error), r.point.label))

    @property
    def passed(self) -> bool:
        return self.median_abs_error <= self.tolerance


def compare_folder(folder: str | Path, *, refit: bool = False) -> Comparison:
    """Predict every layer of *folder* with its fit (made first when missing or *refit*)."""
    settings = read_settings(folder)
    topology_path, profile_path = fitted_paths(folder)
    fit = None
    if refit or not (topology_path.is_file() and profile_path.is_file()):
        fit = fit_folder(folder)
        if fit.link is None or fit.profile is None:
            missing = "collectives" if fit.link is None else "GEMMs"
            raise AtpsimError(f"no {missing} measured: the layers cannot be predicted",
                              source=str(folder))  # fmt: skip
    measurements = read_measurements(folder, settings.statistic)
    layers = measurements.layers
    if not layers:
        raise AtpsimError("no layer measurements (the check points) to compare",
                          source=str(folder))  # fmt: skip
    topology, profile = _load_fitted(topology_path, profile_path)
    results = tuple(_predict(point, topology, profile, measurements.machine) for point in layers)
    tolerance = settings.tolerance if settings.tolerance is not None else 0.0
    return Comparison(Path(folder), results, tolerance, fit, settings.statistic)


def _load_fitted(topology_path: Path, profile_path: Path) -> tuple[Topology, HardwareProfile]:
    from atpsim.compute.hardware import load_profile
    from atpsim.topology.spec import load_topology

    return load_topology(str(topology_path)), load_profile(profile_path)


def _predict(
    point: LayerPoint, topology: Topology, profile: HardwareProfile, machine: dict[str, Any]
) -> CheckResult:
    """:func:`predict_layer` on this machine: CPU ranks get their share of the cores and, with
    no spare core, take turns between compute and communication."""
    ranks = point.d1 * point.d2
    share = cpu_share(machine, ranks)
    result = predict_layer(point, topology, slowed(profile, share), share)
    if comm_overlaps_compute(machine, ranks):
        return result
    serial_s = max(result.predicted_s, result.compute_s + result.comm_s)
    return replace(result, predicted_s=serial_s, exposed_comm_s=result.comm_s, overlap=False)


def predict_layer(
    point: LayerPoint, topology: Topology, profile: HardwareProfile, cpu_share: float = 1.0
) -> CheckResult:
    """Simulate one layer of *point*'s model on its mesh and chunks (ring collectives);
    *profile* is already slowed to the *cpu_share* each rank gets (recorded, not applied)."""
    from atpsim.compute.models import ModelConfig
    from atpsim.engine.step.run import simulate_des_step
    from atpsim.parallel.mesh import DeviceMesh

    mesh = DeviceMesh(point.d1, point.d2)
    if mesh.size > topology.n_gpus:
        raise AtpsimError(f"layer {point.label} needs {mesh.size} ranks; the fitted topology "
                          f"has {topology.n_gpus}")  # fmt: skip
    model = ModelConfig(point.label, point.hidden, point.heads, layers=1, batch=point.batch,
                        seq=point.seq, dtype=point.dtype, ffn_mult=point.ffn_mult)  # fmt: skip
    step = simulate_des_step(topology, profile, model, mesh, point.chunks, "ring")
    return CheckResult(point, step.step_time_s, step.compute_time_s, step.comm_time_s,
                       step.exposed_comm_s, cpu_share)  # fmt: skip


def save_comparison(comparison: Comparison) -> list[Path]:
    """Write ``validation_report.csv`` and ``.md`` into the folder; return their paths."""
    folder = comparison.folder
    csv_path = folder / f"{REPORT_PREFIX}.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(REPORT_COLUMNS)
        for r in comparison.results:
            p = r.point
            writer.writerow([p.label, p.d1, p.d2, p.chunks, p.hidden, p.heads, p.batch, p.seq,
                             p.dtype, *(f"{v:.6g}" for v in (p.time_s, r.predicted_s,
                             r.compute_s, r.comm_s, r.exposed_comm_s)), f"{r.cpu_share:.4g}", r.overlap,
                             f"{r.rel_error:.4f}", _optional(p.run_delay_s, ".6g"),
                             _optional(r.error_without_wait, ".4f")])  # fmt: skip
    md_path = folder / f"{REPORT_PREFIX}.md"
    md_path.write_text(report_markdown(comparison))
    return [csv_path, md_path]


def report_markdown(comparison: Comparison) -> str:
    """The comparison as a short markdown page: verdict, the fit, one table row per point."""
    worst = comparison.worst
    verdict = "PASS" if comparison.passed else "FAIL"
    lines = [
        f"# Validation: {comparison.folder.resolve().name}",
        "",
        f"**{verdict}**: median |error| {comparison.median_abs_error:.1%} against a tolerance "
        f"of {comparison.tolerance:.0%} ({TOLERANCE_FILE}; each time is the "
        f"{comparison.statistic} of its repetitions); worst {worst.rel_error:+.1%} at "
        f"{worst.point.label}; {len(comparison.results)} check points (whole layers, "
        "forward + backward), predicted from the fit of the collectives, GEMMs and memory-bound "
        "ops (fitted/).",
        "",
        *_wait_lines(comparison),
        *_fit_lines(comparison.folder),
        "| point | measured ms | predicted ms | error | compute ms | comm ms | exposed ms "
        "| core share | overlap | wait ms | error vs measured - wait |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        *(_table_row(r) for r in comparison.results),
        "",
        "compute and comm: busy time of the critical rank's two streams; core share: the part "
        "of a CPU core each rank computes with (ranks beyond the cores share them); overlap "
        "'no': a CPU rank without a spare core, whose step is compute + comm "
        "(atpsim/calibrate/measurements/description.py); wait: in the repetition measured, the time the "
        "computing thread of the most-waiting rank was runnable but off the CPU (Linux "
        "schedstat), '-' when not recorded.",
    ]
    return "\n".join(lines) + "\n"


def _table_row(r: CheckResult) -> str:
    wait = r.point.run_delay_s
    without = r.error_without_wait
    return (
        f"| {r.point.label} | {r.point.time_s * 1e3:.3f} | {r.predicted_s * 1e3:.3f} | "
        f"{r.rel_error:+.1%} | {r.compute_s * 1e3:.3f} | {r.comm_s * 1e3:.3f} | "
        f"{r.exposed_comm_s * 1e3:.3f} | {r.cpu_share:.2g} | {'yes' if r.overlap else 'no'} | "
        f"{'-' if wait is None else f'{wait * 1e3:.3f}'} | "
        f"{'-' if without is None else f'{without:+.1%}'} |"
    )


def _wait_lines(comparison: Comparison) -> list[str]:
    """A note on the run-queue waits inside the measured times, when they were recorded."""
    bound = comparison.median_abs_error_without_wait
    if bound is None:
        return []
    return [
        f"Measured less its run-queue wait (the time each computing thread was runnable but "
        f"held off the CPU by other programs on the host, or by the run's own ranks and "
        f"threads beyond the cores), the median |error| would be {bound:.1%}. That is a bound "
        "for a quiet host, not the verdict: part of the wait belongs to the run itself.",
        "",
    ]


def _optional(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _fit_lines(folder: Path) -> list[str]:
    """A bullet per fitted model, from ``fitted/fit.yaml`` (none when it is missing)."""
    path = folder / "fitted" / "fit.yaml"
    if not path.is_file():
        return []
    data = yaml.safe_load(path.read_text()) or {}
    lines = []
    if "link" in data:
        link = data["link"]
        lines.append(
            f"- link ({link['algorithm']}, star of {data.get('ranks')} ranks): "
            f"{link['bandwidth_Bps'] / 1e9:.4g} GB/s, {link['latency_s'] * 1e6:.4g} us per "
            f"transfer; RMS residual {link['rms_rel_error_all_points']:.1%} over "
            f"{link['points']} collectives"
        )
    if "gemm" in data:
        gemm = data["gemm"]
        lines.append(
            f"- GEMMs ({gemm['dtype']}): peak {gemm['peak_flops'] / 1e9:.4g} GFLOP/s, "
            f"{gemm['launch_overhead_s'] * 1e6:.3g} us per call; RMS residual "
            f"{gemm['rms_rel_error_curve']:.1%} by the curve, {gemm['rms_rel_error_profile']:.1%} "
            f"with the measured points, over {gemm['points']} GEMMs; memory-bound ops at "
            f"{gemm['memory_bandwidth_Bps'] * gemm['memory_efficiency'] / 1e9:.4g} GB/s"
        )
    if "memory_ops" in data:
        memory = data["memory_ops"]
        classes = ", ".join(
            f"{name} {c['effective_bandwidth_Bps'] / 1e9:.3g}"
            for name, c in (memory.get("classes") or {}).items()
        )
        lines.append(
            f"- memory-bound ops fitted: {memory['effective_bandwidth_Bps'] / 1e9:.4g} GB/s over "
            f"{memory['points']} ops, RMS residual {memory['rms_rel_error']:.1%}"
            + (f"; per class (GB/s): {classes}" if classes else "")
        )
    return [*lines, ""] if lines else []
