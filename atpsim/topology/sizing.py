"""A registered builder called by name at a size: how the SIZE of a ``BUILDER:SIZE`` spec
string reads, how a builder is sized to a GPU count when a spec leaves its size open, and the
call itself with its parameters checked against the builder's declaration. Spec strings
(:mod:`atpsim.topology.spec`) and presets (:mod:`atpsim.topology.presets`) both build through
:func:`build_from_builder`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from atpsim.errors import TopologyError, did_you_mean
from atpsim.topology.builders.torus import square_dims
from atpsim.topology.graph import Topology
from atpsim.topology.registry import builder_info


def _parse_dims(text: str) -> dict[str, Any]:
    return {"dims": tuple(_parse_int(part, "dims") for part in text.split("x"))}


def _parse_gpus(text: str) -> dict[str, Any]:
    return {"gpus": _parse_int(text, "gpus")}


def _parse_cluster(text: str) -> dict[str, Any]:
    parts = text.split("x")
    if len(parts) != 2:
        raise TopologyError(f"expected NODESxGPUS_PER_NODE such as '4x8', got {text!r}", key="size")
    return {
        "nodes": _parse_int(parts[0], "nodes"),
        "gpus_per_node": _parse_int(parts[1], "gpus_per_node"),
    }


def _parse_domains(text: str) -> dict[str, Any]:
    """``nvl72:2`` = 2 racks; ``nvl72:2x36`` = 2 racks of 36 GPUs."""
    parts = text.split("x")
    if len(parts) > 2:
        raise TopologyError(f"expected DOMAINS or DOMAINSxGPUS such as '2x72', got {text!r}", key="size")
    sized = {"domains": _parse_int(parts[0], "domains")}
    if len(parts) == 2:
        sized["gpus_per_domain"] = _parse_int(parts[1], "gpus_per_domain")
    return sized


def _parse_int(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TopologyError(f"expected an integer, got {text!r}", key=key) from None


def _size_torus(n_gpus: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"dims": square_dims(n_gpus)}


def _size_gpus(n_gpus: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"gpus": n_gpus}


def _size_cluster(n_gpus: int, params: dict[str, Any]) -> dict[str, Any]:
    per_node = int(params.get("gpus_per_node", 8))
    if n_gpus % per_node:
        raise TopologyError(
            f"expected a GPU count divisible by gpus_per_node={per_node}, got {n_gpus}", key="gpus"
        )
    return {"nodes": n_gpus // per_node}


def _size_domains(n_gpus: int, params: dict[str, Any]) -> dict[str, Any]:
    per_domain = int(params.get("gpus_per_domain", 72))
    if n_gpus % per_domain:
        raise TopologyError(
            f"expected a GPU count divisible by gpus_per_domain={per_domain}, got {n_gpus}", key="gpus"
        )
    return {"domains": n_gpus // per_domain}


#: How the SIZE of ``BUILDER:SIZE`` reads, per builder.
SIZE_PARSERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "torus": _parse_dims,
    "nvswitch": _parse_gpus,
    "nvlink-network-switch": _parse_gpus,
    "pcie-tree": _parse_gpus,
    "nvlink-pairs": _parse_gpus,
    "ib-cluster": _parse_cluster,
    "nvl72": _parse_domains,
}
#: How a builder is sized to *n_gpus* when a spec leaves the size open.
SIZE_FROM_GPUS: dict[str, Callable[[int, dict[str, Any]], dict[str, Any]]] = {
    "torus": _size_torus,
    "nvswitch": _size_gpus,
    "nvlink-network-switch": _size_gpus,
    "pcie-tree": _size_gpus,
    "nvlink-pairs": _size_gpus,
    "ib-cluster": _size_cluster,
    "nvl72": _size_domains,
}

#: The parameters that size each builder: a spec that gives one is built at its own size
#: (``--devices 1`` on ``ib-cluster:1x8`` uses that machine's first GPU).
SIZE_KEYS: dict[str, set[str]] = {
    "torus": {"dims"},
    "nvswitch": {"gpus"},
    "nvlink-network-switch": {"gpus"},
    "pcie-tree": {"gpus"},
    "nvlink-pairs": {"gpus"},
    "ib-cluster": {"nodes"},
    "nvl72": {"domains"},
}


def build_from_builder(name: str, params: dict[str, Any], *, n_gpus: int | None = None) -> Topology:
    """Call builder *name* with *params*, sized to *n_gpus* when no size parameter is given."""
    builder = builder_info(name)
    params = dict(params)
    if n_gpus is not None and name in SIZE_FROM_GPUS and not SIZE_KEYS[name] & set(params):
        params.update(SIZE_FROM_GPUS[name](n_gpus, params))
    try:
        topology = builder.build(**params)
    except TypeError as error:
        unknown = [k for k in params if k not in builder.param_names()]
        if unknown:
            raise TopologyError(
                f"unknown parameter for builder {name!r}"
                f"{did_you_mean(unknown[0], builder.param_names())}",
                key=unknown[0],
            ) from None
        raise TopologyError(f"bad parameters for builder {name!r}: {error}") from None
    return topology
