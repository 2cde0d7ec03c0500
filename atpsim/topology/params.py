"""Checks of builder parameters: a bandwidth, a latency, a count, a choice, each turned into its
SI value or a :class:`TopologyError` naming the parameter. The scenario layer checks the
bandwidths and latencies it reads with the same functions, so both accept the same spellings
(a number, '25 GB/s', '200 Gb/s', '0.6 us', or a bare number written as text such as '450e9')."""

from __future__ import annotations

from typing import Any

from atpsim.errors import AtpsimError, TopologyError
from atpsim.units import parse_bandwidth, parse_time


def bandwidth_param(value: Any, key: str) -> float:
    """Bytes/s from *value* (number or '25 GB/s'); a :class:`TopologyError` naming *key* if not > 0."""
    try:
        bandwidth = parse_bandwidth(_number_or_text(value))
    except AtpsimError as error:
        raise TopologyError(error.message, key=key) from None
    if not bandwidth > 0:
        raise TopologyError(f"expected a positive bandwidth, got {value!r}", key=key)
    return bandwidth


def time_param(value: Any, key: str) -> float:
    """Seconds from *value* (number or '0.6 us'); a :class:`TopologyError` naming *key* if < 0."""
    try:
        seconds = parse_time(_number_or_text(value))
    except AtpsimError as error:
        raise TopologyError(error.message, key=key) from None
    if not seconds >= 0:
        raise TopologyError(f"expected a latency >= 0, got {value!r}", key=key)
    return seconds


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
