"""Helpers every builder shares: parameter checks and adding GPUs, switches and links."""

from __future__ import annotations

from typing import Any

import networkx as nx

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


def add_gpu(graph: nx.Graph, rank: int, **attrs: Any) -> str:
    """Add GPU *rank* as node ``gpu<rank>`` (kind 'gpu', level 0) and return its name."""
    name = f"gpu{rank}"
    graph.add_node(name, kind="gpu", rank=rank, level=0, **attrs)
    return name


def add_link(
    graph: nx.Graph, a: str, b: str, kind: str, bandwidth_Bps: float, latency_s: float
) -> None:
    """One full-duplex link between *a* and *b*, *bandwidth_Bps* in each direction."""
    graph.add_edge(a, b, kind=kind, bandwidth_Bps=float(bandwidth_Bps), latency_s=float(latency_s))
