"""A profiler trace as measurements: predict each mapped op and the whole step, and score them.

``compare_trace(trace, layer, fitted=None)`` maps the trace onto the layer's program
(:mod:`atpsim.calibrate.trace.mapping`), then predicts every mapped op with

* **a check** (*fitted* = a measurements folder with ``fitted/``, from ``atpsim validate DIR``):
  its hardware profile (GEMMs and memory-bound ops, :func:`atpsim.compute.timing.compute_time_s`,
  at the share of a core each rank gets, as :mod:`atpsim.calibrate.compare` runs it) and its
  link (collectives by the closed form of a ring on the fitted star); nothing of the trace is
  fitted, so every error is a blind one;
* **a check of a hardware profile** (*profile*: a bundled name such as ``h100-sxm`` or a
  profile file): the profile atpsim would use by default, against a real GPU's kernels; the
  collectives are not predicted (a profile has no link);
* **or a fit to the trace itself** (neither): the mapped GEMMs fit a profile
  (:func:`atpsim.calibrate.fit.profile.fit_profile`), the memory-bound groups of one op class
  fit that class's bandwidth (:mod:`atpsim.calibrate.fit.memory`) and the collectives a link
  (:func:`atpsim.calibrate.fit.link.fit_link`, when they have two sizes or more); the per-op
  errors are then residuals of a fit.

Either way the **whole step** (the median ``ProfilerStep`` duration, never fitted) is
predicted, when a link is known or the layer has one rank, by the *predict* function the caller passes in (the
simulator's, :func:`atpsim.api.calibrate.simulate_layer`, through
:func:`atpsim.calibrate.compare.score_layer`), with the CPU rule of
:mod:`atpsim.calibrate.measurements.description` (no spare core: compute and communication
take turns, :func:`atpsim.calibrate.compare.taking_turns`). An op's error is
``(predicted - measured) / measured`` with *measured* the median over its chunks and steps.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from atpsim.calibrate.compare import (
    LayerPredictor,
    score_layer,
    single_gpu_topology,
    taking_turns,
)
from atpsim.calibrate.fit.link import LinkFit, fit_link, predict_s
from atpsim.calibrate.fit.memory import fit_memory_bandwidth
from atpsim.calibrate.fit.profile import fit_profile
from atpsim.calibrate.fit.star import star_topology
from atpsim.calibrate.machine import FITTED, SUMMARY_FILE, fitted_paths, profile_with_memory_fit
from atpsim.calibrate.measurements.description import (
    base_profile,
    cpu_share,
    slowed,
)
from atpsim.calibrate.measurements.samples import (
    CollectiveSample,
    GemmSample,
    LayerPoint,
    MemoryOpSample,
)
from atpsim.calibrate.trace.layer import TracedLayer
from atpsim.calibrate.trace.mapping import MatchedOp, TraceMapping, layer_program, map_trace
from atpsim.calibrate.trace.reader import KinetoTrace, TraceOp
from atpsim.compute.hardware import HardwareProfile, load_profile
from atpsim.compute.timing import compute_time_s, memory_op_class
from atpsim.errors import AtpsimError, param, read_text
from atpsim.program import CommOp, ComputeOp, Task
from atpsim.topology.custom import build_custom
from atpsim.topology.spec import load_topology


@dataclass(frozen=True)
class OpCheck:
    """One program op (or memory group): measured median (s) over *instances* chunk-steps,
    predicted (s; None when nothing predicts it), the trace's event names."""

    key: str
    kind: str
    instances: int
    measured_s: float
    predicted_s: float | None
    trace_names: tuple[str, ...]

    @property
    def rel_error(self) -> float | None:
        if self.predicted_s is None:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class TraceComparison:
    """Per-op checks, the whole step's check, where the predictions came from (*source*:
    ``fit`` to the trace or the folder checked against) and what could not be mapped."""

    path: Path
    layer: TracedLayer
    source: str
    ops: tuple[OpCheck, ...]
    mapping: TraceMapping
    step_measured_s: float
    step_predicted_s: float | None

    def median_abs_error(self, kind: str | None = None) -> float | None:
        """Median |error| of the predicted ops (of *kind*; all kinds when None)."""
        errors = [abs(e) for o in self.ops if (kind is None or o.kind == kind)
                  and (e := o.rel_error) is not None]  # fmt: skip
        return statistics.median(errors) if errors else None

    @property
    def step_error(self) -> float | None:
        if self.step_predicted_s is None:
            return None
        return (self.step_predicted_s - self.step_measured_s) / self.step_measured_s


@dataclass(frozen=True)
class _Predictor:
    profile: HardwareProfile
    link: tuple[float, float] | None  # (bandwidth_Bps, latency_s)
    topology: Any  # a Topology, or None without a link
    share: float


