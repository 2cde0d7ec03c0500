"""Topology builders by name, each with its parameters declared as data, so scenarios and the
CLI can list them, show their parameters and call them.

The registry imports every builder module (each registers its builders on import through
:func:`atpsim.topology.builders.base.register_builder`); no builder imports the registry.
"""

from __future__ import annotations

from atpsim.errors import TopologyError, did_you_mean
from atpsim.topology import custom  # noqa: F401  (registers 'custom')
from atpsim.topology.builders import cluster, nvl72, pcie, switch, torus  # noqa: F401  (register theirs)
from atpsim.topology.builders.base import REGISTERED, Builder, BuilderFn

__all__ = ["Builder", "BuilderFn", "builder_info", "builder_names", "get_builder"]


def builder_names() -> list[str]:
    """Every registered builder name, sorted."""
    return sorted(REGISTERED)


def builder_info(name: str) -> Builder:
    """The builder called *name* with its declared parameters, or a :class:`TopologyError`
    suggesting the nearest name."""
    if name not in REGISTERED:
        raise TopologyError(f"unknown topology builder {name!r}{did_you_mean(name, REGISTERED)}")
    return REGISTERED[name]


def get_builder(name: str) -> BuilderFn:
    """The function of the builder called *name* (see :func:`builder_info`)."""
    return builder_info(name).build
