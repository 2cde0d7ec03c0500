"""The scenario file's schema: typed, frozen, unknown keys rejected with the nearest valid one.

A scenario names what to simulate; every list-valued field is a sweep axis (see
:mod:`atpsim.scenario.sweep`). A field that takes "one or a list" accepts a single value as
a list of one. The YAML form::

    name: fig12                  # optional; default: the file's stem
    description: "..."           # optional
    topology: ic5                # preset | builder spec "torus:8x8" | custom file "net.yaml" |
                                 #   {preset: ic5, gpus: 256} | {builder: torus, dims: [4, 4],
                                 #   link_bandwidth: "25 GB/s", link_latency: "1 us"} |
                                 #   {file: net.yaml} | a list of these; a mapping
                                 #   may add `label: name` (its name in tables)
    hardware: a100-sxm4-80gb     # optional (or a list, or a profile file); default: the
                                 #   topology's meta["hardware"], else a100-sxm4-80gb
    model: M2                    # M1..M4 | {preset?, name?, hidden, heads, layers, batch, seq,
                                 #   dtype, ffn_mult} (a preset plus overrides) | a list
    parallelism:
      devices: 8                 # int or list; default: the topology's GPU count
      meshes: all                # all | atp-opt | list of [d1, d2], "d1xd2", "atp-i", "atp-opt"
      placement: row-major       # or a list (atpsim.parallel.mesh.placement_names())
    chunks: [1, 2, 4]            # int or list; each must divide model.batch
    algorithm: ring              # or a list (the collectives registry's names)
    mode: des                    # des | analytic | [des, analytic]
    calibration:                 # optional, analytic mode: B1/B2 per mesh "d1xd2", either for
      "2x4": {B1: "1.20 GB/s", B2: "4.95 GB/s"}   # every topology or nested under a
      ic1: {"8x1": {B1: "0.97 GB/s"}}             # topology label
    cases:                       # optional: the sweep is the union of one product per case;
      - {topology: [ic1, ic2], parallelism: {devices: 8}}   # a case's keys (the axes above)
      - {topology: ic4, parallelism: {devices: 16}}         #   replace the scenario's
    reference: {...}             # optional, free-form: published numbers for the report
    report: {...}                # optional, free-form: options for the report layer
    output: {formats: [csv, parquet]}

Relative ``file:`` paths (topology, hardware profile) resolve against the scenario file's
folder (the validation context's ``base_dir``). Errors are raised as pydantic errors of type
``"scenario"`` whose context carries the *subkey* below the failing field; the loader turns
them into one-line :class:`atpsim.errors.ScenarioError` messages with the full key path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from atpsim.compute.models import DTYPE_BYTES, MODEL_PRESETS, ModelConfig
from atpsim.errors import AtpsimError
from atpsim.parallel.mesh import DeviceMesh, atp_mesh, factorizations, placement_names
from atpsim.topology.registry import did_you_mean
from atpsim.units import parse_bandwidth, parse_time

T = TypeVar("T")
KeyPath = tuple[str | int, ...]

DEFAULT_HARDWARE = "a100-sxm4-80gb"
FALLBACK_HARDWARE = ("a100-sxm4-80gb", "h100-sxm")
FALLBACK_ALGORITHMS = ("rabenseifner", "ring")
MODES = ("des", "analytic")
OUTPUT_FORMATS = ("csv", "parquet")
_MESH_SIZE = re.compile(r"^(\d+)x(\d+)$")
_ATP = re.compile(r"^atp-(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_YAML_SUFFIXES = (".yaml", ".yml")


def invalid(message: str, subkey: KeyPath = ()) -> PydanticCustomError:
    """A validation error whose *message* says what was expected, at *subkey* below the field."""
    return PydanticCustomError("scenario", "{message}", {"message": message, "subkey": subkey})


def show(value: Any) -> str:
    """A short repr of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def render_key(loc: Iterable[str | int], raw: Any = None) -> str:
    """``topology.links[3].bandwidth`` from a location tuple, walked along the *raw* YAML data:
    an index into a value the file wrote as a scalar (a one-value axis) is left out, and so is
    a key inside a scalar (``model: M5`` fails at ``model``, not at ``model.preset``)."""
    text = ""
    for part in loc:
        if raw is not None and not isinstance(raw, (dict, list)):
            break
        if isinstance(part, int):
            if raw is not None and not isinstance(raw, list):
                continue
            text += f"[{part}]"
            raw = raw[part] if isinstance(raw, list) and part < len(raw) else None
        else:
            text += f".{part}" if text else str(part)
            raw = raw.get(part) if isinstance(raw, dict) else None
    return text


