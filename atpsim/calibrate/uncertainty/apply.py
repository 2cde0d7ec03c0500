"""A parameter draw applied as the simulator's own inputs: a preset built with drawn link
rates, a hardware profile with drawn fields, a topology running a drawn NCCL profile.

Nothing here simulates: the drawn inputs go through the same functions as the fitted ones
(:func:`atpsim.topology.spec.load_topology`, the step and collective engines), so a draw can
only differ from the point estimate by its parameter values. Memoization stays sound: a
drawn preset is a different spec (its cache key holds the drawn values); a drawn hardware
profile is a different frozen value (the GEMM caches key on the whole profile); a drawn NCCL
profile gets a name made of its values (the protocol caches key on that name) on its own copy
of the topology (the engine's memo is per topology object). Equal draws share their caches,
which is what makes common random numbers cheap across the points of a sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from atpsim.calibrate.uncertainty import sources
from atpsim.calibrate.uncertainty.draws import Draws
from atpsim.calibrate.uncertainty.record import FitUncertainty, ParameterSigma
from atpsim.collectives.protocols import Profile, profile_from_dict, topology_profile, with_profile
from atpsim.compute.hardware import HardwareProfile
from atpsim.topology.graph import Topology
from atpsim.topology.presets import preset_info, preset_names
from atpsim.topology.spec import load_topology
from atpsim.units import parse_bandwidth_text, parse_time_text


@dataclass(frozen=True)
class ParameterDraw:
    """Draw *index* (1..n) of *draws*."""

    draws: Draws
    index: int

    def deltas(self, record: FitUncertainty) -> dict[str, float]:
        """Each of *record*'s parameters' perturbation in this draw."""
        return _deltas(record, self.draws.seed, self.draws.n, self.index)


@lru_cache(maxsize=4096)
def _deltas(record: FitUncertainty, seed: int, n: int, index: int) -> dict[str, float]:
    z = Draws(n, seed).normals(record.source, len(record.parameters), index)
    return record.deltas(z)


def _drawn(record: FitUncertainty, draw: ParameterDraw, values: Mapping[str, float],
           wanted: Iterable[ParameterSigma]) -> dict[str, float]:
    """The drawn value of each parameter in *wanted* (keyed by its target), around *values*
    (target -> the value in use)."""
    deltas = draw.deltas(record)
    return {p.target: p.perturb(values[p.target], deltas[p.name]) for p in wanted}


# ---------------------------------------------------------------- topologies


def spec_kind(spec: str | Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """('preset' | 'file' | 'other', name or path, the spec's own parameters)."""
    if isinstance(spec, Mapping):
        params = {str(k): v for k, v in spec.items() if k not in ("preset", "file", "label")}
        if "preset" in spec:
            return "preset", str(spec["preset"]), params
        if "file" in spec:
            return "file", str(spec["file"]), {}
        return "other", "", params
    text = spec.strip()
    if text in preset_names():
        return "preset", text, {}
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return "file", text, {}
    return "other", text, {}


def preset_targets(name: str, given: Iterable[str]) -> list[tuple[FitUncertainty, ParameterSigma]]:
    """The fitted parameters of preset *name* that its spec did not set itself (*given*)."""
    prefix = f"preset:{name}:"
    record = sources.paper_fit_record()
    if record is None:
        return []
    return [(record, p) for p in record.parameters
            if p.target.startswith(prefix) and p.target.removeprefix(prefix) not in given]  # fmt: skip


def drawn_topology(spec: str | Mapping[str, Any], n_gpus: int | None,
                   draw: ParameterDraw, source: str | None = None) -> Topology:
    """The topology *spec* names (sized to *n_gpus*) with draw *draw* of every fitted
    parameter it has: a preset's fitted link rates, a fitted star's link, its NCCL profile."""
    kind, name, params = spec_kind(spec)
    if kind == "preset" and (fitted := preset_targets(name, params)):
        record = fitted[0][0]
        in_use = preset_info(name).get("params") or {}
        values = {p.target: _preset_value(in_use, p.target.rsplit(":", 1)[1]) for _, p in fitted}
        drawn = _drawn(record, draw, values, [p for _, p in fitted])
        overrides = {target.rsplit(":", 1)[1]: value for target, value in drawn.items()}
        topology = load_topology({**_as_mapping(spec), **overrides}, n_gpus=n_gpus, source=source)
    else:
        topology = load_topology(spec, n_gpus=n_gpus, source=source)
        star = sources.fitted_record(name, "link") if kind == "file" else None
        if star is not None:
            topology = _drawn_star(topology, star, draw)
    return drawn_nccl(topology, draw)


def _preset_value(params: Mapping[str, Any], key: str) -> float:
    value = params[key]
    return parse_time_text(value) if key.endswith("_s") else parse_bandwidth_text(value)


def _as_mapping(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    return {"preset": spec} if isinstance(spec, str) else dict(spec)


_STARS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _drawn_star(topology: Topology, record: FitUncertainty, draw: ParameterDraw) -> Topology:
    """A fitted star (:mod:`atpsim.calibrate.fit.star`: every link the fitted bandwidth and
    half the fitted rank-to-rank latency) with every link at the drawn bandwidth and half the
    drawn latency."""
    links = list(topology.graph.edges(data=True))
    values = {"link:bandwidth_Bps": float(links[0][2]["bandwidth_Bps"]),
              "link:latency_s": 2.0 * float(links[0][2]["latency_s"])}  # fmt: skip
    drawn = _drawn(record, draw, values, [p for p in record.parameters if p.target in values])
    drawn = {**values, **drawn}
    key = (drawn["link:bandwidth_Bps"], drawn["link:latency_s"])
    per_base = _STARS.setdefault(topology, {})
    if key not in per_base:
        graph = topology.graph.copy()
        for _, _, data in graph.edges(data=True):
            data["bandwidth_Bps"], data["latency_s"] = key[0], key[1] / 2.0
        per_base[key] = Topology(topology.name, graph, topology.router, topology.description,
                                 dict(topology.meta))  # fmt: skip
    return per_base[key]


# ---------------------------------------------------------------- NCCL profiles

_WITH_PROFILE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def nccl_source(topology: Topology) -> FitUncertainty | None:
    """The record of *topology*'s NCCL profile's fit (its own, or the one it derives from)."""
    name = topology_profile(topology).name
    return sources.nccl_record(sources.nccl_derived_from(name) or name)


def drawn_nccl(topology: Topology, draw: ParameterDraw) -> Topology:
    """*topology* running the draw of its NCCL profile (itself where the profile has no
    recorded fit)."""
    profile = topology_profile(topology)
    record = nccl_source(topology)
    if record is None:
        return topology
    drawn = drawn_nccl_profile(profile.name, record, draw)
    per_base = _WITH_PROFILE.setdefault(topology, {})
    if drawn.name not in per_base:
        per_base[drawn.name] = with_profile(topology, drawn)
    return per_base[drawn.name]


def drawn_nccl_profile(name: str, record: FitUncertainty, draw: ParameterDraw) -> Profile:
    """NCCL profile *name* with *record*'s parameters drawn (a derived profile: the draw of
    the profile it derives from, derived again), named after its values."""
    from atpsim.calibrate.fit.nccl_curve import derive  # lazy: it imports scipy.optimize

    origin = sources.nccl_derived_from(name) or name
    entry = dict(sources.nccl_entries()[origin])
    prefix = f"nccl:{origin}:"
    values = {f"{prefix}{p.name}": float(entry[p.name]) for p in record.parameters}
    drawn = _drawn(record, draw, values, record.parameters)
    entry.update({target.removeprefix(prefix): v for target, v in drawn.items()})
    if origin != name:
        entry = {**sources.nccl_entries()[name], **derive(name, entry)}
    digest = hashlib.sha1(repr(sorted((k, v) for k, v in entry.items()
                                      if isinstance(v, float))).encode()).hexdigest()[:10]  # fmt: skip
    return profile_from_dict(f"{name}~{digest}", entry)


# ---------------------------------------------------------------- hardware profiles


def profile_records(name: str) -> list[FitUncertainty]:
    """The records whose parameters set hardware profile *name* (a packaged name or a fitted
    profile file)."""
    found = [sources.paper_fit_record(), sources.gemm_record(name)]
    if name.endswith((".yaml", ".yml")):
        found.append(sources.fitted_record(name, "profile"))
    prefixes = (f"profile:{name}:", "profile:*:")
    return [r for r in found if r is not None and any(
        p.target.startswith(prefixes) for p in r.parameters)]  # fmt: skip


def drawn_profile(profile: HardwareProfile, name: str, draw: ParameterDraw) -> HardwareProfile:
    """*profile* (loaded as *name*) with every recorded fitted field drawn."""
    prefixes = (f"profile:{name}:", "profile:*:")
    for record in profile_records(name):
        wanted = [p for p in record.parameters if p.target.startswith(prefixes)]
        values = {p.target: profile_field(profile, _field(p.target)) for p in wanted}
        for target, value in _drawn(record, draw, values, wanted).items():
            profile = with_field(profile, _field(target), value)
    return profile


def _field(target: str) -> str:
    return target.split(":", 2)[2]


def profile_field(profile: HardwareProfile, key: str) -> float:
    """A profile's field by *key*: ``gemm.X``, ``memory_efficiency_by_class.CLASS`` or a
    top-level field."""
    head, _, rest = key.partition(".")
    if head == "gemm":
        return float(getattr(profile.gemm, rest))
    if head == "memory_efficiency_by_class":
        return float(dict(profile.memory_efficiency_by_class)[rest])
    return float(getattr(profile, key))


def with_field(profile: HardwareProfile, key: str, value: float) -> HardwareProfile:
    """*profile* with field *key* (as :func:`profile_field` reads it) set to *value*."""
    head, _, rest = key.partition(".")
    changes: dict[str, Any] = {rest if head == "gemm" else key: value}
    if head == "gemm":
        return dataclasses.replace(profile, gemm=dataclasses.replace(profile.gemm, **changes))
    if head == "memory_efficiency_by_class":
        table = tuple((c, value if c == rest else v) for c, v in profile.memory_efficiency_by_class)
        return dataclasses.replace(profile, memory_efficiency_by_class=table)
    return dataclasses.replace(profile, **changes)
