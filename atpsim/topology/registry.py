"""Topology builders registered by name, so scenarios and the CLI can list and call them."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from atpsim.errors import TopologyError
from atpsim.topology.graph import Topology

BuilderFn = Callable[..., Topology]
_BUILDERS: dict[str, BuilderFn] = {}


def register_builder(name: str) -> Callable[[BuilderFn], BuilderFn]:
    """Register *fn* as the builder called *name* (kebab-case, e.g. ``nvlink-network-switch``)."""

    def decorate(fn: BuilderFn) -> BuilderFn:
        _BUILDERS[name] = fn
        return fn

    return decorate


def builder_names() -> list[str]:
    """Every registered builder name, sorted."""
    _load_builtin_builders()
    return sorted(_BUILDERS)


def get_builder(name: str) -> BuilderFn:
    """The builder called *name*, or a :class:`TopologyError` suggesting the nearest name."""
    _load_builtin_builders()
    if name not in _BUILDERS:
        raise TopologyError(f"unknown topology builder {name!r}{did_you_mean(name, _BUILDERS)}")
    return _BUILDERS[name]


def did_you_mean(name: str, choices: Any) -> str:
    """' (did you mean 'x'?)' for the nearest of *choices*, else the list of valid names."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; expected one of {sorted(map(str, choices))}"


def _load_builtin_builders() -> None:
    import atpsim.topology.builders  # noqa: F401  (registers on import)