# --- registries, imported lazily (other layers may not exist yet) ---------------------------


def hardware_names() -> list[str]:
    try:
        from atpsim.compute.hardware import profile_names
    except ImportError:
        return sorted(FALLBACK_HARDWARE)
    return sorted(profile_names())


def algorithm_names() -> list[str]:
    """All-reduce algorithms: a scenario's ``algorithm`` is the all-reduce ATP runs."""
    try:
        from atpsim.collectives.registry import algorithm_names as registered
    except ImportError:
        return sorted(FALLBACK_ALGORITHMS)
    return sorted(registered("all_reduce"))


def _one_of(what: str, names: Callable[[], Iterable[str]]) -> Callable[[str], str]:
    def check(value: str) -> str:
        valid = list(names())
        if value not in valid:
            raise invalid(f"unknown {what} {value!r}{did_you_mean(value, valid)}")
        return value

    return check


def _as_tuple(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        if not value:
            raise invalid("expected at least one value, got an empty list")
        return tuple(value)
    return (value,)


#: One value or a list of them, kept as a tuple (a sweep axis when it has several values).
OneOrMore = Annotated[tuple[T, ...], BeforeValidator(_as_tuple)]
PositiveInt = Annotated[int, Field(strict=True, ge=1)]
Str = Annotated[str, Field(strict=True)]
Mode = Annotated[Str, AfterValidator(_one_of("mode", lambda: MODES))]
Algorithm = Annotated[Str, AfterValidator(_one_of("algorithm", algorithm_names))]
Placement = Annotated[Str, AfterValidator(_one_of("placement", placement_names))]
OutputFormat = Annotated[Str, AfterValidator(_one_of("output format", lambda: OUTPUT_FORMATS))]


def _resolve_file(text: str, info: ValidationInfo, subkey: KeyPath = ()) -> str:
    """Absolute path of *text*, relative paths taken from the context's ``base_dir``."""
    base = Path((info.context or {}).get("base_dir", "."))
    path = (base / Path(text).expanduser()).resolve()
    if not path.is_file():
        raise invalid(f"expected an existing file, got {text!r} (looked for {path})", subkey)
    return str(path)


class Frozen(BaseModel):
    """A frozen model that rejects unknown keys, suggesting the nearest valid one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)


def reject_unknown_keys(model: type[BaseModel], data: Any) -> Any:
    """*data* unchanged, or an error at the first key that is not a field of *model*."""
    if isinstance(data, dict):
        valid = list(model.model_fields)
        for key in data:
            if key not in valid:
                message = f"unknown key {str(key)!r}{did_you_mean(key, valid)}"
                raise invalid(message, (str(key),))
    return data


# --- topology ------------------------------------------------------------------------------


def _check_quantities(value: Any, path: KeyPath) -> None:
    """Every ``*bandwidth*`` / ``*_Bps`` value positive, every ``*latency*`` one >= 0, at any
    depth of a topology's parameters (e.g. an inline graph's ``links[3].bandwidth``)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_quantities(item, (*path, index))
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        name = str(key).lower()
        if "bandwidth" in name or str(key).endswith("_Bps"):
            check_bandwidth(item, (*path, str(key)))
        elif "latency" in name:
            _check_latency(item, (*path, str(key)))
        else:
            _check_quantities(item, (*path, str(key)))


