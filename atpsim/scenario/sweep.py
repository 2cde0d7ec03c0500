"""A :class:`Scenario` expanded into :class:`SweepPoint`: the cartesian product of its axes.

Axes, outermost first (the order of the points): topology, hardware, model,
parallelism.devices, parallelism.meshes (resolved per device count), parallelism.placement,
chunks, algorithm, mode. Identical points (a topology listed twice) appear once.

Meshes: ``[d1, d2]`` / ``"d1xd2"`` / ``"atp-i"`` (DeviceMesh(devices/i, i)) must use exactly
the device count and divide ``model.hidden`` in both dimensions, else a
:class:`ScenarioError`. ``all`` is every factorization ``d1 * d2 = devices`` that divides the
hidden size (the others are left out). ``atp-opt`` makes the whole list one ATP-OPT group:
every such factorization plus the meshes listed, each a point with ``group="atp-opt"``; the
report keeps the fastest mesh of each group (see :meth:`SweepPoint.group_key`).

``parallelism.scheme`` (after the device count): ``atp`` expands meshes as above; ``summa``
takes square grids ``[q, q]`` stacked ``devices / q²`` deep (:func:`resolve_grids`; placement
does not apply: the grid's layers are consecutive GPUs, :class:`atpsim.parallel.grid.Grid`);
``sagemaker`` makes the devices one SageMaker-style TP group over data-parallel ranks
(:class:`atpsim.parallel.sagemaker.SageMakerGroup`; meshes and placement do not apply).

A job scenario (``parallelism`` with tp / pp / dp / global_batch) expands into whole-job
points instead: :mod:`atpsim.scenario.job_sweep`. Each workload's expander is one entry of
:data:`EXPANDERS`, looked up by :attr:`Scenario.workload <atpsim.scenario.schema.Scenario.
workload>`; the expansion, its laziness and its description are one path for both.

Expanding builds each topology at each device count (memoized by the topology layer), which
is how a device count larger than the topology and a broken custom graph are caught.
:class:`SweepPoints` expands lazily (a large sweep is never held as a list).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from atpsim.compute.hardware import topology_hardware
from atpsim.compute.models import ModelConfig
from atpsim.errors import did_you_mean
from atpsim.parallel.atp import kv_heads_split
from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import SageMakerGroup
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.job_sweep import expand_job_sweep, job_axes
from atpsim.scenario.lazy import LazyPoints
from atpsim.scenario.point import SweepPoint
from atpsim.scenario.schema import MeshChoice, Scenario, TopologyEntry
from atpsim.scenario.topologies import scenario_error, sized_topologies
from atpsim.scenario.workload import JOB, STEP, Workload
from atpsim.training.layouts import tp_meshes

ATP_OPT = "atp-opt"


def _check_hidden(scenario: Scenario, mesh: DeviceMesh, model: ModelConfig, k: int) -> None:
    for dim, size in ((1, mesh.d1), (2, mesh.d2)):
        if model.hidden % size:
            message = (
                f"{mesh} splits model.hidden = {model.hidden} (model {model.name!r}) "
                f"{size} ways on dimension {dim}; expected d1 and d2 to divide the "
                f"hidden size"
            )
            raise scenario_error(scenario, message, "parallelism", "meshes", k)
    if model.ffn_size % mesh.d1:
        message = (f"{mesh} splits model.ffn_hidden = {model.ffn_size} (model {model.name!r}) "
                   f"{mesh.d1} ways on dimension 1; expected d1 to divide it")  # fmt: skip
        raise scenario_error(scenario, message, "parallelism", "meshes", k)


def _listed_mesh(
    scenario: Scenario, choice: MeshChoice, devices: int, model: ModelConfig, k: int
) -> DeviceMesh:
    if choice.kind == "atp" and devices % choice.i:
        message = (
            f"ATP-{choice.i} is DeviceMesh({devices}/{choice.i}, {choice.i}); "
            f"expected a divisor of the device count {devices}"
        )
        raise scenario_error(scenario, message, "parallelism", "meshes", k)
    mesh = choice.mesh(devices)
    if mesh.size != devices:
        message = f"{mesh} has {mesh.size} devices; expected {devices}"
        raise scenario_error(scenario, message, "parallelism", "meshes", k)
    _check_hidden(scenario, mesh, model, k)
    return mesh


def resolve_meshes(
    scenario: Scenario, devices: int, model: ModelConfig
) -> list[tuple[DeviceMesh, str | None]]:
    """The (mesh, group) pairs of ``parallelism.meshes`` on *devices* GPUs for *model*
    (:func:`atpsim.training.layouts.tp_meshes`, the one enumerator): the listed meshes
    (checked), then, for ``all`` / ``atp-opt``, every factorization of the devices whose d1
    and d2 divide the hidden size."""
    choices = scenario.parallelism.meshes
    if not kv_heads_split(model, devices):
        message = (f"model.kv_heads = {model.n_kv_heads} (model {model.name!r}) does not split over "
                   f"{devices} devices; grouped-query attention needs a TP size that divides kv_heads")
        raise scenario_error(scenario, message, "parallelism", "devices")
    group = ATP_OPT if any(c.kind == "opt" for c in choices) else None
    listed = [_listed_mesh(scenario, choice, devices, model, k)
              for k, choice in enumerate(choices) if choice.kind in ("size", "atp")]  # fmt: skip
    sizes = (devices,) if group or choices[0].kind == "all" else ()
    meshes = tp_meshes(devices, sizes=sizes, listed=listed, split_hidden=model.hidden)
    meshes = [m for m in meshes if model.ffn_size % m.d1 == 0]
    if not meshes:
        message = (
            f"no factorization of {devices} devices divides model.hidden = "
            f"{model.hidden} (model {model.name!r}); expected a mesh d1 x d2 with d1 "
            f"and d2 dividing the hidden size"
        )
        raise scenario_error(scenario, message, "parallelism", "meshes")
    return [(mesh, group) for mesh in meshes]


def _check_chunks(scenario: Scenario, model: ModelConfig) -> None:
    for position, chunks in enumerate(scenario.chunks):
        if model.batch % chunks:
            message = (
                f"{chunks} chunks split model.batch = {model.batch} (model "
                f"{model.name!r}) unevenly; expected a divisor of the batch"
            )
            raise scenario_error(scenario, message, "chunks", position)


def _check_calibration(scenario: Scenario, parts: list[Scenario]) -> None:
    if not scenario.calibration:
        return
    if not any("analytic" in part.mode for part in parts):
        raise scenario_error(
            scenario,
            "calibration is used only in analytic mode; expected 'analytic' in mode",
            "calibration",
        )
    labels = list(dict.fromkeys(entry.label() for part in parts for entry in part.topologies))
    for scope in scenario.calibration:
        if scope != "*" and scope not in labels:
            message = f"unknown topology label {scope!r}{did_you_mean(scope, labels)}"
            raise scenario_error(scenario, message, "calibration", scope)


def expand_sweep(scenario: Scenario) -> list[SweepPoint] | list[JobPoint]:
    """Every point of *scenario*, in axis order (see the module docstring), each checked;
    with ``cases``, the points of each case in turn (a point two cases share, once). A job
    scenario's points are :class:`JobPoint` (:mod:`atpsim.scenario.job_sweep`). The list of
    :class:`SweepPoints`, which expands them lazily instead.

    Raises :class:`ScenarioError` naming the scenario file and key for a device count above
    the topology's, a mesh of the wrong size or not dividing the hidden size, chunks not
    dividing the batch, calibration without analytic mode, or a topology that cannot be built.
    """
    return list(SweepPoints(scenario))  # type: ignore[return-value]


class SweepPoints(LazyPoints):
    """The points of *scenario* (as :func:`expand_sweep` lists them), expanded lazily
    (:class:`LazyPoints`), one case after another by its workload's :data:`EXPANDERS` entry
    (a job scenario's case is listed whole: a job point costs seconds to simulate, so its
    sweeps are small)."""

    def __init__(self, scenario: Scenario):
        super().__init__(lambda: _scenario_points(scenario))
        self.scenario = scenario


def _scenario_points(scenario: Scenario) -> Iterator[SweepPoint | JobPoint]:
    """Every point of *scenario*, case by case (the lazy first pass drops the points an
    earlier case made); a job scenario has no calibration to check (its schema refuses it)."""
    expander = EXPANDERS[scenario.workload]
    _check_calibration(scenario, scenario.parts())
    for part in scenario.parts():
        yield from expander.part_points(part)


def _step_part_points(part: Scenario) -> Iterator[SweepPoint]:
    for index, entry in enumerate(part.topologies):
        yield from _topology_points(part, index, entry)


def _topology_points(scenario: Scenario, index: int, entry: TopologyEntry) -> Iterator[SweepPoint]:
    sized = sized_topologies(scenario, index)
    default_hardware = topology_hardware(sized[0][2])
    base = {
        "scenario": scenario.name,
        "topology": entry.spec_mapping(),
        "topology_label": entry.label(),
    }
    for hardware in scenario.hardware or (default_hardware,):
        for model_entry in scenario.models:
            model = model_entry.config()
            _check_chunks(scenario, model)
            for _, devices, _topology in sized:
                fields = {**base, "hardware": hardware, "model": model, "n_devices": devices}
                for scheme in scenario.parallelism.scheme:
                    if scheme == "summa":
                        yield from _summa_points(scenario, fields, devices, model)
                    elif scheme == "sagemaker":
                        yield from _sagemaker_points(scenario, fields, devices, model)
                    else:
                        yield from _mesh_points(scenario, fields, devices, model)


def _mesh_points(
    scenario: Scenario, fields: dict[str, Any], devices: int, model: ModelConfig
) -> Iterator[SweepPoint]:
    for mesh, group in resolve_meshes(scenario, devices, model):
        for placement in scenario.parallelism.placement:
            placed = DeviceMesh(mesh.d1, mesh.d2, placement)
            for chunks in scenario.chunks:
                for algorithm in scenario.algorithm:
                    for mode in scenario.mode:
                        calibration = (
                            scenario.calibration_for(fields["topology_label"], placed)
                            if mode == "analytic"
                            else None
                        )
                        yield SweepPoint(
                            **fields,
                            tp=placed,
                            chunks=chunks,
                            algorithm=algorithm,
                            mode=mode,
                            calibration=calibration,
                            group=group,
                        )


def resolve_grids(
    scenario: Scenario, devices: int, model: ModelConfig
) -> list[tuple[int, int, str | None]]:
    """The SUMMA grids (q, depth, group) of ``parallelism.meshes`` on *devices* GPUs: a listed
    ``[q, q]`` must be square with ``q²`` dividing the device count (depth = devices / q²);
    ``all`` / ``atp-opt`` take every q >= 2 whose grid fits and splits the model's heads and
    batch (:func:`atpsim.parallel.summa.summa_dims` checks the chunks at simulation time)."""
    choices = scenario.parallelism.meshes
    if not kv_heads_split(model, devices):
        message = (f"model.kv_heads = {model.n_kv_heads} (model {model.name!r}) does not split over "
                   f"{devices} devices; grouped-query attention needs a TP size that divides kv_heads")
        raise scenario_error(scenario, message, "parallelism", "devices")
    group = ATP_OPT if any(c.kind == "opt" for c in choices) else None
    grids: list[tuple[int, int]] = []
    for k, choice in enumerate(choices):
        if choice.kind == "atp":
            message = f"scheme summa takes a square grid [q, q], not {choice}"
            raise scenario_error(scenario, message, "parallelism", "meshes", k)
        if choice.kind == "size":
            grids.append(_listed_grid(scenario, choice, devices, k))
    if group or choices[0].kind == "all":
        grids += [
            (q, devices // (q * q))
            for q in range(2, devices + 1)
            if devices % (q * q) == 0 and model.heads % q == 0 and model.batch % (devices // q) == 0
        ]
    if not grids:
        message = (
            f"no square grid q x q x depth of {devices} devices splits model {model.name!r}; "
            "expected q² to divide the device count"
        )
        raise scenario_error(scenario, message, "parallelism", "meshes")
    return [(q, depth, group) for q, depth in dict.fromkeys(grids)]


def _listed_grid(scenario: Scenario, choice: MeshChoice, devices: int, k: int) -> tuple[int, int]:
    q = choice.d1
    if choice.d1 != choice.d2:
        message = f"scheme summa needs a square grid: expected d1 == d2, got {choice}"
        raise scenario_error(scenario, message, "parallelism", "meshes", k)
    if devices % (q * q):
        message = f"grid {choice} needs q·q·depth == devices; {q * q} does not divide {devices}"
        raise scenario_error(scenario, message, "parallelism", "meshes", k)
    return q, devices // (q * q)


def _summa_points(
    scenario: Scenario, fields: dict[str, Any], devices: int, model: ModelConfig
) -> Iterator[SweepPoint]:
    for q, depth, group in resolve_grids(scenario, devices, model):
        for chunks in scenario.chunks:
            for algorithm in scenario.algorithm:
                for mode in scenario.mode:
                    yield SweepPoint(
                        **fields, tp=Grid(q, depth), chunks=chunks, algorithm=algorithm,
                        mode=mode, group=group,
                    )  # fmt: skip


def _sagemaker_points(
    scenario: Scenario, fields: dict[str, Any], devices: int, model: ModelConfig
) -> Iterator[SweepPoint]:
    """One SageMaker group of all *devices* (meshes and placement do not apply), its
    ``model.batch`` samples split over the ranks."""
    if model.batch % devices:
        message = (
            f"scheme sagemaker splits the batch over the {devices} devices: model "
            f"{model.name!r} has batch {model.batch}, expected a multiple of {devices}"
        )
        raise scenario_error(scenario, message, "parallelism", "scheme")
    for chunks in scenario.chunks:
        for algorithm in scenario.algorithm:
            for mode in scenario.mode:
                yield SweepPoint(
                    **fields, tp=SageMakerGroup(devices), chunks=chunks, algorithm=algorithm,
                    mode=mode,
                )  # fmt: skip


def describe_sweep(scenario: Scenario, points: Collection[Any] | None = None) -> str:
    """The scenario's axes and its point count, a line each (what ``atpsim run`` prints);
    with ``cases``, the axes of each case. Pass *points* when already expanded (a list or
    :class:`SweepPoints`)."""
    counted = SweepPoints(scenario) if points is None else points
    lines = [f"scenario {scenario.name}: {_count(len(counted))}"]
    parts = scenario.parts()
    if len(parts) == 1 and not scenario.cases:
        return "\n".join(lines + _axes(scenario, "  "))
    for index, part in enumerate(parts):
        lines.append(f"  cases[{index}]: {_count(_part_count(part))}")
        lines += _axes(part, "    ")
    return "\n".join(lines)


def _part_count(part: Scenario) -> int:
    return sum(1 for _ in EXPANDERS[part.workload].part_points(part))


def _count(n: int) -> str:
    return f"{n} point{'s' * (n != 1)}"


def _axes(scenario: Scenario, indent: str) -> list[str]:
    expander = EXPANDERS[scenario.workload]
    return [f"{indent}{name:<{expander.width}} {values}" for name, values in expander.axes(scenario)]


def step_axes(scenario: Scenario) -> list[tuple[str, str]]:
    """(axis, values) of a step scenario, as ``atpsim run`` announces them."""
    meshes = ", ".join(str(c) for c in scenario.parallelism.meshes)
    if any(c.kind == "opt" for c in scenario.parallelism.meshes):
        meshes += " (ATP-OPT: best of every factorization)"
    devices = scenario.parallelism.devices
    axes = [
        ("topology", ", ".join(entry.label() for entry in scenario.topologies)),
        ("hardware", ", ".join(scenario.hardware) if scenario.hardware else "topology default"),
        ("model", ", ".join(entry.config().name for entry in scenario.models)),
        ("devices", ", ".join(map(str, devices)) if devices else "all GPUs of the topology"),
        ("meshes", meshes),
        ("placement", ", ".join(scenario.parallelism.placement)),
        ("chunks", ", ".join(map(str, scenario.chunks))),
        ("algorithm", ", ".join(scenario.algorithm)),
        ("mode", ", ".join(scenario.mode)),
    ]
    if scenario.parallelism.scheme != ("atp",):
        axes.insert(6, ("scheme", ", ".join(scenario.parallelism.scheme)))
    return axes


@dataclass(frozen=True)
class Expander:
    """How a scenario of one workload expands and is announced: *part_points* makes the
    points of one part (a case, or the scenario without cases) in axis order, checking each;
    *axes* names its axes and their values, written in a column *width* characters wide."""

    part_points: Callable[[Scenario], Iterable[Any]]
    axes: Callable[[Scenario], list[tuple[str, str]]]
    width: int


#: The expander of each workload (:mod:`atpsim.scenario.workload`). A job part's points are
#: :func:`expand_job_sweep`'s (a list, with a point its layouts make twice once).
EXPANDERS: dict[Workload, Expander] = {
    STEP: Expander(_step_part_points, step_axes, 10),
    JOB: Expander(expand_job_sweep, job_axes, 12),
}
