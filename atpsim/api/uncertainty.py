"""Prediction intervals: a point simulated under N seeded draws of its fitted parameters.

Draw 0 is the point estimate, :func:`atpsim.api.point.simulate_point` itself, untouched. Draws
1..N build the point's topology and hardware profile from drawn parameters
(:mod:`atpsim.calibrate.uncertainty.apply`) and run them through the same
:func:`~atpsim.api.point.simulate_point_on`; the percentiles of step time and TFLOP/s over the
N draws are the interval. Every point (every mesh of a plan, every row of a sweep) sees the
same N parameter sets (common random numbers), so the points' differences are sharp. It costs
N + 1 simulations of the point; a sweep spreads its points over ``-j`` worker processes.

A point none of whose parameters carries a recorded uncertainty (spec-sheet links, a custom
topology and profile nobody fitted) is refused, one line naming the option: its interval
would be the point estimate, which says nothing about how far to trust it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from atpsim.api.point import hardware_profile, simulate_point, simulate_point_on
from atpsim.calibrate.uncertainty.apply import (
    ParameterDraw,
    drawn_profile,
    drawn_topology,
    nccl_source,
    preset_targets,
    profile_records,
    spec_kind,
)
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.sources import fitted_record
from atpsim.calibrate.uncertainty.summary import Interval
from atpsim.errors import AtpsimError
from atpsim.results.schema import STEP_UNCERTAINTY_SCHEMA, ResultsSchema
from atpsim.scenario.point import SweepPoint
from atpsim.topology.spec import load_topology

__all__ = ["Draws", "DrawnPoint", "PointDraws", "point_draws", "point_sources",
           "simulate_drawn_point", "topology_sources"]  # fmt: skip


@dataclass(frozen=True)
class PointDraws:
    """A point's step time (s) and TFLOP/s per GPU (10^12) in draws 1..N, and the fits drawn."""

    step_time_s: tuple[float, ...]
    tflops_per_gpu: tuple[float, ...]
    sources: tuple[str, ...]

    @property
    def step_interval(self) -> Interval:
        return Interval.of(self.step_time_s)

    @property
    def tflops_interval(self) -> Interval:
        return Interval.of(self.tflops_per_gpu)


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


def point_sources(point: SweepPoint) -> tuple[str, ...]:
    """The fits a point's draws perturb (topology and hardware profile), in a stable order."""
    found = topology_sources(point.topology, point.n_devices)
    found += [r.source for r in profile_records(point.hardware)]
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


def simulate_drawn_point(point: SweepPoint, draw: ParameterDraw) -> dict[str, Any]:
    """The result columns of *point* under *draw* (the same function as the point estimate,
    on drawn inputs)."""
    topology = drawn_topology(point.topology, point.n_devices, draw)
    if topology.n_gpus < point.n_devices:
        return simulate_point(point)  # raises the point's own size error
    profile = drawn_profile(hardware_profile(point.hardware), point.hardware, draw)
    return simulate_point_on(point, topology, profile)


def point_draws(point: SweepPoint, draws: Draws, sources: tuple[str, ...] | None = None) -> PointDraws:
    """*point* simulated in each of *draws* (not draw 0: the caller has the point estimate)."""
    sources = point_sources(point) if sources is None else sources
    require_sources(sources, f"{point.topology_label} with {point.hardware}")
    rows = [simulate_drawn_point(point, ParameterDraw(draws, i)) for i in draws.indices()]
    return PointDraws(tuple(float(r["step_time_s"]) for r in rows),
                      tuple(float(r["tflops_per_gpu"]) for r in rows), sources)  # fmt: skip


def uncertainty_columns(drawn: PointDraws, draws: Draws) -> dict[str, Any]:
    """The results columns of :data:`~atpsim.results.schema.UNCERTAINTY_COLUMNS`."""
    step, tflops = drawn.step_interval, drawn.tflops_interval
    return {
        "draws": draws.n, "draw_seed": draws.seed, "uncertainty_sources": "+".join(drawn.sources),
        "step_time_s_p10": step.p10, "step_time_s_p50": step.p50, "step_time_s_p90": step.p90,
        "tflops_per_gpu_p10": tflops.p10, "tflops_per_gpu_p50": tflops.p50,
        "tflops_per_gpu_p90": tflops.p90,
    }  # fmt: skip


@dataclass(frozen=True)
class DrawnPoint:
    """A sweep point with parameter draws: the step point, its draws, the step-uncertainty
    schema; its key says the draws (a table with draws is never resumed from one without)."""

    schema: ClassVar[ResultsSchema] = STEP_UNCERTAINTY_SCHEMA

    point: SweepPoint
    draws: Draws

    def key(self) -> str:
        return f"{self.point.key()}-d{self.draws.n}s{self.draws.seed}"

    def columns(self, index: int) -> dict[str, Any]:
        return {**self.point.columns(index), "point_key": self.key()}

    def __getattr__(self, name: str) -> Any:
        """The step point's attributes (the sweep's estimate and warnings read them)."""
        if name in ("point", "draws"):
            raise AttributeError(name)
        return getattr(self.point, name)


def simulate_with_draws(drawn: DrawnPoint) -> dict[str, Any]:
    """The results row of a :class:`DrawnPoint`: the point estimate's columns, exactly as
    without draws, then the percentiles over the draws (module-level: pickled to workers)."""
    row = simulate_point(drawn.point)
    return {**row, **uncertainty_columns(point_draws(drawn.point, drawn.draws), drawn.draws)}


def with_draws(points: list[Any], draws: Draws | None) -> list[Any]:
    """*points* as :class:`DrawnPoint` s of *draws* (unchanged without draws); a point none of
    whose parameters has a recorded uncertainty is refused before anything is simulated."""
    if draws is None:
        return points
    for point in points:
        require_sources(point_sources(point), f"{point.topology_label} with {point.hardware}",
                        key="uncertainty")  # fmt: skip
    return [DrawnPoint(replace(p), draws) for p in points]