def _number_or_text(value: Any) -> Any:
    """A bare number YAML read as text ('25e9': YAML 1.1 wants '25.0e+9') as a float."""
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def check_bandwidth(value: Any, subkey: KeyPath) -> float:
    """Bytes/s of *value* ('25 GB/s', '200 Gb/s' or a number), which must be positive."""
    expected = "expected a positive bandwidth such as '25 GB/s' or '200 Gb/s'"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise invalid(f"{expected}, got {show(value)}", subkey)
    try:
        bandwidth = parse_bandwidth(_number_or_text(value))
    except AtpsimError:
        raise invalid(f"{expected}, got {show(value)}", subkey) from None
    if not bandwidth > 0:
        raise invalid(f"{expected}, got {show(value)}", subkey)
    return bandwidth


def _check_latency(value: Any, subkey: KeyPath) -> None:
    expected = "expected a non-negative time such as '1 us' or '0.5 ms'"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise invalid(f"{expected}, got {show(value)}", subkey)
    try:
        latency = parse_time(_number_or_text(value))
    except AtpsimError:
        raise invalid(f"{expected}, got {show(value)}", subkey) from None
    if not latency >= 0:
        raise invalid(f"{expected}, got {show(value)}", subkey)


def _with_unit_suffixes(params: dict[str, Any]) -> dict[str, Any]:
    """Builder parameter names carry their unit (``link_bandwidth_Bps``, ``link_latency_s``);
    a scenario may leave it out since its values say the unit (``link_bandwidth: 25 GB/s``)."""
    renamed = {}
    for key, value in params.items():
        if key.endswith("bandwidth"):
            key += "_Bps"
        elif key.endswith("latency"):
            key += "_s"
        renamed[key] = value
    return renamed


class TopologyEntry(Frozen):
    """One topology: a *preset* (with parameter overrides), a *builder* with parameters, a
    custom graph *file*, or a *spec* string as the CLI takes it (``torus:8x8``); the other
    keys of the mapping are the preset's or builder's parameters, checked by the topology
    layer (bandwidths and latencies are checked here, at any depth, and a name may leave out
    its unit suffix: ``link_bandwidth`` is ``link_bandwidth_Bps``). An optional ``label``
    names the topology in tables and in ``calibration``."""

    preset: Str | None = None
    builder: Str | None = None
    file: Str | None = None
    spec: Str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    label_: Str | None = Field(default=None, alias="label")

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"file": data} if data.endswith(_YAML_SUFFIXES) else {"spec": data}
        if not isinstance(data, dict):
            return data
        kinds = [k for k in ("preset", "builder", "file") if k in data]
        if len(kinds) != 1:
            found = f"got {' and '.join(map(repr, kinds))}" if kinds else f"got keys {list(data)}"
            raise invalid(f"expected exactly one of 'preset', 'builder' or 'file'; {found}")
        params = {str(k): v for k, v in data.items() if k not in (kinds[0], "label")}
        if kinds[0] == "file" and params:
            key = next(iter(params))
            raise invalid(f"unknown key {key!r}: a custom topology file takes no parameters", (key,))
        _check_quantities(params, ())
        label = {"label": data["label"]} if "label" in data else {}
        return {kinds[0]: data[kinds[0]], "params": _with_unit_suffixes(params), **label}

    @field_validator("file")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _resolve_file(value, info)

    def spec_mapping(self) -> dict[str, Any]:
        """The mapping :func:`atpsim.topology.spec.load_topology` takes (and a SweepPoint keeps)."""
        if self.spec is not None:
            return _parse_spec_string(self.spec)
        if self.file is not None:
            return {"file": self.file}
        kind = "preset" if self.preset is not None else "builder"
        return {kind: self.preset or self.builder, **self.params}

    def label(self) -> str:
        """A short name for tables: the mapping's ``label``, else the topology layer's label
        (spec string, preset, builder with its size, file stem)."""
        from atpsim.topology.spec import topology_label

        if self.label_ is not None:
            return self.label_
        if self.spec is not None:
            return self.spec
        try:
            return str(topology_label(self.spec_mapping()))
        except AtpsimError:
            return Path(self.file).stem if self.file else str(self.preset or self.builder)


