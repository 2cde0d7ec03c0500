"""The entries of a scenario's axes: a topology, a model, a mesh choice (the parallelism
they make up is :mod:`atpsim.scenario.parallelism`)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from atpsim.compute.models import DTYPE_BYTES, FFN_KINDS, ModelConfig, model_preset, preset_names
from atpsim.errors import AtpsimError, did_you_mean
from atpsim.importers.hf import model_keys
from atpsim.parallel.mesh import DeviceMesh, atp_mesh
from atpsim.scenario.fields import (
    MESH_SIZE,
    YAML_SUFFIXES,
    Frozen,
    PositiveInt,
    Str,
    as_tuple,
    check_quantities,
    invalid,
    reject_unknown_keys,
    resolve_file,
    show,
)
from atpsim.topology.registry import builder_names
from atpsim.topology.spec import topology_label

_ATP = re.compile(r"^atp-(\d+)$")
StrictBool = Annotated[bool, Field(strict=True)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


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
    names the topology in tables and in ``calibration``; ``force: true`` accepts bandwidths
    and latencies outside their physical range."""

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
            return {"file": data} if data.endswith(YAML_SUFFIXES) else {"spec": data}
        if not isinstance(data, dict):
            return data
        kinds = [k for k in ("preset", "builder", "file") if k in data]
        if len(kinds) != 1:
            found = f"got {' and '.join(map(repr, kinds))}" if kinds else f"got keys {list(data)}"
            raise invalid(f"expected exactly one of 'preset', 'builder' or 'file'; {found}")
        params = {str(k): v for k, v in data.items() if k not in (kinds[0], "label", "force")}
        if kinds[0] == "file" and params:
            key = next(iter(params))
            raise invalid(
                f"unknown key {key!r}: a custom topology file takes no parameters", (key,)
            )
        force = data.get("force", False)
        if not isinstance(force, bool):
            raise invalid(f"expected true or false, got {show(force)}", ("force",))
        check_quantities(params, (), force)
        if force and data.get("builder") == "custom":
            params["force"] = True  # the inline graph is checked again when built
        label = {"label": data["label"]} if "label" in data else {}
        return {kinds[0]: data[kinds[0]], "params": _with_unit_suffixes(params), **label}

    @field_validator("file")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else resolve_file(value, info)

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
    head = text.partition(":")[0]
    return {"builder": text} if head in builder_names() else {"preset": text}


# --- model ---------------------------------------------------------------------------------


def _hf_keys(path: Any, info: ValidationInfo) -> dict[str, Any]:
    """``model: {hf_config: PATH}``: the model keys of a Hugging Face ``config.json`` (read as
    ``atpsim import hf`` reads it, :mod:`atpsim.importers.hf`; relative to the scenario's
    folder), the keys written beside it overriding them; what the file says that is not
    understood or not modelled is logged as a warning."""
    if not isinstance(path, str):
        raise invalid(f"expected the path of a config.json, got {show(path)}", ("hf_config",))
    resolved = resolve_file(path, info, ("hf_config",))
    try:
        keys, findings = model_keys(resolved)
    except AtpsimError as error:
        raise invalid(error.format(), ("hf_config",)) from None
    for line in findings:
        logging.getLogger(__name__).warning("model.hf_config: %s", line)
    file = Path(resolved)
    name = file.parent.name if file.stem == "config" and file.parent.name else file.stem
    return {"name": name, **keys}


def _model_key(message: str) -> tuple[str, ...]:
    """The key a ModelConfig refusal names (``model.top_k ... `` -> ``("top_k",)``), or none."""
    named = re.match(r"model\.(\w+)", message)
    return (named.group(1),) if named and named.group(1) in ModelEntry.model_fields else ()


