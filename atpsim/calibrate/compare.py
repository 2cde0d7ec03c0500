"""Compare: score each measured layer against its prediction by the fitted simulator.

The check points are the whole-layer forward+backward times (never used by the fit, which
sees only collectives, GEMMs and single memory-bound ops). :func:`read_check_points` gathers
them with what predicts them: the fabric of ``fitted/topology.yaml`` and the profile of
``fitted/hardware.yaml`` (fitting first when they are missing or on *refit*).
:func:`compare_layers` has each layer predicted by the *predict* function its caller passes
in (the simulator's own path for a sweep point, :func:`atpsim.api.calibrate.simulate_layer`:
the ATP program of :mod:`atpsim.parallel.atp` on the two streams, ring collectives,
``layers = 1``), since calibration sits below the simulator's API and must not chain the
stages a second time.

On a CPU machine with fewer cores than busy ranks, each rank computes at its share of a core
(:func:`~atpsim.calibrate.measurements.description.cpu_share`; the GEMMs and memory-bound ops
were measured by one process alone), and without a spare core for its communication a rank's
collectives take turns with its compute (the step is their sum, not the two streams'
overlap). The error of a point is ``(predicted - measured) / measured``; the folder passes
when the median absolute error is at most the tolerance written beside the measurements in
``tolerance.yaml`` (:mod:`atpsim.calibrate.measurements.settings`, which also says which
statistic of the repetitions to use).

The result is a typed table (:class:`Comparison`, one :class:`CheckResult` a row); its files
(``validation_report.csv``, ``.md`` and ``.png``) are written by
:mod:`atpsim.report.calibration`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from atpsim.calibrate.machine import (
    SUMMARY_FILE,
    FolderFit,
    fit_folder,
    fitted_paths,
    read_fit_summary,
)
from atpsim.calibrate.measurements.description import comm_overlaps_compute, cpu_share, slowed
from atpsim.calibrate.measurements.folder import read_measurements
from atpsim.calibrate.measurements.samples import LayerPoint
from atpsim.calibrate.measurements.settings import read_settings
from atpsim.compute.hardware import HardwareProfile, load_profile
from atpsim.errors import AtpsimError
from atpsim.topology.custom import build_custom
from atpsim.topology.graph import Topology
from atpsim.topology.spec import load_topology


@dataclass(frozen=True)
class LayerTimes:
    """One layer's simulated step: its time and the busy time of the critical rank's compute
    and communication streams, and the communication left exposed (all in s)."""

    step_s: float
    compute_s: float
    comm_s: float
    exposed_comm_s: float


#: What predicts a check point: (layer, fitted fabric, profile at the rank's core share) ->
#: its simulated step. Passed in by the layer that owns the simulation.
LayerPredictor = Callable[[LayerPoint, Topology, HardwareProfile], LayerTimes]


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
    """Every check point's result, the tolerance, the fit if this run made one, and the
    fitted numbers of ``fitted/fit.yaml`` (empty without one) that a report quotes."""

    folder: Path
    results: tuple[CheckResult, ...]
    tolerance: float
    fit: FolderFit | None = None
    statistic: str = "median"
    fit_summary: Mapping[str, Any] = field(default_factory=dict)

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


@dataclass(frozen=True)
class CheckPoints:
    """A folder's measured layers and what predicts them: the fitted fabric and profile, the
    machine description (cores, device), the tolerance and statistic of ``tolerance.yaml``,
    the fit if this run made one."""

    folder: Path
    layers: tuple[LayerPoint, ...]
    topology: Topology
    profile: HardwareProfile
    machine: dict[str, Any]
    tolerance: float
    statistic: str
    fit: FolderFit | None


def read_check_points(folder: str | Path, *, refit: bool = False) -> CheckPoints:
    """The check points of *folder* with its fit (made first when missing or *refit*); an
    AtpsimError when the fit lacks GEMMs, the folder has no layers, or a layer spans ranks
    and no collectives were measured (a one-GPU folder's layers on DeviceMesh(1, 1) need
    none: they are predicted on a single GPU, :func:`single_gpu_topology`)."""
    settings = read_settings(folder)
    fit = _fit_when_needed(folder, refit)
    measurements = read_measurements(folder, settings.statistic)
    if not measurements.layers:
        raise AtpsimError("no layer measurements (the check points) to compare",
                          source=str(folder))  # fmt: skip
    topology_path, profile_path = fitted_paths(folder)
    tolerance = settings.tolerance if settings.tolerance is not None else 0.0
    return CheckPoints(Path(folder), tuple(measurements.layers),
                       _check_topology(folder, topology_path, measurements.layers),
                       load_profile(profile_path), measurements.machine, tolerance,
                       settings.statistic, fit)  # fmt: skip


def _fit_when_needed(folder: str | Path, refit: bool) -> FolderFit | None:
    """Fit *folder* when *refit* or its fit is missing (None when it stays)."""
    _, profile_path = fitted_paths(folder)
    fitted_before = profile_path.is_file() and (profile_path.parent / SUMMARY_FILE).is_file()
    if not refit and fitted_before:
        return None
    fit = fit_folder(folder)
    if fit.profile is None:
        raise AtpsimError("no GEMMs measured: the layers cannot be predicted",
                          source=str(folder))  # fmt: skip
    return fit


def _check_topology(
    folder: str | Path, topology_path: Path, layers: Sequence[LayerPoint]
) -> Topology:
    """The fitted fabric, or one GPU where no collectives were measured and every layer ran
    on one rank (its step has no communication to predict)."""
    if topology_path.is_file():
        return load_topology(str(topology_path))
    spanning = [layer.label for layer in layers if layer.d1 * layer.d2 > 1]
    if spanning:
        raise AtpsimError(
            f"no collectives measured: the layers on more than one rank cannot be predicted "
            f"({len(spanning)} of {len(layers)}, e.g. {spanning[0]})",
            source=str(folder),
        )
    return single_gpu_topology()


def single_gpu_topology() -> Topology:
    """One GPU and no links: where a layer on DeviceMesh(1, 1) is simulated."""
    return build_custom({"name": "single-gpu", "routing": "up-down",
                         "nodes": [{"name": "p0", "kind": "gpu"}], "links": []})  # fmt: skip


def compare_layers(checks: CheckPoints, predict: LayerPredictor) -> Comparison:
    """Score every layer of *checks* against its prediction by *predict* (module docstring)."""
    results = tuple(check_layer(point, checks.topology, checks.profile, checks.machine, predict)
                    for point in checks.layers)  # fmt: skip
    return Comparison(checks.folder, results, checks.tolerance, checks.fit, checks.statistic,
                      read_fit_summary(checks.folder))  # fmt: skip


def check_layer(
    point: LayerPoint,
    topology: Topology,
    profile: HardwareProfile,
    machine: dict[str, Any],
    predict: LayerPredictor,
) -> CheckResult:
    """:func:`score_layer` on *machine*: CPU ranks get their share of the cores and, with no
    spare core, take turns between compute and communication."""
    ranks = point.d1 * point.d2
    share = cpu_share(machine, ranks)
    result = score_layer(point, topology, slowed(profile, share), predict, share)
    return taking_turns(result, machine, ranks)


def taking_turns(result: CheckResult, machine: dict[str, Any], ranks: int) -> CheckResult:
    """*result* as is where *machine* has a spare core per rank for its communication;
    otherwise compute and communication take turns: the step is at least their sum and all
    of the communication is exposed."""
    if comm_overlaps_compute(machine, ranks):
        return result
    serial_s = max(result.predicted_s, result.compute_s + result.comm_s)
    return replace(result, predicted_s=serial_s, exposed_comm_s=result.comm_s, overlap=False)


def score_layer(
    point: LayerPoint,
    topology: Topology,
    profile: HardwareProfile,
    predict: LayerPredictor,
    cpu_share: float = 1.0,
) -> CheckResult:
    """*point*'s layer on its mesh and chunks as *predict* simulates it on *topology*;
    *profile* is already slowed to the *cpu_share* each rank gets (recorded, not applied)."""
    ranks = point.d1 * point.d2
    if ranks > topology.n_gpus:
        raise AtpsimError(f"layer {point.label} needs {ranks} ranks; the fitted topology "
                          f"has {topology.n_gpus}")  # fmt: skip
    times = predict(point, topology, profile)
    return CheckResult(point, times.step_s, times.compute_s, times.comm_s, times.exposed_comm_s,
                       cpu_share)  # fmt: skip