def _parse_spec_string(text: str) -> dict[str, Any]:
    """A spec string as a mapping: ``torus:8x8`` -> ``{"builder": "torus:8x8"}`` (the topology
    layer parses the size), any other name -> ``{"preset": name}`` (checked when built)."""
    from atpsim.topology.registry import builder_names

    head = text.partition(":")[0]
    return {"builder": text} if head in builder_names() else {"preset": text}


# --- model ---------------------------------------------------------------------------------


class ModelEntry(Frozen):
    """A transformer model: a *preset* (M1..M4) with optional overrides, or every size given.
    Defaults of a size left out are the preset's or :class:`ModelConfig`'s."""

    name: Str | None = None
    preset: Str | None = None
    hidden: PositiveInt | None = None
    heads: PositiveInt | None = None
    layers: PositiveInt | None = None
    batch: PositiveInt | None = None
    seq: PositiveInt | None = None
    dtype: Str | None = None
    ffn_mult: PositiveInt | None = None

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"preset": data}
        return reject_unknown_keys(cls, data)

    @model_validator(mode="after")
    def _check(self) -> ModelEntry:
        if self.preset is not None and self.preset not in MODEL_PRESETS:
            raise invalid(
                f"unknown model preset {self.preset!r}{did_you_mean(self.preset, MODEL_PRESETS)}",
                ("preset",),
            )
        if self.preset is None:
            for key in ("hidden", "heads"):
                if getattr(self, key) is None:
                    raise invalid("missing required key (or give a 'preset')", (key,))
        if self.dtype is not None and self.dtype not in DTYPE_BYTES:
            raise invalid(f"unknown dtype {self.dtype!r}{did_you_mean(self.dtype, DTYPE_BYTES)}",
                          ("dtype",))
        fields = self._fields()
        if fields["hidden"] % fields["heads"]:
            message = f"expected a multiple of heads ({fields['heads']}), got {fields['hidden']}"
            raise invalid(message, ("hidden",))
        try:
            ModelConfig(**fields)
        except AtpsimError as error:
            raise invalid(error.message) from None
        return self

    def overrides(self) -> dict[str, Any]:
        """The sizes this entry sets (everything but name and preset)."""
        skip = ("name", "preset")
        return {k: v for k, v in self.__dict__.items() if k not in skip and v is not None}

    def _fields(self) -> dict[str, Any]:
        base = MODEL_PRESETS[self.preset].__dict__ if self.preset else {}
        return {**base, **self.overrides(), "name": self.name or self.default_name()}

    def config(self) -> ModelConfig:
        """The :class:`ModelConfig` this entry describes (named after it when unnamed)."""
        return ModelConfig(**self._fields())

    def default_name(self) -> str:
        """'M2', 'M2+batch=8', or 'h16384-a128' for a model without a preset."""
        overrides = self.overrides()
        if self.preset is None:
            return f"h{overrides['hidden']}-a{overrides['heads']}"
        if not overrides:
            return self.preset
        return self.preset + "+" + ",".join(f"{k}={v}" for k, v in overrides.items())


# --- parallelism ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshChoice:
    """One entry of ``parallelism.meshes``: a size ``[d1, d2]``, ATP-i, ATP-OPT or all."""

    kind: Literal["size", "atp", "opt", "all"]
    d1: int = 0
    d2: int = 0
    i: int = 0

    def __str__(self) -> str:
        if self.kind == "size":
            return f"{self.d1}x{self.d2}"
        return {"atp": f"atp-{self.i}", "opt": "atp-opt", "all": "all"}[self.kind]

    def meshes(self, devices: int) -> list[DeviceMesh]:
        """The meshes this choice stands for on *devices* GPUs (checked by the sweep)."""
        if self.kind == "size":
            return [DeviceMesh(self.d1, self.d2)]
        if self.kind == "atp":
            return [atp_mesh(devices, self.i)]
        return factorizations(devices)


