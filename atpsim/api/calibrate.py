"""Calibration against measurements through the API: fit a machine folder written by the
validation harness, predict its measured layers and compare (:func:`validate`), or fit an
nccl-tests log alone (:func:`fit_nccl_log`), or take a PyTorch profiler trace as measurements
(:func:`validate_trace`). The fitting and scoring are :mod:`atpsim.calibrate`; each layer is
predicted by :func:`simulate_layer`, the path of every simulated sweep point
(:func:`atpsim.api.point.simulate_point_on`); the files are written by
:mod:`atpsim.report.calibration`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from atpsim.api.point import simulate_point_on
from atpsim.calibrate.compare import Comparison, LayerTimes, compare_layers, read_check_points
from atpsim.calibrate.fit.link import LinkFit, fit_link
from atpsim.calibrate.machine import FolderFit, fit_folder
from atpsim.calibrate.measurements.folder import REPORT_PREFIX
from atpsim.calibrate.measurements.nccl_tests import NcclTestsLog, nccl_samples, read_nccl_tests
from atpsim.calibrate.measurements.samples import LayerPoint
from atpsim.calibrate.trace.compare import TraceComparison, compare_trace
from atpsim.calibrate.trace.layer import traced_layer
from atpsim.calibrate.trace.reader import read_trace
from atpsim.compute.hardware import HardwareProfile
from atpsim.compute.models import ModelConfig
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.point import SweepPoint
from atpsim.topology.graph import Topology

__all__ = ["REPORT_PREFIX", "Comparison", "FolderFit", "LinkFit", "NcclLogFit", "TraceComparison",
           "Validation", "compare_folder", "fit_folder", "fit_nccl_log", "simulate_layer",
           "validate", "validate_trace"]  # fmt: skip

#: The scenario name of a measured layer simulated as a sweep point.
CHECK_SCENARIO = "validate"


@dataclass(frozen=True)
class Validation:
    """A machine folder's verdict (*comparison*: per-layer predicted vs measured, the median
    |error| and the tolerance) and the report files written beside the measurements."""

    comparison: Comparison
    saved: tuple[Path, ...]

    @property
    def passed(self) -> bool:
        return self.comparison.passed


@dataclass(frozen=True)
class NcclLogFit:
    """An nccl-tests log and the link (bandwidth, per-step latency) its ring all-reduce implies."""

    log: NcclTestsLog
    fit: LinkFit


def validate(folder: str | Path, *, refit: bool = False) -> Validation:
    """Fit *folder*'s collectives, GEMMs and memory-bound ops (again with *refit*, else only
    when ``fitted/`` is missing), predict its measured layers with the event simulator (the
    layers are never fitted), compare against ``tolerance.yaml`` and write
    ``validation_report.{csv,md,png}`` into *folder*."""
    # lazy: matplotlib only when the validation report is drawn
    from atpsim.report.calibration import write_validation_report

    comparison = compare_folder(folder, refit=refit)
    return Validation(comparison, tuple(write_validation_report(comparison)))


def compare_folder(folder: str | Path, *, refit: bool = False) -> Comparison:
    """:func:`validate` without the report: *folder*'s check points (fitting first when
    needed, or with *refit*), each predicted by :func:`simulate_layer` and scored."""
    return compare_layers(read_check_points(folder, refit=refit), simulate_layer)


def simulate_layer(point: LayerPoint, topology: Topology, profile: HardwareProfile) -> LayerTimes:
    """One measured layer simulated as a sweep point of the event simulation (``mode: des``,
    :func:`~atpsim.api.point.simulate_point_on`, as ``atpsim run`` simulates every point):
    one layer of *point*'s model on ATP's (d1, d2) mesh with its chunks and ring collectives
    (the fit's algorithm), on *topology* with *profile*."""
    model = ModelConfig(point.label, point.hidden, point.heads, layers=1, batch=point.batch,
                        seq=point.seq, dtype=point.dtype, ffn_mult=point.ffn_mult)  # fmt: skip
    mesh = DeviceMesh(point.d1, point.d2)
    sweep_point = SweepPoint(CHECK_SCENARIO, topology.name, topology.name, mesh.size, profile.name,
                             model, mesh, point.chunks, algorithm="ring", mode="des")  # fmt: skip
    row = simulate_point_on(sweep_point, topology, profile)
    return LayerTimes(row["step_time_s"], row["compute_time_s"], row["comm_time_s"],
                      row["exposed_comm_s"])  # fmt: skip


def fit_nccl_log(
    path: str | Path, *, ranks: int | None = None, placement: str = "out-of-place"
) -> NcclLogFit:
    """Fit the ring all-reduce rows of an ``all_reduce_perf`` log (*ranks* overrides the
    log's rank count; *placement* picks the out-of-place or in-place columns)."""
    log = read_nccl_tests(path)
    return NcclLogFit(log, fit_link(nccl_samples(log, n_ranks=ranks, placement=placement)))


def validate_trace(
    path: str | Path,
    *,
    fitted: str | Path | None = None,
    layer: str | None = None,
    profile: str | None = None,
) -> TraceComparison:
    """Read the PyTorch profiler (Kineto) trace in *path*, map its GEMMs, memory-bound ops and
    collectives onto atpsim's program of the layer it profiled (the trace's ``atpsim_layer``
    entry, or *layer* text such as ``hidden=256,heads=8,batch=4,seq=128,mesh=1x2,chunks=1``)
    and predict each op and the step: with the fit in *fitted* (a measurements folder; a blind
    check), with the hardware *profile* (a bundled name or file: a blind check of what atpsim
    ships) or with a fit to the trace's own ops (residuals). Raises AtpsimError for a file
    that is not a trace, a trace with no recognizable ops, or an unknown layer."""
    trace = read_trace(path)
    try:
        traced = traced_layer(trace.metadata, layer)
    except AtpsimError as error:
        raise error.with_source(str(path)) from None
    return compare_trace(trace, traced, fitted, predict=simulate_layer, profile=profile)
