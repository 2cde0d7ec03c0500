"""What a topology builder is: a :class:`Builder` record (name, function, declared
parameters) and the :func:`register_builder` decorator each builder module applies to its
functions. This module imports no builder; :mod:`atpsim.topology.registry` imports them all and
answers lookups by name."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

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


#: Every builder registered so far, by name (filled as the builder modules are imported).
REGISTERED: dict[str, Builder] = {}


def register_builder(name: str, params: Sequence[BuilderParam]) -> Callable[[BuilderFn], BuilderFn]:
    """Register the decorated function as the builder called *name* (kebab-case, e.g.
    ``nvlink-network-switch``) taking *params*. Every named parameter of the function must be
    declared (extra declared names need a ``**`` catch-all), so the list cannot drift."""

    def decorate(fn: BuilderFn) -> BuilderFn:
        REGISTERED[name] = Builder(name, fn, _with_defaults(name, fn, params))
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