def _mesh_choice(value: Any) -> MeshChoice:
    if isinstance(value, MeshChoice):
        return value
    expected = "expected [d1, d2], 'D1xD2', 'atp-I' or 'atp-opt'"
    if isinstance(value, list) and len(value) == 2 and all(_is_int(v) for v in value):
        if min(value) < 1:
            raise invalid(f"expected mesh sizes >= 1, got {value}")
        return MeshChoice("size", value[0], value[1])
    if isinstance(value, str):
        if value == "atp-opt":
            return MeshChoice("opt")
        if value == "all":
            raise invalid("'all' stands alone: write 'meshes: all'")
        size, atp = _MESH_SIZE.match(value), _ATP.match(value)
        if size and min(int(size[1]), int(size[2])) >= 1:
            return MeshChoice("size", int(size[1]), int(size[2]))
        if atp and int(atp[1]) >= 1:
            return MeshChoice("atp", i=int(atp[1]))
    raise invalid(f"{expected}, got {show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _meshes_value(value: Any) -> Any:
    if value == "all":
        return (MeshChoice("all"),)
    return _as_tuple(value)


class Parallelism(Frozen):
    """How the GPUs are used: device counts, meshes and the placement of meshes on GPUs."""

    devices: OneOrMore[PositiveInt] | None = None
    meshes: Annotated[
        tuple[Annotated[MeshChoice, PlainValidator(_mesh_choice)], ...],
        BeforeValidator(_meshes_value),
    ] = (MeshChoice("all"),)
    placement: OneOrMore[Placement] = ("row-major",)


# --- the rest ------------------------------------------------------------------------------


def _hardware(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str) and value.endswith(_YAML_SUFFIXES):
        return _resolve_file(value, info)
    if isinstance(value, str):
        return _one_of("hardware profile", hardware_names)(value)
    return value


Hardware = Annotated[Str, AfterValidator(_hardware)]


def _calibration(value: Any) -> dict[str, dict[str, dict[str, float]]]:
    """``{"2x4": {B1, B2}}`` (every topology) or ``{label: {"2x4": {B1, B2}}}`` as
    ``{label or "*": {"2x4": {"B1_Bps": ..., "B2_Bps": ...}}}``."""
    if not isinstance(value, dict):
        raise invalid(f"expected a mapping of meshes 'D1xD2' to {{B1, B2}}, got {show(value)}")
    result: dict[str, dict[str, dict[str, float]]] = {}
    for key, item in value.items():
        key = str(key)
        if _MESH_SIZE.match(key):
            result.setdefault("*", {})[key] = _calibration_entry(item, (key,))
        elif isinstance(item, dict):
            result[key] = {str(m): _calibration_entry(b, (key, str(m))) for m, b in item.items()}
            for mesh in item:
                if not _MESH_SIZE.match(str(mesh)):
                    raise invalid(f"expected a mesh 'D1xD2' such as '2x4', got {show(mesh)}",
                                  (key, str(mesh)))
        else:
            raise invalid(f"expected a mesh 'D1xD2' or a topology label, got {show(key)}", (key,))
    return result


def _calibration_entry(value: Any, path: KeyPath) -> dict[str, float]:
    if not isinstance(value, dict) or not value:
        raise invalid(f"expected a mapping {{B1: bandwidth, B2: bandwidth}}, got {show(value)}",
                      path)
    entry = {}
    for key, bandwidth in value.items():
        if key not in ("B1", "B2"):
            raise invalid(f"unknown key {str(key)!r}{did_you_mean(key, ['B1', 'B2'])}",
                          (*path, str(key)))
        entry[f"{key}_Bps"] = check_bandwidth(bandwidth, (*path, key))
    return entry


class Output(Frozen):
    """What the runner writes besides the report."""

    formats: OneOrMore[OutputFormat] = OUTPUT_FORMATS


#: The keys a case of ``cases`` may set: the sweep axes.
CASE_KEYS = ("topology", "hardware", "model", "parallelism", "chunks", "algorithm", "mode")


class Case(Frozen):
    """One part of a sweep made of several products: the keys it sets replace the
    scenario's (a whole key: a case's ``parallelism`` replaces the scenario's)."""

    topology: OneOrMore[TopologyEntry] | None = None
    hardware: OneOrMore[Hardware] | None = None
    model: OneOrMore[ModelEntry] | None = None
    parallelism: Parallelism | None = None
    chunks: OneOrMore[PositiveInt] | None = None
    algorithm: OneOrMore[Algorithm] | None = None
    mode: OneOrMore[Mode] | None = None


class Scenario(Frozen):
    """A validated scenario file. Build it with :func:`atpsim.scenario.loader.load_scenario`
    (which names the file in errors and resolves relative paths), expand it with
    :func:`atpsim.scenario.sweep.expand_sweep`.

    ``cases`` (optional) makes the sweep a union of products: each case is the scenario
    with the keys the case sets replaced (see :meth:`parts`); ``topology`` and ``model``
    are then required in each case or at the top level.
    """

    name: Str = "scenario"
    description: Str = ""
    topology: OneOrMore[TopologyEntry] | None = None
    hardware: OneOrMore[Hardware] | None = None
    model: OneOrMore[ModelEntry] | None = None
    parallelism: Parallelism = Parallelism()
    chunks: OneOrMore[PositiveInt] = (1,)
    algorithm: OneOrMore[Algorithm] = ("ring",)
    mode: OneOrMore[Mode] = ("des",)
    cases: Annotated[tuple[Case, ...], Field(min_length=1)] | None = None
    calibration: Annotated[
        dict[str, dict[str, dict[str, float]]], BeforeValidator(_calibration)
    ] = Field(default_factory=dict)
    reference: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    output: Output = Output()

    _source: str | None = PrivateAttr(default=None)
    _raw: Any = PrivateAttr(default=None)
    _case: int | None = PrivateAttr(default=None)
    _case_keys: frozenset[str] = PrivateAttr(default=frozenset())

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise invalid(f"expected a name of letters, digits, '.', '_' or '-', got {value!r}")
        return value

    @model_validator(mode="after")
    def _check_required(self) -> Scenario:
        for key in ("topology", "model"):
            if getattr(self, key) is not None:
                continue
            if not self.cases:
                raise invalid("missing required key", (key,))
            for index, case in enumerate(self.cases):
                if getattr(case, key) is None:
                    raise invalid("missing required key (set it here or at the top level)",
                                  ("cases", index, key))
        return self

    @property
    def source(self) -> str | None:
        """The file this scenario was loaded from (None when built in code)."""
        return self._source

    @property
    def topologies(self) -> tuple[TopologyEntry, ...]:
        return self.topology or ()

    @property
    def models(self) -> tuple[ModelEntry, ...]:
        return self.model or ()

    def parts(self) -> list[Scenario]:
        """The products this scenario's sweep is the union of: itself without ``cases``,
        else one scenario per case (whose :meth:`key_path` points into ``cases[i]``)."""
        if not self.cases:
            return [self]
        parts = []
        for index, case in enumerate(self.cases):
            update = {key: getattr(case, key) for key in case.model_fields_set}
            part = self.model_copy(update={**update, "cases": None})
            part._case, part._case_keys = index, frozenset(update)
            parts.append(part)
        return parts

    def key_path(self, *loc: str | int) -> str:
        """The key path of *loc* as the file wrote it (``chunks`` for a scalar, else
        ``chunks[1]``; ``cases[2].chunks`` where a case set it)."""
        if loc and loc[0] in self._case_keys:
            loc = ("cases", self._case or 0, *loc)
        return render_key(loc, self._raw)

    def calibration_for(self, label: str, mesh: DeviceMesh) -> dict[str, float] | None:
        """The calibrated bandwidths of *mesh* on topology *label*, if the scenario has any."""
        name = f"{mesh.d1}x{mesh.d2}"
        for scope in (label, "*"):
            if name in self.calibration.get(scope, {}):
                return dict(self.calibration[scope][name])
        return None
