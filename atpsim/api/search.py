"""`atpsim search`: the whole-job layouts of a design space, pruned before any simulation and
simulated on the sweep's executors (``-j N``, ``--scheduler``), resumable like a run (issue 15).

A design space is a job scenario (:mod:`atpsim.scenario.parallelism`: topologies x hardware x
models x devices x TP meshes x pp x dp x micro-batch x global batch x schedule x ... x chunks x
algorithm x network), read from a YAML file and/or the command line's options and checked as a
scenario is; a key a search does not use (:data:`UNUSED_KEYS`: a report, a perturbation, a
neighbour job, ...) is refused by name. Where ``atpsim run`` refuses a layout that cannot run,
a search leaves it out and counts it. What the space leaves unset is searched as ``atpsim plan --global-batch`` searches it
(:mod:`atpsim.training.layouts`): ``tp`` every mesh d1 x d2 of 1 to *max_tp* GPUs dividing the
devices, ``pp`` every divisor of the layers (every depth with ``partition: auto``, each
layout's split resolved on its hardware before it is pruned), ``micro_batch`` 1, 2 and 4, ``dp`` what fills the
devices.

Pruned before simulation (:func:`~atpsim.training.layouts.prune_reason`): by divisibility (the
mesh splits the hidden size or the heads unevenly, the layers over the stages, the batch over
micro-batches and replicas, the vocabulary over the TP ranks, the chunks over the
micro-batch, the interleaved schedule's micro-batches over its stages) and by memory (the
busiest rank's :func:`~atpsim.training.job.job_memory` past the GPU's). The candidates are made
again at each pass (:class:`~atpsim.scenario.lazy.LazyPoints`), so a space of 100,000 layouts
is never held; the rest are :class:`~atpsim.scenario.job_point.JobPoint` simulated by
:func:`~atpsim.api.job_point.simulate_job_point` through :func:`atpsim.sweep.runner.stream_sweep`.

The output folder holds ``results.csv`` (and .parquet: one row per simulated layout, the job
schema, in the order of the space), ``search.yaml`` (the space as searched) and, while it
runs, ``results.partial.csv``; ``resume=True`` continues an interrupted search.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import ValidationError
from rich.console import Console

from atpsim.api.job_point import simulate_job_point
from atpsim.api.point import hardware_profile
from atpsim.api.scenario import scenario_draws
from atpsim.api.search_text import DEFAULT_MICRO_BATCHES, defaulted_settings, describe_search
from atpsim.api.uncertainty import DrawnJobPoint, Draws, require_sources, simulate_with_draws
from atpsim.calibrate.provenance import machine_provenance
from atpsim.calibrate.uncertainty.machine import machine_sources
from atpsim.compute.hardware import topology_hardware
from atpsim.compute.models import ModelConfig
from atpsim.errors import ScenarioError, SimulationError, SizeLimitError, param
from atpsim.parallel.context import check_context
from atpsim.parallel.mesh import DeviceMesh
from atpsim.report.answer import answer_lines
from atpsim.report.large import is_large, summarize
from atpsim.results.io import read_results
from atpsim.results.schema import JOB_SCHEMA, JOB_UNCERTAINTY_SCHEMA
from atpsim.scenario.entries import ModelEntry, TopologyEntry
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.lazy import LazyPoints
from atpsim.scenario.loader import error_from_validation, read_yaml
from atpsim.scenario.schema import Scenario
from atpsim.scenario.sweep import sized_topologies
from atpsim.scenario.topologies import scenario_error
from atpsim.scenario.workload import JOB
from atpsim.sweep.estimate import format_duration, long_sweep_warning
from atpsim.sweep.lock import folder_lock
from atpsim.sweep.owner import check_owner
from atpsim.sweep.runner import Simulate, check_jobs, stream_sweep
from atpsim.sweep.table import SweepTable
from atpsim.training.config import JobConfig
from atpsim.training.defaults import model_vocab
from atpsim.training.layouts import (
    candidates,
    expert_parallel_degrees,
    job_layouts,
    layer_divisors,
    tp_meshes,
)

log = logging.getLogger(__name__)

SPACE_COPY = "search.yaml"
DEFAULT_MAX_TP = 8
#: Where a space given only by options is said to come from in errors.
OPTIONS_SOURCE = "atpsim search"


@dataclass
class SearchResult:
    """What a search wrote: the folder, its table (counted), the candidates pruned before
    simulation by reason, the *best* rows (most model FLOP/s per GPU first) and the files."""

    out_dir: Path
    table: SweepTable
    pruned: Mapping[str, int]
    best: pd.DataFrame
    files: list[Path] = field(default_factory=list)

    def answer(self) -> list[str]:
        """The search's answer as a report states it (:func:`atpsim.report.answer.answer_lines`):
        per model, GPU count and batch, the fastest layout and its margins over the runner-up
        and the other TP scheme's best; empty for a table too large to read whole."""
        if is_large(self.out_dir):
            return []
        return answer_lines(read_results(self.table.path), "job")


