"""Builder parameters: their declaration and their checks.

A :class:`BuilderParam` declares one parameter of a registered builder (name, kind, unit,
default, one line of description), so ``atpsim topo list`` can show it and a spec string's
unknown key can be answered with the nearest declared one. The checks turn a bandwidth, a
latency, a count or a choice into its SI value or a :class:`TopologyError` naming the
parameter. The scenario layer checks the bandwidths and latencies it reads with the same
functions, so both accept the same spellings (a number, '25 GB/s', '200 Gb/s', '0.6 us', or a
bare number written as text such as '450e9').
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from atpsim.errors import AtpsimError, TopologyError, check_number
from atpsim.units import parse_bandwidth, parse_time

ParamKind = Literal[
    "count", "bandwidth", "time", "choice", "flag", "ratio", "dims", "path", "list", "text"
]

#: The SI unit of each kind of quantity (the unit in the parameter's name: ``_Bps``, ``_s``).
_UNITS = {"bandwidth": "B/s", "time": "s"}
_TYPES = {
    "count": "int >= 1",
    "flag": "bool",
    "ratio": "number >= 1",
    "dims": "list of int",
    "path": "file path",
    "list": "list",
    "text": "text",
}


@dataclass(frozen=True)
class BuilderParam:
    """One parameter of a topology builder: its *name* as specs and YAML spell it, its *kind*
    of value, the *choices* of a 'choice', and a one-line *description*. *default* is the
    builder's own default, filled in from its signature when the builder is registered (None:
    derived from other parameters or absent, as the description says)."""

    name: str
    kind: ParamKind
    description: str
    choices: tuple[str, ...] = ()
    default: Any = None

    @property
    def unit(self) -> str:
        """The SI unit of a bandwidth ('B/s') or a time ('s'); '' for the other kinds."""
        return _UNITS.get(self.kind, "")

    @property
    def type_text(self) -> str:
        """The kind as a user reads it: 'bandwidth [B/s]', 'a100 | h100', 'int >= 1'."""
        if self.kind == "choice":
            return " | ".join(self.choices)
        if self.unit:
            return f"{self.kind} [{self.unit}]"
        return _TYPES[self.kind]

    @property
    def default_text(self) -> str:
        """The default with its unit ('25 GB/s', '0.3 us', '4x4'), or 'none'."""
        value = self.default
        if value is None:
            return "none"
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str):
            return value
        if self.kind == "bandwidth":
            return f"{value / 1e9:g} GB/s"
        if self.kind == "time":
            return f"{value * 1e6:g} us"
        if self.kind == "dims":
            return "x".join(map(str, value))
        return f"{value:g}" if isinstance(value, float) else str(value)


def bandwidth_param(value: Any, key: str) -> float:
    """Bytes/s from *value* (number or '25 GB/s'); a :class:`TopologyError` naming *key*
    unless it is finite and > 0 (an infinite link would carry any flow in no time)."""
    try:
        bandwidth = parse_bandwidth(_number_or_text(value))
    except AtpsimError as error:
        raise TopologyError(error.message, key=key) from None
    if not bandwidth > 0:
        raise TopologyError(f"expected a positive bandwidth, got {value!r}", key=key)
    return check_number(bandwidth, key, what="a positive bandwidth", shown=value,
                        error_type=TopologyError)  # fmt: skip


def time_param(value: Any, key: str) -> float:
    """Seconds from *value* (number or '0.6 us'); a :class:`TopologyError` naming *key*
    unless it is finite and >= 0."""
    try:
        seconds = parse_time(_number_or_text(value))
    except AtpsimError as error:
        raise TopologyError(error.message, key=key) from None
    return check_number(seconds, key, low=0, what="a latency", shown=value,
                        error_type=TopologyError)  # fmt: skip


def ratio_param(value: Any, key: str) -> float:
    """A finite number >= 1 (an oversubscription: down-ports per up-port); a
    :class:`TopologyError` naming *key* otherwise (nan would pass ``< 1``, inf would leave a
    fat tree without spines)."""
    return check_number(value, key, low=1, what="a ratio", error_type=TopologyError)


def _number_or_text(value: Any) -> Any:
    """A bare number written as text ('450e9', as YAML reads it) becomes a float."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def count_param(value: Any, key: str, minimum: int = 1) -> int:
    """An integer >= *minimum*; a :class:`TopologyError` naming *key* otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TopologyError(f"expected an integer >= {minimum}, got {value!r}", key=key)
    return value


def choice_param(value: Any, key: str, choices: tuple[str, ...]) -> str:
    """*value* if it is one of *choices*; a :class:`TopologyError` naming *key* otherwise."""
    if value not in choices:
        raise TopologyError(f"expected one of {list(choices)}, got {value!r}", key=key)
    return str(value)
