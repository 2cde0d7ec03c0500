"""Turn a topology spec into a :class:`Topology`: a preset name, a builder spec string, a custom
YAML file, or a mapping. Built topologies are memoized by canonical spec, because a sweep asks
for the same 4096-GPU fabric many times.

Spec strings: ``BUILDER:SIZE[,key=value...]`` — ``torus:32x32``, ``torus:16x16x16``,
``nvswitch:8``, ``ib-cluster:4x8`` (4 nodes x 8 GPUs), ``pcie-tree:8``,
``nvlink-network-switch:4096``, ``nvlink-pairs:8``, ``nvl72:2`` (2 racks of 72 GPUs); other
parameters take their documented defaults unless given after a comma
(``torus:4x4,link_bandwidth_Bps=50 GB/s``), or alone where the size is left to its default
(``nvl72:domains=2``: a first part with ``=`` is a parameter, not a size).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from atpsim.errors import (
    AtpsimError,
    SizeLimitError,
    TopologyError,
    check_number,
    did_you_mean,
    limit_from_env,
)
from atpsim.topology.custom import load_custom
from atpsim.topology.graph import Topology
from atpsim.topology.presets import build_preset, preset_info, preset_names
from atpsim.topology.registry import builder_names
from atpsim.topology.sizing import SIZE_PARSERS, build_from_builder
from atpsim.units import parse_bandwidth_text, parse_time_text
from atpsim.yamlfile import file_digest

#: What names a topology: a preset, builder spec or YAML path, or a mapping (see load_topology).
TopologySpec = str | Mapping[str, Any]

_CACHE: dict[str, Topology] = {}


def load_topology(
    spec: TopologySpec, *, n_gpus: int | None = None, source: str | None = None
) -> Topology:
    """The topology *spec* names: a preset ('ic1', 'dgx-a100'), a builder spec string
    ('torus:32x32'), a custom YAML path, or a mapping ``{"preset": name, **overrides}`` |
    ``{"builder": name, **params}`` | ``{"file": path}``. *n_gpus* sizes a scalable preset or
    builder whose size the spec leaves open. Errors are :class:`TopologyError` naming *source*."""
    try:
        check_size(spec, n_gpus)
        return _load(spec, n_gpus)
    except AtpsimError as error:
        if isinstance(error, TopologyError):
            raise (error.with_source(source) if source else error) from None
        raise TopologyError(error.message, source=error.source or source, key=error.key) from None


#: The most GPUs a topology may have unless ATPSIM_MAX_GPUS says otherwise: a graph of this
#: size builds in seconds and well under 1 GB (about 5 KB per GPU with its links).
DEFAULT_MAX_GPUS = 65536
MAX_GPUS_ENV = "ATPSIM_MAX_GPUS"
_BYTES_PER_GPU = 5_000


def max_gpus() -> int:
    """The GPU limit: ``ATPSIM_MAX_GPUS`` if set (an integer >= 1), else DEFAULT_MAX_GPUS."""
    return limit_from_env(MAX_GPUS_ENV, DEFAULT_MAX_GPUS, TopologyError)


def requested_gpus(spec: TopologySpec, n_gpus: int | None = None) -> int | None:
    """The GPUs *spec* (sized to *n_gpus*) will have, from its parameters alone, before
    anything is built; None for a fixed-size preset or a file (whose size is what it is)."""
    kind, name, params = _normalize(spec)
    if kind == "builder":
        if "dims" in params and isinstance(params["dims"], (list, tuple)):
            return _product(params["dims"])
        if "gpus" in params:
            return _int_or_none(params["gpus"])
        if "nodes" in params:
            nodes, per_node = _int_or_none(params["nodes"]), _int_or_none(params.get("gpus_per_node", 8))
            return None if nodes is None or per_node is None else nodes * per_node
        if "domains" in params:
            return _product([params["domains"], params.get("gpus_per_domain", 72)])
        return n_gpus
    if kind == "preset":
        if preset_info(name).get("scalable"):
            return _int_or_none(params.get("gpus", n_gpus))
    return None


def check_size(spec: TopologySpec, n_gpus: int | None = None) -> None:
    """Refuse, before building it, a topology of more GPUs than :func:`max_gpus`."""
    n = requested_gpus(spec, n_gpus)
    limit = max_gpus()
    if n is not None and n > limit:
        raise SizeLimitError(
            f"asks for {n:,} GPUs (about {n * _BYTES_PER_GPU / 1e9:,.1f} GB to build its graph); "
            f"the limit is {limit:,} GPUs: set {MAX_GPUS_ENV}={n} to build it anyway"
        )


def _product(values: Any) -> int | None:
    total = 1
    for value in values:
        number = _int_or_none(value)
        if number is None:
            return None
        total *= number
    return total


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _load(spec: TopologySpec, n_gpus: int | None) -> Topology:
    kind, name, params = _normalize(spec)
    path = _file_of(kind, name, params)
    contents = [file_digest(path)] if path else []  # a file is built again once it changes
    key = json.dumps([kind, name, params, n_gpus, *contents], sort_keys=True, default=str)
    topology = _CACHE.get(key)
    if topology is None:
        topology = _build(kind, name, params, n_gpus)
        _CACHE[key] = topology
    return topology


def _normalize(spec: TopologySpec) -> tuple[str, str, dict[str, Any]]:
    """('preset'|'builder'|'file', name, parameters) for any accepted form of *spec*."""
    if isinstance(spec, Topology):
        raise TopologyError("a Topology object is not a spec; use it directly")
    if isinstance(spec, Mapping):
        return _normalize_mapping(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise TopologyError(f"expected a preset name, builder spec or YAML file, got {spec!r}")
    text = spec.strip()
    head, _, rest = text.partition(":")
    if head in builder_names():
        return "builder", head, _parse_spec_rest(head, rest)
    if text.endswith((".yaml", ".yml")) or os.sep in text or os.path.exists(text):
        return "file", text, {}
    if not rest and text in preset_names():
        return "preset", text, {}
    names = [*preset_names(), *builder_names()]
    raise TopologyError(f"unknown topology {text!r}{did_you_mean(head, names)}")


def _normalize_mapping(spec: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    forms = [k for k in ("preset", "builder", "file") if k in spec]
    if len(forms) != 1:
        raise TopologyError(
            f"expected exactly one of 'preset', 'builder' or 'file' in a topology mapping, got keys {sorted(spec)}"
        )
    form = forms[0]
    params = {str(k): v for k, v in spec.items() if k != form}
    name = spec[form]
    if not isinstance(name, str):
        raise TopologyError(f"expected a name, got {name!r}", key=form)
    if form == "file" and params:
        raise TopologyError(
            f"a custom topology file takes no parameters, got {sorted(params)}", key="file"
        )
    if form == "builder" and ":" in name:
        head, _, rest = name.partition(":")
        from_spec = _parse_spec_rest(head, rest)
        twice = sorted(set(from_spec) & set(params))
        if twice:
            raise TopologyError(f"given twice: in the spec string {name!r} and as a key of the "
                                "mapping; expected it once", key=twice[0])  # fmt: skip
        return "builder", head, {**from_spec, **params}
    return form, name, params


def topology_file(spec: TopologySpec) -> str | None:
    """The custom topology file *spec* reads (``{"file": path}``, a YAML path, or the
    ``custom`` builder's ``file``), None where it reads none or is not a valid spec."""
    try:
        return _file_of(*_normalize(spec))
    except AtpsimError:
        return None


def _file_of(kind: str, name: str, params: Mapping[str, Any]) -> str | None:
    if kind == "file":
        return name
    file = params.get("file") if kind == "builder" and name == "custom" else None
    return file if isinstance(file, str) else None


def _parse_spec_rest(builder: str, rest: str) -> dict[str, Any]:
    """Parameters from the part after ``BUILDER:`` — a size, then optional ``key=value`` pairs.
    A value named twice (a key repeated, or a key the size already sets: ``ib-cluster:2x4,
    nodes=3``) is refused rather than the last one winning; so is a number that is not
    finite (``oversubscription=nan``)."""
    if not rest:
        return {}
    size, *pairs = [p.strip() for p in rest.split(",")]
    if "=" in size:
        size, pairs = "", [size, *pairs]
    params: dict[str, Any] = {}
    if size:
        if builder not in SIZE_PARSERS:
            raise TopologyError(f"builder {builder!r} takes no size in a spec string, got {size!r}")
        params.update(SIZE_PARSERS[builder](size))
    written = {key: f"the size {size!r}" for key in params}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise TopologyError(f"expected key=value after the size, got {pair!r}", key=builder)
        key = key.strip()
        if key in written:
            raise TopologyError(f"given twice, by {written[key]} and by {pair!r}; expected it once",
                                key=key)  # fmt: skip
        params[key], written[key] = _scalar(value.strip(), key), repr(pair)
    _check_quantities(params, builder)
    return params


def _check_quantities(params: dict[str, Any], builder: str) -> None:
    """A spec string's bandwidths and latencies carry their unit and lie in their physical
    range unless the spec says ``force=true`` (which is taken out of *params*)."""
    force = params.pop("force", False)
    if not isinstance(force, bool):
        raise TopologyError(f"expected true or false, got {force!r}", key="force")
    for key, value in params.items():
        parse = _QUANTITY_PARSERS.get(key.rsplit("_", 1)[-1])
        if parse is None:
            continue
        try:
            parse(value, force=force)
        except AtpsimError as error:
            raise TopologyError(error.message, key=key) from None


_QUANTITY_PARSERS = {"Bps": parse_bandwidth_text, "s": parse_time_text}


def _scalar(text: str, key: str) -> Any:
    """The value of ``key=text`` in a spec string: an int, a finite float (``nan``, ``inf``
    and ``1e400`` are refused naming *key*), true/false, or the text itself."""
    for cast in (int, float):
        try:
            value = cast(text)
        except ValueError:
            continue
        return check_number(value, key, shown=text, error_type=TopologyError) if cast is float else value
    return {"true": True, "false": False}.get(text.lower(), text)


def _build(kind: str, name: str, params: dict[str, Any], n_gpus: int | None) -> Topology:
    if kind == "file":
        return load_custom(name)
    if kind == "preset":
        return build_preset(name, params, n_gpus=n_gpus)
    return build_from_builder(name, params, n_gpus=n_gpus)


def topology_label(spec: TopologySpec) -> str:
    """A short label for tables: the preset name, the builder spec string, or the file stem."""
    kind, name, params = _normalize(spec)
    if kind == "file":
        return os.path.splitext(os.path.basename(name))[0]
    if not params:
        return name
    size = _size_text(name, params)
    rest = {k: v for k, v in params.items() if k not in ("dims", "gpus", "nodes", "gpus_per_node")}
    extra = ",".join(f"{k}={v}" for k, v in sorted(rest.items()))
    return ":".join(p for p in (name, ",".join(p for p in (size, extra) if p)) if p)


def _size_text(name: str, params: dict[str, Any]) -> str:
    if "dims" in params:
        dims = params["dims"]
        return "x".join(map(str, dims if isinstance(dims, (list, tuple)) else [dims]))
    if "nodes" in params:
        return f"{params['nodes']}x{params.get('gpus_per_node', 8)}"
    return str(params.get("gpus", ""))


def clear_cache() -> None:
    """Forget memoized topologies (tests use this)."""
    _CACHE.clear()