def compare_trace(
    trace: KinetoTrace,
    layer: TracedLayer,
    fitted: str | Path | None = None,
    *,
    predict: LayerPredictor,
    profile: str | None = None,
) -> TraceComparison:
    """Map *trace* onto *layer*'s program and predict each op, and the step by *predict*
    (module docstring)."""
    mesh = layer.mesh
    tasks = layer_program(layer.model, mesh, layer.chunks)
    mapping = map_trace(trace, tasks, mesh)
    _refuse_another_layer(trace, mapping, layer, tasks)
    if fitted is not None and profile is not None:
        raise AtpsimError(f"give a measurements folder ({param('fitted')}) or a hardware profile "
                          f"({param('profile')}), not both", param="profile")  # fmt: skip
    if fitted is not None:
        predictor, source = _from_folder(Path(fitted), layer), f"check against {fitted}"
    elif profile is not None:
        predictor, source = _from_profile(profile, layer), f"check against profile {profile}"
    else:
        predictor, source = _fit_trace(mapping, layer, trace.path), "fit to this trace (residuals)"
    ops = tuple(_check(entry, predictor, layer) for entry in mapping.matched)
    measured = statistics.median(trace.step_s)
    return TraceComparison(trace.path, layer, source, ops, mapping, measured,
                           _predict_step(layer, predictor, measured, predict))  # fmt: skip


def _refuse_another_layer(trace: KinetoTrace, mapping: TraceMapping, layer: TracedLayer,
                          tasks: tuple[Task, ...]) -> None:  # fmt: skip
    """Refuse a trace that profiled another layer than *layer* (a wrong ``--layer``, or a
    trace of another mesh or sizes): none of its ops, or none of its GEMMs, matches the
    program; or some of its GEMMs (collectives) match no program GEMM (collective) while the
    program has GEMMs (collectives) the trace never ran, or none at all: the shapes disagree,
    so the ops that do match would be predicted for a layer the trace did not run."""
    traced_gemms = any(op.kind == "gemm" for op in trace.ops)
    if not mapping.matched or (traced_gemms and not any(e.kind == "gemm" for e in mapping.matched)):
        what = "GEMMs" if mapping.matched else "ops"
        raise AtpsimError(f"none of the trace's {what} matches the program of {layer.describe()}: "
                          f"it profiled another layer (wrong {param('layer')}?)", source=str(trace.path))  # fmt: skip
    kinds = {t.op.name: _kind(t.op) for t in tasks}
    for kind, label in (("gemm", "GEMMs"), ("comm", "collectives")):
        left = [op for op in mapping.unpaired if op.kind == kind]
        unseen = [name for name in mapping.missing if kinds.get(name) == kind]
        if not left or not (unseen or kind not in kinds.values()):
            continue
        total = sum(op.kind == kind for op in trace.ops)
        program = f"whose {unseen[0]}{_more(unseen)} never ran in the trace" if unseen \
            else f"which has no {label}"  # fmt: skip
        raise AtpsimError(f"{len(left)} of the trace's {total} {label} (first: {_shown(left[0])}) "
                          f"match none of the program of {layer.describe()}, {program}: it "
                          f"profiled another layer (wrong {param('layer')}?)", source=str(trace.path))  # fmt: skip


def _kind(op: ComputeOp | CommOp) -> str:
    if isinstance(op, CommOp):
        return "comm"
    return "gemm" if op.kind == "gemm" else "memory"


def _shown(op: TraceOp) -> str:
    """A traced GEMM or collective in a few words: its name and shape or payload."""
    if op.gemm is not None:
        batch, m, n, k = op.gemm
        return f"{op.name} {m}x{n}, k {k}" + (f", batch {batch}" if batch > 1 else "")
    return f"{op.name} of {op.nbytes:.0f} B"


def _more(items: list[Any]) -> str:
    return f" and {len(items) - 1} more" if len(items) > 1 else ""


def _check(entry: MatchedOp, predictor: _Predictor, layer: TracedLayer) -> OpCheck:
    return OpCheck(entry.key, entry.kind, len(entry.measured_s), statistics.median(entry.measured_s),
                   _predict_ops(entry.ops, predictor, layer), tuple(sorted(entry.trace_names)))  # fmt: skip


