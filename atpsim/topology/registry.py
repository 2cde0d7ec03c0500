"""Topology builders registered by name, each with its parameters declared as data, so
scenarios and the CLI can list them, show their parameters and call them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from atpsim.errors import TopologyError, did_you_mean
from atpsim.topology.graph import Topology
from atpsim.topology.params import BuilderParam

BuilderFn = Callable[..., Topology]


@dataclass(frozen=True)
class Builder:
    """A registered builder: its *name*, the function that *build* s the topology, and its
    declared *params* (defaults filled in from the function's signature)."""

    name: str
    build: BuilderFn
    params: tuple[BuilderParam, ...]

    @property
    def summary(self) -> str:
        """The first sentence of the builder's docstring, without markup."""
        text = " ".join((self.build.__doc__ or "").split()).replace("*", "").replace("``", "")
        return text.split(". ")[0].split("; ")[0].rstrip(".")

    def param_names(self) -> list[str]:
        """The declared parameter names, in declaration order."""
        return [param.name for param in self.params]


_BUILDERS: dict[str, Builder] = {}


def register_builder(name: str, params: Sequence[BuilderParam]) -> Callable[[BuilderFn], BuilderFn]:
    """Register the decorated function as the builder called *name* (kebab-case, e.g.
    ``nvlink-network-switch``) taking *params*. Every named parameter of the function must be
    declared (extra declared names need a ``**`` catch-all), so the list cannot drift."""

    def decorate(fn: BuilderFn) -> BuilderFn:
        _BUILDERS[name] = Builder(name, fn, _with_defaults(name, fn, params))
        return fn

    return decorate


def _with_defaults(
    name: str, fn: BuilderFn, params: Sequence[BuilderParam]
) -> tuple[BuilderParam, ...]:
    """*params* with each default read from *fn*'s signature (a parameter the ``**`` catch-all
    takes keeps its declared default); a TypeError if they disagree."""
    signature = inspect.signature(fn).parameters
    named = {k: p for k, p in signature.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    declared = [param.name for param in params]
    catch_all = len(named) < len(signature)
    undeclared = [k for k in named if k not in declared]
    extra = [k for k in declared if k not in named and not catch_all]
    if undeclared or extra or len(set(declared)) != len(declared):
        raise TypeError(
            f"builder {name!r}: declared parameters {declared} do not match its signature "
            f"(undeclared {undeclared}, not taken {extra})"
        )
    return tuple(
        replace(param, default=_default(named[param.name])) if param.name in named else param
        for param in params
    )


def _default(parameter: inspect.Parameter) -> object:
    return None if parameter.default is parameter.empty else parameter.default


def builder_names() -> list[str]:
    """Every registered builder name, sorted."""
    _load_builtin_builders()
    return sorted(_BUILDERS)


def builder_info(name: str) -> Builder:
    """The builder called *name* with its declared parameters, or a :class:`TopologyError`
    suggesting the nearest name."""
    _load_builtin_builders()
    if name not in _BUILDERS:
        raise TopologyError(f"unknown topology builder {name!r}{did_you_mean(name, _BUILDERS)}")
    return _BUILDERS[name]


def get_builder(name: str) -> BuilderFn:
    """The function of the builder called *name* (see :func:`builder_info`)."""
    return builder_info(name).build


def _load_builtin_builders() -> None:
    import atpsim.topology.builders  # noqa: F401  (registers on import)
