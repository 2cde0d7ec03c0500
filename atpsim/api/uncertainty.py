"""Prediction intervals: a point simulated under N seeded draws of its fitted parameters.

Draw 0 is the point estimate, :func:`atpsim.api.point.simulate_point` itself, untouched. Draws
1..N build the point's topology and hardware profile from drawn parameters
(:mod:`atpsim.calibrate.uncertainty.apply`) and run them through the same
:func:`~atpsim.api.point.simulate_point_on`; the percentiles of step time and TFLOP/s over the
N draws are the interval. Every point (every mesh of a plan, every row of a sweep) sees the
same N parameter sets (common random numbers), so the points' differences are sharp. It costs
N + 1 simulations of the point; a sweep spreads its points over ``-j`` worker processes.

A job point (a job scenario's, a search's) is drawn the same way: its topology and profile
drawn by the one function a step's are (:func:`~atpsim.calibrate.uncertainty.machine.drawn_machine`)
and run through :func:`~atpsim.api.job_point.simulate_job_point_on`; its row gets the
percentiles of the iteration time (:data:`~atpsim.results.schema.JOB_UNCERTAINTY_COLUMNS`).

A point none of whose parameters carries a recorded uncertainty (spec-sheet links, a custom
topology and profile nobody fitted) is refused, one line naming the option: its interval
would be the point estimate, which says nothing about how far to trust it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from atpsim.api.job_point import (
    job_gpus,
    job_topology_spec,
    simulate_job_point,
    simulate_job_point_on,
)
from atpsim.api.point import hardware_profile, simulate_point, simulate_point_on
from atpsim.calibrate.uncertainty.apply import ParameterDraw
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.machine import (
    drawn_machine,
    machine_sources,
    require_sources,
    topology_sources,
)
from atpsim.calibrate.uncertainty.sources import fit_summary
from atpsim.calibrate.uncertainty.summary import Interval
from atpsim.results.schema import JOB_UNCERTAINTY_SCHEMA, STEP_UNCERTAINTY_SCHEMA, ResultsSchema
from atpsim.scenario.inputs import point_files
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.point import SweepPoint
from atpsim.scenario.workload import JOB, STEP, Workload
from atpsim.yamlfile import file_digest

__all__ = ["Draws", "DrawnJobPoint", "DrawnPoint", "PointDraws", "point_draws", "point_sources",
           "require_sources", "simulate_drawn_job_point", "simulate_drawn_point", "topology_sources"]  # fmt: skip


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


def point_sources(point: Any) -> tuple[str, ...]:
    """The fits a point's draws perturb (topology and hardware profile), in a stable order: a
    step point's or a job point's (both name their topology, GPUs and hardware profile)."""
    return machine_sources(point.topology, point.n_devices, point.hardware)


def simulate_drawn_point(point: SweepPoint, draw: ParameterDraw) -> dict[str, Any]:
    """The result columns of *point* under *draw* (the same function as the point estimate,
    on drawn inputs)."""
    topology, profile = drawn_machine(point.topology, point.n_devices,
                                      hardware_profile(point.hardware), point.hardware, draw)  # fmt: skip
    if topology.n_gpus < point.n_devices:
        return simulate_point(point)  # raises the point's own size error
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
    return draw_columns(draws, drawn.sources, "step_time_s", drawn.step_time_s, drawn.tflops_per_gpu)


def draw_columns(draws: Draws, sources: tuple[str, ...], time_column: str,
                 times_s: Sequence[float], tflops: Sequence[float]) -> dict[str, Any]:  # fmt: skip
    """The draws' columns of a results row: how many, the seed, the fits drawn, and the
    percentiles of *time_column* (*times_s*, one per draw) and of tflops_per_gpu (*tflops*)."""
    time, flops = Interval.of(times_s), Interval.of(tflops)
    return {
        "draws": draws.n, "draw_seed": draws.seed, "uncertainty_sources": "+".join(sources),
        f"{time_column}_p10": time.p10, f"{time_column}_p50": time.p50,
        f"{time_column}_p90": time.p90, "tflops_per_gpu_p10": flops.p10,
        "tflops_per_gpu_p50": flops.p50, "tflops_per_gpu_p90": flops.p90,
    }  # fmt: skip


def simulate_drawn_job_point(point: JobPoint, draw: ParameterDraw) -> dict[str, Any]:
    """The result columns of job *point* under *draw* (the same function as its point
    estimate, :func:`~atpsim.api.job_point.simulate_job_point_on`, on the drawn machine)."""
    topology, profile = drawn_machine(job_topology_spec(point), job_gpus(point),
                                      hardware_profile(point.hardware), point.hardware, draw)  # fmt: skip
    return simulate_job_point_on(point, topology, profile)


@dataclass(frozen=True)
class Drawn:
    """A sweep point with parameter draws: the point, its draws; its key says the draws (a
    table with draws is never resumed from one without) and the contents of the ``fit.yaml``
    each fitted file it reads was fitted with (what its draws are read from). Each workload's
    kind (below) names its schema and how its row is simulated."""

    schema: ClassVar[ResultsSchema]

    point: Any
    draws: Draws

    def key(self) -> str:
        files = point_files(self.point.topology, self.point.hardware)
        fits = "".join(f"-f{file_digest(s)}" for s in map(fit_summary, files) if s is not None)
        return f"{self.point.key()}-d{self.draws.n}s{self.draws.seed}{fits}"

    def columns(self, index: int) -> dict[str, Any]:
        return {**self.point.columns(index), "point_key": self.key()}

    def row(self) -> dict[str, Any]:
        """The point estimate's columns, exactly as without draws, then the draws'."""
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        """The point's attributes (the sweep's estimate and warnings read them)."""
        if name in ("point", "draws"):
            raise AttributeError(name)
        return getattr(self.point, name)


@dataclass(frozen=True)
class DrawnPoint(Drawn):
    """A step point with parameter draws, in the step-uncertainty schema."""

    schema: ClassVar[ResultsSchema] = STEP_UNCERTAINTY_SCHEMA

    def row(self) -> dict[str, Any]:
        row = simulate_point(self.point)
        return {**row, **uncertainty_columns(point_draws(self.point, self.draws), self.draws)}


@dataclass(frozen=True)
class DrawnJobPoint(Drawn):
    """A job point with parameter draws, in the job-uncertainty schema: the iteration time's
    percentiles (none for a layout that does not fit in memory: it is not simulated)."""

    schema: ClassVar[ResultsSchema] = JOB_UNCERTAINTY_SCHEMA

    def row(self) -> dict[str, Any]:
        row = simulate_job_point(self.point)
        sources = point_sources(self.point)
        if row.get("fits_memory") is False:
            return {**row, "draws": self.draws.n, "draw_seed": self.draws.seed,
                    "uncertainty_sources": "+".join(sources)}  # fmt: skip
        drawn = [simulate_drawn_job_point(self.point, ParameterDraw(self.draws, i)) for i in self.draws.indices()]
        return {**row, **draw_columns(self.draws, sources, "iteration_time_s",
                                      [float(r["iteration_time_s"]) for r in drawn],
                                      [float(r["tflops_per_gpu"]) for r in drawn])}  # fmt: skip


#: Each workload's points with draws.
DRAWN: dict[Workload, type[Drawn]] = {STEP: DrawnPoint, JOB: DrawnJobPoint}


def simulate_with_draws(drawn: Drawn) -> dict[str, Any]:
    """The results row of a point with draws (:meth:`Drawn.row`; module-level: pickled to
    workers)."""
    return drawn.row()


def with_draws(points: list[Any], draws: Draws | None) -> list[Any]:
    """*points* (step or job points) with *draws* (:data:`DRAWN`; unchanged without draws); a
    point none of whose parameters has a recorded uncertainty is refused before anything is
    simulated."""
    if draws is None:
        return points
    for point in points:
        require_sources(point_sources(point), f"{point.topology_label} with {point.hardware}",
                        key="uncertainty")  # fmt: skip
    return [DRAWN[p.workload](replace(p), draws) for p in points]