def _predict_ops(ops: tuple[ComputeOp | CommOp, ...], predictor: _Predictor, layer: TracedLayer) -> float | None:
    total = 0.0
    for op in ops:
        if isinstance(op, ComputeOp):
            total += compute_time_s(op, predictor.profile, layer.model.dtype)
        elif predictor.link is None:
            return None
        else:
            group = layer.mesh.d1 if op.dim == 1 else layer.mesh.d2
            sample = CollectiveSample(op.collective, group, layer.mesh.size // group, op.bytes, 0.0)
            total += predict_s(sample, "ring", *predictor.link)
    return total


def _from_profile(name: str, layer: TracedLayer) -> _Predictor:
    """A hardware profile (a bundled name such as ``h100-sxm``, or a YAML file) as the
    predictor: a blind check of what atpsim ships; collectives are not predicted (a profile
    has no link)."""
    share = cpu_share(layer.machine, layer.mesh.size)
    return _Predictor(slowed(load_profile(name), share), None, None, share)


def _from_folder(folder: Path, layer: TracedLayer) -> _Predictor:
    """The profile, link and star of ``folder/fitted/`` (``atpsim validate --fit-only``); a
    folder of one GPU has no link and no star (no collectives measured)."""
    topology_path, profile_path = fitted_paths(folder)
    summary = folder / FITTED / SUMMARY_FILE
    if not (profile_path.is_file() and summary.is_file()):
        raise AtpsimError(f"no fit in {folder / FITTED}/ (fit the measurements in {folder} "
                          "first)", param="fitted")  # fmt: skip
    link = _fitted_link(summary)
    share = cpu_share(layer.machine, layer.mesh.size)
    return _Predictor(
        slowed(load_profile(profile_path), share),
        link,
        load_topology(str(topology_path)) if link else None,
        share,
    )


def _fitted_link(summary: Path) -> tuple[float, float] | None:
    """(bandwidth_Bps, latency_s) of the ``link`` a fit summary records (None without one);
    an AtpsimError naming the file for one that is not YAML or not a physical link."""
    try:
        data = yaml.safe_load(read_text(summary, "the fit summary"))
    except yaml.YAMLError as error:
        raise AtpsimError(f"invalid YAML ({getattr(error, 'problem', error)})", source=str(summary)) from None
    if not isinstance(data, dict):
        raise AtpsimError("expected a mapping (as a fit of the folder writes it)",
                          source=str(summary))  # fmt: skip
    link = data.get("link")
    if link is None:
        return None
    try:
        bandwidth, latency = float(link["bandwidth_Bps"]), float(link["latency_s"])
    except (TypeError, KeyError, ValueError):
        bandwidth = latency = math.nan
    if not (0 < bandwidth < math.inf and 0 <= latency < math.inf):
        raise AtpsimError(f"expected bandwidth_Bps > 0 and latency_s >= 0, got {link!r}",
                          source=str(summary), key="link")  # fmt: skip
    return bandwidth, latency


def _fit_trace(mapping: TraceMapping, layer: TracedLayer, path: Path) -> _Predictor:
    """A profile and link fitted to the trace's own mapped ops."""
    dtype = layer.model.dtype
    gemms = [GemmSample(op.m, op.n, op.k, dtype, statistics.median(e.measured_s), op.batch, e.key)
             for e in mapping.matched if e.kind == "gemm"
             for op in e.ops if isinstance(op, ComputeOp)]  # fmt: skip
    if len(gemms) < 2:
        raise AtpsimError(f"fewer than two of the trace's GEMMs match {layer.describe()}'s: nothing "
                          f"to fit (check {param('layer')}, or give {param('fitted', 'DIR')})", source=str(path))  # fmt: skip
    base = base_profile(f"fitted-{layer.describe()}", layer.machine, layer.mesh.size)
    profile_fit = fit_profile(gemms, base)
    memory = _memory_samples(mapping)
    if memory:
        memory_fit = fit_memory_bandwidth(memory, profile_fit.profile.launch_overhead_s)
        profile_fit = profile_with_memory_fit(profile_fit, memory_fit)
    link = _fit_link(mapping, layer)
    topology = None
    if link is not None:
        topology = build_custom(star_topology(layer.mesh.size, link))
    return _Predictor(profile_fit.profile, (link.bandwidth_Bps, link.latency_s) if link else None,
                      topology, 1.0)  # fmt: skip


def _memory_samples(mapping: TraceMapping) -> list[MemoryOpSample]:
    """A sample per memory group whose ops are all of one class (a class's bandwidth)."""
    samples = []
    for entry in mapping.matched:
        classes = {memory_op_class(op.name) for op in entry.ops}
        if entry.kind == "memory" and len(classes) == 1:
            moved = sum(op.bytes_moved for op in entry.ops if isinstance(op, ComputeOp))
            samples.append(MemoryOpSample(entry.ops[0].name, moved, statistics.median(entry.measured_s),
                                          entry.key))  # fmt: skip
    return samples


def _fit_link(mapping: TraceMapping, layer: TracedLayer) -> LinkFit | None:
    samples = []
    for entry in mapping.matched:
        for op in entry.ops:
            if isinstance(op, CommOp):
                group = layer.mesh.d1 if op.dim == 1 else layer.mesh.d2
                samples.append(CollectiveSample(op.collective, group, layer.mesh.size // group, op.bytes,
                                                statistics.median(entry.measured_s), entry.key))  # fmt: skip
    try:
        return fit_link(samples, "ring") if samples else None
    except AtpsimError:
        return None  # one message size: no bandwidth and latency apart


def _predict_step(
    layer: TracedLayer, predictor: _Predictor, measured_s: float, predict: LayerPredictor
) -> float | None:
    """The layer's step by *predict* on the predictor's fabric (None without a link), or on
    one GPU for a layer of one rank (no communication to predict)."""
    topology = predictor.topology
    if topology is None and layer.mesh.size == 1:
        topology = single_gpu_topology()
    if topology is None:
        return None
    m, mesh = layer.model, layer.mesh
    point = LayerPoint(mesh.d1, mesh.d2, layer.chunks, m.hidden, m.heads, m.batch, m.seq, m.dtype,
                       measured_s, layer.describe(), m.ffn_mult)  # fmt: skip
    result = score_layer(point, topology, predictor.profile, predict, predictor.share)
    return taking_turns(result, layer.machine, mesh.size).predicted_s