class ModelEntry(Frozen):
    """A transformer model: a *preset* (M1..M4, ``gpt3-175b``, ``megatron-1t``,
    ``llama3.1-70b``, ...: see :func:`atpsim.compute.models.preset_names`) with optional
    overrides, or every size given. Defaults of a size left out are the preset's or
    :class:`ModelConfig`'s; the layer's shape (``kv_heads``, ``ffn_hidden``, ``ffn``,
    ``tie_embeddings``), the mixture of experts (``experts``, ``top_k``, ``moe_every``,
    ``expert_ffn_hidden``, ``capacity_factor``) and ``vocab`` are :class:`ModelConfig`'s
    (``vocab``: the job's vocabulary unless ``parallelism.vocab`` gives one; a preset's is its
    own); a value ModelConfig refuses is refused at its key."""

    name: Str | None = None
    preset: Str | None = None
    hidden: PositiveInt | None = None
    heads: PositiveInt | None = None
    layers: PositiveInt | None = None
    batch: PositiveInt | None = None
    seq: PositiveInt | None = None
    dtype: Str | None = None
    ffn_mult: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    ffn_hidden: PositiveInt | None = None
    ffn: Str | None = None
    tie_embeddings: StrictBool | None = None
    vocab: NonNegativeInt | None = None
    experts: NonNegativeInt | None = None
    top_k: PositiveInt | None = None
    moe_every: PositiveInt | None = None
    expert_ffn_hidden: PositiveInt | None = None
    capacity_factor: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] | None = None
    hf_config: Str | None = None

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, str):
            return {"preset": data}
        data = reject_unknown_keys(cls, data)
        if isinstance(data, dict) and data.get("hf_config") is not None:
            return {**_hf_keys(data["hf_config"], info), **data}
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelEntry:
        if self.preset is not None and self.preset not in preset_names():
            raise invalid(
                f"unknown model preset {self.preset!r}{did_you_mean(self.preset, preset_names())}",
                ("preset",),
            )
        if self.preset is None:
            for key in ("hidden", "heads"):
                if getattr(self, key) is None:
                    raise invalid("missing required key (or give a 'preset')", (key,))
        if self.dtype is not None and self.dtype not in DTYPE_BYTES:
            raise invalid(
                f"unknown dtype {self.dtype!r}{did_you_mean(self.dtype, DTYPE_BYTES)}", ("dtype",)
            )
        if self.ffn is not None and self.ffn not in FFN_KINDS:
            raise invalid(f"unknown ffn {self.ffn!r}; expected one of {', '.join(FFN_KINDS)}"
                          f"{did_you_mean(self.ffn, FFN_KINDS)}", ("ffn",))  # fmt: skip
        fields = self._fields()
        if fields["hidden"] % fields["heads"]:
            message = f"expected a multiple of heads ({fields['heads']}), got {fields['hidden']}"
            raise invalid(message, ("hidden",))
        kv_heads = fields.get("kv_heads")
        if kv_heads is not None and fields["heads"] % kv_heads:
            message = f"expected a divisor of heads ({fields['heads']}), got {kv_heads}"
            raise invalid(message, ("kv_heads",))
        try:
            ModelConfig(**fields)
        except AtpsimError as error:
            raise invalid(error.message, _model_key(error.message)) from None
        return self

    def overrides(self) -> dict[str, Any]:
        """The sizes this entry sets (everything but name, preset and hf_config, whose sizes
        are among them)."""
        skip = ("name", "preset", "hf_config")
        return {k: v for k, v in self.__dict__.items() if k not in skip and v is not None}

    def _fields(self) -> dict[str, Any]:
        base = model_preset(self.preset).__dict__ if self.preset else {}
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

    def mesh(self, devices: int) -> DeviceMesh:
        """The mesh a listed choice (a size or ATP-i) stands for on *devices* GPUs (checked by
        the sweep). ``all`` and ``atp-opt`` stand for every factorization of the devices, which
        the sweep enumerates (:func:`atpsim.scenario.sweep.resolve_meshes`, through the one
        enumerator :func:`atpsim.training.layouts.tp_meshes`)."""
        if self.kind == "size":
            return DeviceMesh(self.d1, self.d2)
        if self.kind == "atp":
            return atp_mesh(devices, self.i)
        raise ValueError(f"{self} is not one mesh: resolve_meshes enumerates its meshes")


def mesh_choice(value: Any) -> MeshChoice:
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
        size, atp = MESH_SIZE.match(value), _ATP.match(value)
        if size and min(int(size[1]), int(size[2])) >= 1:
            return MeshChoice("size", int(size[1]), int(size[2]))
        if atp and int(atp[1]) >= 1:
            return MeshChoice("atp", i=int(atp[1]))
    raise invalid(f"{expected}, got {show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def meshes_value(value: Any) -> Any:
    if value == "all":
        return (MeshChoice("all"),)
    return as_tuple(value)