def search_space(path: Path | str | None = None, **overrides: Any) -> Scenario:
    """The design space: the job scenario in the YAML file *path* (none: an empty one) with
    *overrides* replacing its keys (``parallelism``'s keys one by one), checked as a scenario
    (a ScenarioError naming the file, or the options, and the key).

    Its name, which owns its output folder (:func:`~atpsim.sweep.owner.check_owner`) and is
    the default one's (``reports/<name>/``), is the file's ``name`` (else its stem), or
    ``search`` without a file; with *overrides* it ends in ``-`` and :func:`overrides_hash`,
    so two searches that differ in their options never take each other's folder, while the
    same options find their own again (to resume it)."""
    source = str(path) if path is not None else OPTIONS_SOURCE
    raw = read_yaml(Path(path), source) if path is not None else {}
    if not isinstance(raw, dict):
        raise ScenarioError("expected a mapping of scenario keys", source=source)
    data = {"name": Path(path).stem if path is not None else "search", **raw}
    if overrides:
        data["name"] = f"{data['name']}-{overrides_hash(overrides)}"
    for key, value in overrides.items():
        if key == "parallelism":
            data["parallelism"] = {**(data.get("parallelism") or {}), **value}
        else:
            data[key] = value
    _refuse_unused(data, source)
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    try:
        space = Scenario.model_validate(data, context={"base_dir": str(base)})
    except ValidationError as error:
        raise error_from_validation(error, data, source) from None
    space._source, space._raw = source, data
    if space.workload != JOB:
        raise ScenarioError("a search space is a whole job's: expected the global batch "
                            f"({param('global_batch')})", source=source, key="parallelism.global_batch")  # fmt: skip
    return space


