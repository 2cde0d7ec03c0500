"""The scenario schema's building blocks: frozen models that reject unknown keys with the
nearest valid one, one-or-many axes, named choices checked against their registries, and
bandwidth/latency checks. Errors are pydantic errors of type ``"scenario"`` whose context
carries the *subkey* below the failing field; the loader turns them into one-line
:class:`atpsim.errors.ScenarioError` messages with the full key path (:func:`render_key`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from atpsim.collectives.nccl import nccl_algorithm_names
from atpsim.compute.hardware import profile_names
from atpsim.engine.methods import names as method_names
from atpsim.errors import AtpsimError, did_you_mean
from atpsim.parallel.mesh import placement_names
from atpsim.units import parse_bandwidth_text, parse_time_text

T = TypeVar("T")
KeyPath = tuple[str | int, ...]

MODES = tuple(method_names("mode"))
OUTPUT_FORMATS = ("csv", "parquet")
MESH_SIZE = re.compile(r"^(\d+)x(\d+)$")
YAML_SUFFIXES = (".yaml", ".yml")


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
    """Hardware profile names (the compute layer's)."""
    return sorted(profile_names())


def algorithm_names() -> list[str]:
    """All-reduce algorithms: a scenario's ``algorithm`` is the all-reduce ATP runs (``auto``:
    what NCCL's tuner picks; :func:`atpsim.collectives.nccl.nccl_algorithm_names`)."""
    return nccl_algorithm_names("all_reduce")


def one_of(what: str, names: Callable[[], Iterable[str]]) -> Callable[[str], str]:
    """A validator accepting the *names()* of *what*, suggesting the nearest on a typo."""

    def check(value: str) -> str:
        valid = list(names())
        if value not in valid:
            raise invalid(f"unknown {what} {value!r}{did_you_mean(value, valid)}")
        return value

    return check


def as_tuple(value: Any) -> Any:
    """A list as a tuple, a single value as a tuple of one; an empty list is an error."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise invalid("expected at least one value, got an empty list")
        return tuple(value)
    return (value,)


#: One value or a list of them, kept as a tuple (a sweep axis when it has several values).
OneOrMore = Annotated[tuple[T, ...], BeforeValidator(as_tuple)]
PositiveInt = Annotated[int, Field(strict=True, ge=1)]
Str = Annotated[str, Field(strict=True)]
Mode = Annotated[Str, AfterValidator(one_of("mode", lambda: MODES))]
Algorithm = Annotated[Str, AfterValidator(one_of("algorithm", algorithm_names))]
Placement = Annotated[Str, AfterValidator(one_of("placement", placement_names))]
#: Tensor-parallel schemes: ATP's mesh, 2D / 2.5D SUMMA (atpsim.parallel.summa), or
#: SageMaker-style TP over data-parallel ranks (atpsim.parallel.sagemaker).
SCHEMES = ("atp", "summa", "sagemaker")
Scheme = Annotated[Str, AfterValidator(one_of("scheme", lambda: SCHEMES))]
OutputFormat = Annotated[Str, AfterValidator(one_of("output format", lambda: OUTPUT_FORMATS))]


def resolve_file(text: str, info: ValidationInfo, subkey: KeyPath = ()) -> str:
    """Absolute path of *text*, relative paths taken from the context's ``base_dir``."""
    base = Path((info.context or {}).get("base_dir", "."))
    path = (base / Path(text).expanduser()).resolve()
    if not path.is_file():
        raise invalid(f"expected an existing file, got {text!r} (looked for {path})", subkey)
    return str(path)


class Frozen(BaseModel):
    """A frozen model that rejects unknown keys, suggesting the nearest valid one, and any
    number that is not finite (``.inf``, ``.nan``: a straggler factor of .inf ran into an
    IndexError as a point failure)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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


def check_quantities(value: Any, path: KeyPath, force: bool = False) -> None:
    """Every ``*bandwidth*`` / ``*_Bps`` value a bandwidth with its unit, every ``*latency*``
    one a time with its unit, each in its physical range unless *force*, at any depth of a
    topology's parameters (e.g. an inline graph's ``links[3].bandwidth``)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_quantities(item, (*path, index), force)
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        name = str(key).lower()
        if "bandwidth" in name or str(key).endswith("_Bps"):
            check_bandwidth(item, (*path, str(key)), force)
        elif "latency" in name:
            check_latency(item, (*path, str(key)), force)
        else:
            check_quantities(item, (*path, str(key)), force)


def check_bandwidth(value: Any, subkey: KeyPath, force: bool = False) -> float:
    """Bytes/s of *value*, which must be written with its unit ('25 GB/s', '200 Gb/s') and lie
    in the physical range unless *force* (:func:`atpsim.units.parse_bandwidth_text`)."""
    return _check_quantity(parse_bandwidth_text, value, subkey, force)


def check_latency(value: Any, subkey: KeyPath, force: bool = False) -> None:
    """*value* must be a time with its unit ('1 us', '0.5 ms'), >= 0 and in the physical range
    unless *force* (:func:`atpsim.units.parse_time_text`)."""
    _check_quantity(parse_time_text, value, subkey, force)


def _check_quantity(
    parse: Callable[..., float], value: Any, subkey: KeyPath, force: bool
) -> float:
    """*parse*'s SI value of *value*, else one scenario error at *subkey* saying why."""
    try:
        return parse(value, force=force)
    except AtpsimError as error:
        raise invalid(error.message, subkey) from None


def _hardware(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str) and value.endswith(YAML_SUFFIXES):
        return resolve_file(value, info)
    if isinstance(value, str):
        return one_of("hardware profile", hardware_names)(value)
    return value


Hardware = Annotated[Str, AfterValidator(_hardware)]
