"""`custom`: a topology from a YAML list of nodes and links.

```yaml
name: two-boxes            # optional
description: ...           # optional
routing: shortest          # optional: shortest (default) | up-down (nodes then need `level`)
nodes:
  - {name: g0, kind: gpu}  # GPU ranks follow the listed order, or give `rank` explicitly
  - {name: sw, kind: switch, level: 1}
links:
  - {a: g0, b: sw, kind: custom, bandwidth: "25 GB/s", latency: "1 us"}
```
Bandwidths and latencies carry their unit; values outside 1 MB/s..100 TB/s or 0..1 s need
``force: true`` at the top. Bandwidths are per direction ("GB/s" = 10^9 bytes/s, "Gb/s" bits); every link is full duplex.
Errors name the file and the key path (``links[3].bandwidth``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from atpsim.errors import AtpsimError, TopologyError, did_you_mean, read_text
from atpsim.topology.builders.base import register_builder
from atpsim.topology.graph import LINK_KINDS, NODE_KINDS, Topology
from atpsim.topology.params import BuilderParam
from atpsim.topology.routing import Router, ShortestPathRouter, UpDownRouter
from atpsim.units import parse_bandwidth_text, parse_time_text
from atpsim.yamlfile import load_yaml

TOP_KEYS = ("name", "description", "routing", "nodes", "links", "force")
NODE_KEYS = ("name", "kind", "rank", "level")
LINK_KEYS = ("a", "b", "kind", "bandwidth", "latency")
ROUTERS: dict[str, Callable[[], Router]] = {"shortest": ShortestPathRouter, "up-down": UpDownRouter}


def load_custom(path: str | Path) -> Topology:
    """Read the custom topology YAML file at *path*; errors name the file and key path."""
    source = str(path)
    text = read_text(path, "the topology file", TopologyError)
    data = load_yaml(text, source, TopologyError)
    try:
        return build_custom(data, default_name=Path(path).stem)
    except AtpsimError as error:
        raise TopologyError(error.message, source=source, key=error.key) from None


CUSTOM_PARAMS = (
    BuilderParam("file", "path", "a YAML file of nodes and links; or give them inline:"),
    BuilderParam("nodes", "list", "{name, kind, rank?, level?} each; GPU ranks in listed order"),
    BuilderParam("links", "list", "{a, b, kind?, bandwidth, latency?} each, full duplex"),
    BuilderParam(
        "routing", "choice", "by shortest path or up-down by node level", tuple(ROUTERS), "shortest"
    ),
    BuilderParam("name", "text", "the topology's name (a file: its stem)", default="custom"),
    BuilderParam("description", "text", "one line shown by topo show"),
    BuilderParam("force", "flag", "accept bandwidths and latencies outside their range", default=False),
)


@register_builder("custom", CUSTOM_PARAMS)
def custom(file: str | None = None, **data: Any) -> Topology:
    """A topology from a YAML file of nodes and links, or from inline ``nodes`` and ``links``."""
    if file is not None:
        if data:
            raise TopologyError(
                f"give either 'file' or inline nodes and links, not both ({sorted(data)})"
            )
        return load_custom(file)
    return build_custom(data)


def build_custom(data: Any, default_name: str = "custom") -> Topology:
    """The :class:`Topology` described by the mapping *data* (already parsed YAML)."""
    _check_keys(data, TOP_KEYS, "")
    for required in ("nodes", "links"):
        if required not in data:
            raise TopologyError(f"missing required key {required!r}", key=required)
    routing = data.get("routing", "shortest")
    if routing not in ROUTERS:
        raise TopologyError(f"expected one of {sorted(ROUTERS)}, got {routing!r}", key="routing")
    graph = nx.Graph()
    _add_nodes(graph, _list(data["nodes"], "nodes"))
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise TopologyError(f"expected true or false, got {force!r}", key="force")
    for i, link in enumerate(_list(data["links"], "links", allow_empty=True)):
        _add_link(graph, link, f"links[{i}]", force)
    name = str(data.get("name", default_name))
    try:
        return Topology(
            name,
            graph,
            ROUTERS[routing](),
            description=str(data.get("description", "")),
            meta={"builder": "custom"},
        )
    except TopologyError as error:
        raise TopologyError(error.message, key=error.key) from None


def _list(value: Any, key: str, allow_empty: bool = False) -> list[Any]:
    if not isinstance(value, list) or not (value or allow_empty):
        raise TopologyError(f"expected a non-empty list, got {value!r}", key=key)
    return value


def _check_keys(item: Any, allowed: tuple[str, ...], key: str) -> None:
    if not isinstance(item, Mapping):
        raise TopologyError(f"expected a mapping, got {item!r}", key=key or None)
    for k in item:
        if k not in allowed:
            where = f"{key}.{k}" if key else str(k)
            raise TopologyError(f"unknown key {k!r}{did_you_mean(k, allowed)}", key=where)


def _add_nodes(graph: nx.Graph, nodes: list[Any]) -> None:
    explicit = any(isinstance(n, Mapping) and "rank" in n for n in nodes)
    next_rank = 0
    for i, node in enumerate(nodes):
        key = f"nodes[{i}]"
        _check_keys(node, NODE_KEYS, key)
        name = node.get("name")
        if not isinstance(name, (str, int)) or isinstance(name, bool):
            raise TopologyError(f"expected a node name, got {name!r}", key=f"{key}.name")
        if name in graph:
            raise TopologyError(f"duplicate node name {name!r}", key=f"{key}.name")
        kind = node.get("kind")
        if kind not in NODE_KINDS:
            raise TopologyError(
                f"expected a node kind in {sorted(NODE_KINDS)}, got {kind!r}", key=f"{key}.kind"
            )
        level = node.get("level", 0 if kind == "gpu" else 1)
        if isinstance(level, bool) or not isinstance(level, int):
            raise TopologyError(f"expected an integer level, got {level!r}", key=f"{key}.level")
        attrs: dict[str, Any] = {"kind": kind, "level": level}
        if kind == "gpu":
            rank = node.get("rank", None if explicit else next_rank)
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
                raise TopologyError(
                    f"expected a GPU rank >= 0 (give every GPU a rank or none), got {rank!r}",
                    key=f"{key}.rank",
                )
            attrs["rank"] = rank
            next_rank += 1
        elif "rank" in node:
            raise TopologyError(f"only GPU nodes carry a rank, not a {kind!r}", key=f"{key}.rank")
        graph.add_node(name, **attrs)


def _add_link(graph: nx.Graph, link: Any, key: str, force: bool = False) -> None:
    _check_keys(link, LINK_KEYS, key)
    for end in ("a", "b"):
        if end not in link:
            raise TopologyError("missing required key", key=f"{key}.{end}")
        if link[end] not in graph:
            raise TopologyError(
                f"unknown node {link[end]!r}{did_you_mean(link[end], graph.nodes)}",
                key=f"{key}.{end}",
            )
    if link["a"] == link["b"]:
        raise TopologyError(f"a link joins two different nodes, got {link['a']!r} twice", key=key)
    if graph.has_edge(link["a"], link["b"]):
        raise TopologyError(
            f"duplicate link {link['a']!r}-{link['b']!r}; give one link its total bandwidth",
            key=key,
        )
    kind = link.get("kind", "custom")
    if kind not in LINK_KINDS:
        raise TopologyError(
            f"expected a link kind in {sorted(LINK_KINDS)}, got {kind!r}", key=f"{key}.kind"
        )
    if "bandwidth" not in link:
        raise TopologyError("missing required key (e.g. '25 GB/s')", key=f"{key}.bandwidth")
    bandwidth = _quantity(parse_bandwidth_text, link["bandwidth"], f"{key}.bandwidth", force)
    latency = _quantity(parse_time_text, link.get("latency", "0 s"), f"{key}.latency", force)
    graph.add_edge(link["a"], link["b"], kind=kind, bandwidth_Bps=bandwidth, latency_s=latency)


def _quantity(parse: Callable[..., float], value: Any, key: str, force: bool) -> float:
    """*parse*'s SI value of *value* (written with its unit, in range unless *force*)."""
    try:
        return float(parse(value, force=force))
    except AtpsimError as error:
        raise TopologyError(error.message, key=key) from None