def overrides_hash(overrides: Mapping[str, Any]) -> str:
    """The first 8 hex digits of the SHA-256 of *overrides* (a search's options) as sorted
    JSON: what names a search made or changed by options (:func:`search_space`)."""
    text = json.dumps(overrides, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


#: The scenario keys a search does not use, and why: a space that sets one is refused, naming
#: it (top level, or in a case; ``parallelism``'s keys by their dotted name).
UNUSED_KEYS = {
    "reference": "a search writes results.csv and search.yaml, no report: run the best layouts "
                 "as a scenario to report or check them",
    "report": "a search writes results.csv and search.yaml, no report: run the best layouts "
              "as a scenario to report or check them",
    "mode": "a search simulates every layout (des) and takes no mode",
    "parallelism.perturb": "a search ranks layouts on the machine as built: run the best layouts "
                           "as a scenario to perturb them",
    "parallelism.neighbour": "a search ranks layouts alone on the machine: run the best layouts "
                             "as a scenario to place a neighbour job beside them",
}  # fmt: skip


def _refuse_unused(data: Mapping[str, Any], source: str) -> None:
    """A ScenarioError naming the first key of *data* (or of one of its cases) that a search
    does not use (:data:`UNUSED_KEYS`), rather than a search that silently drops it."""
    parts = [((), data)] + [(("cases", i), case) for i, case in enumerate(data.get("cases") or ())
                            if isinstance(case, Mapping)]  # fmt: skip
    for prefix, part in parts:
        for name, why in UNUSED_KEYS.items():
            head, _, rest = name.partition(".")
            value = part.get(head)
            if rest and isinstance(value, Mapping) and rest in value or not rest and head in part:
                raise ScenarioError(why, source=source, key=".".join(map(str, (*prefix, name))))


def search_points(space: Scenario, max_tp: int = DEFAULT_MAX_TP) -> LazyPoints:
    """The layouts of *space* to simulate, made lazily; ``len()`` makes them all once, checks
    the topologies and counts the candidates pruned, by reason, in ``pruned``."""
    return LazyPoints(lambda: _candidates(space, max_tp))


def _candidates(space: Scenario, max_tp: int) -> Iterator[JobPoint | str]:
    """Each candidate of *space*: a JobPoint, or the reason it is pruned."""
    for part, entry, sized, hardware in _machines(space):
        profile = hardware_profile(hardware)
        for model_entry, (_, devices, _) in _models_by_size(part, sized):
            fields = _point_fields(part, entry, hardware, model_entry, devices)
            configs = _configs(part, fields["model"], devices, max_tp, fields["vocab"])
            for config in candidates(configs, profile.memory_capacity_bytes, profile):
                for network in part.parallelism.network:
                    yield config if isinstance(config, str) else \
                        JobPoint.from_config(config, **fields, network=network)


def _machines(space: Scenario) -> Iterator[tuple[Scenario, TopologyEntry, list[Any], str]]:
    """Each machine of *space*: its part (case), topology entry, the topology at each GPU
    count (:func:`~atpsim.scenario.sweep.sized_topologies`) and the hardware profile (the
    listed ones, else the topology's)."""
    for part in space.parts():
        for index, entry in enumerate(part.topologies):
            sized = sized_topologies(part, index)
            default = topology_hardware(sized[0][2])
            for hardware in part.hardware or (default,):
                yield part, entry, sized, hardware


def _models_by_size(part: Scenario, sized: list[Any]) -> Iterator[tuple[ModelEntry, Any]]:
    for model_entry in part.models:
        for size in sized:
            yield model_entry, size


def _point_fields(part: Scenario, entry: TopologyEntry, hardware: str, model_entry: ModelEntry,
                  devices: int) -> dict[str, Any]:  # fmt: skip
    vocab = part.parallelism.vocab
    return {"scenario": part.name, "topology": entry.spec_mapping(), "topology_label": entry.label(),
            "n_devices": devices, "hardware": hardware, "model": model_entry.config(),
            "vocab": model_vocab(model_entry.config(), model_entry.preset) if vocab is None else vocab}  # fmt: skip


def _configs(part: Scenario, model: ModelConfig, devices: int, max_tp: int, vocab: int
             ) -> Iterator[JobConfig]:  # fmt: skip
    """The layouts of *model* on *devices* GPUs that the space's axes make (module docstring)."""
    par = part.parallelism
    meshes, depths, micro_batches, axes = _axes(part, model, devices, max_tp, vocab)
    _check_context(part, model)
    yield from job_layouts(model, devices, meshes, depths, micro_batches, par.global_batch, axes,
                           dps=par.dp, cps=par.cp)


def _check_context(part: Scenario, model: ModelConfig) -> None:
    """The space's ``parallelism.cp`` against *model*: each value's ``2·cp`` chunks split the
    sequence (a ScenarioError at ``parallelism.cp[k]``)."""
    for k, cp in enumerate(part.parallelism.cp):
        try:
            check_context(model.seq, cp)
        except SimulationError as error:
            raise scenario_error(part, f"{error.message} (model {model.name!r})", "parallelism", "cp", k) from None


def _axes(part: Scenario, model: ModelConfig, devices: int, max_tp: int, vocab: int
          ) -> tuple[list[DeviceMesh], Sequence[int], Sequence[int], dict[str, Sequence[Any]]]:  # fmt: skip
    """The TP meshes, pipeline depths, micro-batches and other JobConfig axes of *part*."""
    par, given = part.parallelism, part.parallelism.model_fields_set
    depths = par.pp if "pp" in given else sorted({p for split in par.partition for p in layer_divisors(model, split)})
    micro_batches = par.micro_batch if "micro_batch" in given else DEFAULT_MICRO_BATCHES
    axes: dict[str, Sequence[Any]] = {
        "ep": _expert_parallel(part, model),
        "schedule": par.schedule, "virtual_stages": par.virtual_stages,
        "sequence_parallel": par.sequence_parallel, "recompute": par.recompute,
        "zero": par.zero, "chunks": part.chunks, "algorithm": part.algorithm,
        "vocab": (vocab,), "order": (par.order,), "partition": par.partition,
        "offload_activations": par.offload_activations}  # fmt: skip
    return _meshes(part, devices, max_tp), depths, micro_batches, axes


def _expert_parallel(part: Scenario, model: ModelConfig) -> tuple[int, ...]:
    """The space's ``parallelism.ep`` for *model* (checked: a dense model takes none above 1,
    each divides the experts; a ScenarioError at ``parallelism.ep``), else every divisor of a
    mixture of experts' experts (:func:`~atpsim.training.layouts.expert_parallel_degrees`)."""
    given = part.parallelism.ep if "ep" in part.parallelism.model_fields_set else None
    try:
        return expert_parallel_degrees(model, given)
    except SimulationError as error:
        raise scenario_error(part, error.message, "parallelism", "ep") from None


#: Candidate layouts pruning checks a second: 3,500 for gpt3-1.3b on 512 GPUs (search_points
#: on one core of the development machine, 10,240 candidates in 2.9 s); fewer where a
#: pipeline has many micro-batches (its memory estimate walks the schedule).
PRUNED_PER_S = 3500
#: The most candidate layouts a search looks at unless its caller's ``max_layouts`` says
#: otherwise: a million take some 5 minutes to prune before anything is simulated.
DEFAULT_MAX_LAYOUTS = 1_000_000


def space_size(space: Scenario, max_tp: int = DEFAULT_MAX_TP) -> int:
    """How many candidate layouts *space* makes before pruning (an upper bound: each TP mesh
    times each depth times every other axis), counted without making them."""
    total = 0
    for part in space.parts():
        for index in range(len(part.topologies)):
            sized = sized_topologies(part, index)
            for _hardware, model_entry, (_, devices, _) in product(
                    part.hardware or (None,), part.models, sized):  # fmt: skip
                meshes, depths, mbs, axes = _axes(part, model_entry.config(), devices, max_tp, 0)
                total += len(meshes) * len(depths) * len(mbs) * len(part.parallelism.global_batch) \
                    * len(part.parallelism.cp) \
                    * math.prod(len(values) for values in axes.values()) * len(part.parallelism.network)
    return total


def check_space_size(space: Scenario, max_tp: int = DEFAULT_MAX_TP, *,
                     max_layouts: int | None = None) -> int:  # fmt: skip
    """*space*'s :func:`space_size`; a SizeLimitError past *max_layouts* candidates (None:
    :data:`DEFAULT_MAX_LAYOUTS`) naming the size and how to narrow or raise it."""
    size = space_size(space, max_tp)
    limit = DEFAULT_MAX_LAYOUTS if max_layouts is None else max_layouts
    if size > limit:
        raise SizeLimitError(
            f"the space makes {size:,} candidate layouts (TP meshes x pipeline depths x "
            f"micro-batches x global batches x the other lists), more than the {limit:,} a "
            f"search looks at (pruning alone checks about {PRUNED_PER_S:,} a second): give fewer values "
            f"({param('pp')}, {param('micro_batch')}, {param('max_tp')}, ...) or set {param('max_layouts', size)}",
            source=getattr(space, "_source", None), key="parallelism")  # fmt: skip
    return size


def _meshes(part: Scenario, devices: int, max_tp: int) -> list[DeviceMesh]:
    """The TP meshes of the space on *devices* GPUs (:func:`~atpsim.training.layouts.tp_meshes`),
    each at every placement: the listed ones and, for ``all`` / ``atp-opt``, every
    factorization of each ``tp.size`` dividing the devices; without ``tp``, every mesh of 1 to
    *max_tp* GPUs dividing them. Those that split the hidden size unevenly stay, to be pruned
    and counted (a job scenario leaves them out)."""
    par = part.parallelism
    if "tp" not in par.model_fields_set:
        return tp_meshes(devices, max_tp, placements=par.placement)
    listed = [DeviceMesh(c.d1, c.d2) for c in par.tp.meshes if c.kind == "size"]
    sizes = par.tp.size if any(c.kind in ("all", "opt") for c in par.tp.meshes) else ()
    return tp_meshes(devices, sizes=sizes, listed=listed, placements=par.placement)


def machine_lines(space: Scenario) -> list[str]:
    """``# machine: ...`` for each machine of *space* (topology with hardware,
    :func:`~atpsim.calibrate.provenance.machine_provenance`): each part with its status; with
    several machines, each line names its topology."""
    machines = {(entry.label(), hardware): machine_provenance(sized[0][2], hardware)
                for _, entry, sized, hardware in _machines(space)}  # fmt: skip
    if len(machines) == 1:
        return [next(iter(machines.values())).line()]
    return list(dict.fromkeys(machine.line(label) for (label, _), machine in machines.items()))


def run_search(
    space: Scenario,
    out_dir: Path | str | None = None,
    *,
    max_tp: int = DEFAULT_MAX_TP,
    max_layouts: int | None = None,
    top: int = 10,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    fresh: bool = False,
    progress: bool = True,
    console: Console | None = None,
    simulate: Simulate | None = None,
    announce: Callable[[str], None] = log.info,
    uncertainty: int | None = None,
    seed: int | None = None,
) -> SearchResult:
    """Search *space* (:func:`search_space`) into *out_dir* (default ``reports/<name>/``):
    prune, simulate the rest on *jobs* processes or the Dask *scheduler* (as
    :func:`atpsim.run_scenario` does, resumable), and return the *top* rows with the most model
    FLOP/s per GPU (for one model, batch and GPU count: the shortest iterations). A space of
    more than *max_layouts* candidates (None: :data:`DEFAULT_MAX_LAYOUTS`) is refused before
    it is pruned (:func:`check_space_size`). Once pruned, it *announce*s each machine with how
    its parts came to be (``# machine: ...``, :func:`machine_lines`), the settings the
    space leaves to their defaults (``# defaults: ...``, :func:`defaulted_settings`), then
    what it will simulate (:func:`describe_search`). Raises
    SimulationError when every candidate is pruned, SweepInterrupted on Ctrl-C.

    *uncertainty* = N (and *seed*; else the space's ``uncertainty`` key) simulates every
    layout under the same N draws of the fitted parameters (:mod:`atpsim.api.uncertainty`):
    its row adds the p10/p50/p90 of the iteration time and TFLOP/s per GPU
    (:data:`~atpsim.results.schema.JOB_UNCERTAINTY_SCHEMA`). A machine of the space with no
    fitted parameter is refused before anything is simulated."""
    check_jobs(jobs, scheduler)
    draws = scenario_draws(space, uncertainty, seed)
    if draws is not None:
        _require_draw_sources(space)
    out = Path(out_dir) if out_dir is not None else Path("reports") / space.name
    check_owner(out, "search", space.name, fresh)
    points = _pruned_points(space, max_tp, max_layouts, announce)
    warning = long_sweep_warning(points, jobs, "search", copies=1 + (draws.n if draws else 0))
    if warning:
        log.warning(warning)
    simulated: Collection[Any] = points if draws is None else DrawnPoints(points, draws)
    default = simulate_job_point if draws is None else simulate_with_draws
    with folder_lock(out):
        table = stream_sweep(simulated, out, jobs=jobs, scheduler=scheduler, resume=resume,
                             fresh=fresh, simulate=simulate or default,
                             progress=progress, console=console,
                             parquet="parquet" in space.output.formats)  # fmt: skip
        copy = _write_space(out, space, max_tp)
    schema = JOB_SCHEMA if draws is None else JOB_UNCERTAINTY_SCHEMA
    best = summarize(table.path, top, extra=schema.names).top
    best = pd.DataFrame() if best is None else best.head(top)
    return SearchResult(out, table, dict(points.pruned), best, [*table.files, copy])


def _pruned_points(space: Scenario, max_tp: int, max_layouts: int | None,
                   announce: Callable[[str], None]) -> LazyPoints:
    """The layouts of *space* to simulate, pruned, after refusing a space past *max_layouts*
    and announcing a long pruning, the machines, the defaulted settings and what will run; a
    SimulationError when every candidate is pruned."""
    size = check_space_size(space, max_tp, max_layouts=max_layouts)
    if size > 100_000:
        announce(f"search {space.name}: pruning {size:,} candidate layouts (about "
                 f"{format_duration(size / PRUNED_PER_S)}) before anything is simulated")  # fmt: skip
    points = search_points(space, max_tp)
    description = describe_search(space, points, max_tp)  # prunes: a layout that cannot be made fails here
    for line in machine_lines(space):
        announce(line)
    announce(f"# defaults: {'; '.join(defaulted_settings(space)) or 'none (the space sets every one)'}")
    announce(description)
    if not len(points):
        pruned = ", ".join(f"{n:,} by {why}" for why, n in sorted(points.pruned.items()))
        why = f"pruned {pruned}" if pruned else "no TP mesh x depth listed divides the devices"
        raise SimulationError(f"no layout of the space divides the model and fits in memory ({why})",
                              source=getattr(space, "_source", None), key="parallelism")  # fmt: skip
    return points


def _require_draw_sources(space: Scenario) -> None:
    """The refusal of draws for a machine of *space* (topology at a GPU count, hardware
    profile) none of whose parameters has a recorded uncertainty, checked per machine rather
    than per layout (a space may have 100,000 layouts and a handful of machines)."""
    for _, entry, sized, hardware in _machines(space):
        for _, devices, _ in sized:
            require_sources(machine_sources(entry.spec_mapping(), devices, hardware),
                            f"{entry.label()} with {hardware}", key="uncertainty")  # fmt: skip


class DrawnPoints(Collection[Any]):
    """*points* (a search's :class:`~atpsim.scenario.lazy.LazyPoints`) each with *draws*
    (:class:`~atpsim.api.uncertainty.DrawnJobPoint`), wrapped as they are iterated: the
    layouts stay lazy (a list of 100,000 drawn points is never held)."""

    def __init__(self, points: Collection[JobPoint], draws: Draws):
        self._points, self._draws = points, draws

    def __len__(self) -> int:
        return len(self._points)

    def __iter__(self) -> Iterator[DrawnJobPoint]:
        return (DrawnJobPoint(point, self._draws) for point in self._points)

    def __contains__(self, item: object) -> bool:
        return any(point == item for point in self)


def _write_space(out: Path, space: Scenario, max_tp: int) -> Path:
    """``search.yaml``: the space as searched (file and options merged)."""
    header = f"# atpsim search --max-tp {max_tp}: the design space as searched\n"
    text = yaml.safe_dump(_plain(space._raw), sort_keys=False)
    (out / SPACE_COPY).write_text(header + text, encoding="utf-8")
    return out / SPACE_COPY


def _plain(value: Any) -> Any:
    """*value* with tuples as lists (what yaml.safe_dump writes)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
