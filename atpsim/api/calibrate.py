"""Calibration against measurements through the API: fit a machine folder written by the
validation harness, predict its measured layers and compare (:func:`validate`), or fit an
nccl-tests log alone (:func:`fit_nccl_log`), or take a PyTorch profiler trace as measurements
(:func:`validate_trace`). The fitting itself is :mod:`atpsim.calibrate`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from atpsim.calibrate.compare import Comparison
from atpsim.calibrate.fit.link import LinkFit
from atpsim.calibrate.machine import FolderFit, fit_folder
from atpsim.calibrate.measurements.folder import REPORT_PREFIX
from atpsim.calibrate.measurements.nccl_tests import NcclTestsLog
from atpsim.calibrate.trace.compare import TraceComparison
from atpsim.errors import AtpsimError

__all__ = ["REPORT_PREFIX", "Comparison", "FolderFit", "LinkFit", "NcclLogFit", "TraceComparison",
           "Validation", "fit_folder", "fit_nccl_log", "validate", "validate_trace"]


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
    from atpsim.calibrate.compare import compare_folder, save_comparison
    from atpsim.report.validation_plot import plot_validation

    comparison = compare_folder(folder, refit=refit)
    saved = save_comparison(comparison)
    saved.append(plot_validation(comparison, Path(folder) / f"{REPORT_PREFIX}.png"))
    return Validation(comparison, tuple(saved))


def fit_nccl_log(
    path: str | Path, *, ranks: int | None = None, placement: str = "out-of-place"
) -> NcclLogFit:
    """Fit the ring all-reduce rows of an ``all_reduce_perf`` log (*ranks* overrides the
    log's rank count; *placement* picks the out-of-place or in-place columns)."""
    from atpsim.calibrate.fit.link import fit_link
    from atpsim.calibrate.measurements.nccl_tests import nccl_samples, read_nccl_tests

    log = read_nccl_tests(path)
    return NcclLogFit(log, fit_link(nccl_samples(log, n_ranks=ranks, placement=placement)))


def validate_trace(
    path: str | Path, *, fitted: str | Path | None = None, layer: str | None = None
) -> TraceComparison:
    """Read the PyTorch profiler (Kineto) trace in *path*, map its GEMMs, memory-bound ops and
    collectives onto atpsim's program of the layer it profiled (the trace's ``atpsim_layer``
    entry, or *layer* text such as ``hidden=256,heads=8,batch=4,seq=128,mesh=1x2,chunks=1``)
    and predict each op and the step: with the fit in *fitted* (a measurements folder; a blind
    check) or with a fit to the trace's own ops (residuals). Raises AtpsimError for a file
    that is not a trace, a trace with no recognizable ops, or an unknown layer."""
    from atpsim.calibrate.trace.compare import compare_trace
    from atpsim.calibrate.trace.layer import traced_layer
    from atpsim.calibrate.trace.reader import read_trace

    trace = read_trace(path)
    try:
        traced = traced_layer(trace.metadata, layer)
    except AtpsimError as error:
        raise error.with_source(str(path)) from None
    return compare_trace(trace, traced, fitted)
