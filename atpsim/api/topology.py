"""The link graph through the API: build a topology, summarize it, trace a route, derive the
paper's hierarchical communication matrix, list what can be built.

Every function takes a topology *spec* as the command line and scenario files do: a preset
(``"ic1"``, ``"dgx-a100"``), a builder spec (``"torus:32x32"``, ``"ib-cluster:4x8"``), a YAML
path, or a mapping (``{"builder": "torus", "dims": [4, 4]}``); *devices* sizes a scalable
preset or builder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from atpsim.analytic.hcm import HierarchicalCommMatrix, derive_hcm
from atpsim.analytic.render import format_hcm as render_hcm
from atpsim.analytic.render import hcm_to_dict
from atpsim.errors import TopologyError, param
from atpsim.topology.graph import Topology
from atpsim.topology.presets import preset_info, preset_names
from atpsim.topology.registry import Builder, builder_info, builder_names
from atpsim.topology.spec import load_topology as load_spec
from atpsim.topology.summary import RouteSummary, TopologySummary, describe_route, summarize
from atpsim.units import format_bandwidth, format_time, parse_bandwidth

TopologySpec = str | Mapping[str, Any]

__all__ = ["Builder", "parse_bandwidth", "Topology", "builders", "draw_topology", "format_hcm", "hcm", "hcm_as_dict", "load_topology",
           "format_bandwidth", "format_time", "presets", "route", "topology_summary"]


def load_topology(spec: TopologySpec | Topology, devices: int | None = None) -> Topology:
    """The :class:`Topology` *spec* names, sized to *devices* GPUs where it leaves size open
    (a Topology passes through, so every function here takes either)."""
    if isinstance(spec, Topology):
        return spec
    source = spec if isinstance(spec, str) else None
    check_devices(devices)
    topology = load_spec(spec if isinstance(spec, str) else dict(spec), n_gpus=devices, source=source)
    if devices is not None and topology.n_gpus != devices:
        raise TopologyError(
            f"{topology.name} has {topology.n_gpus} GPUs, fixed by its name or size; leave "
            f"{param('devices')} out, or name a builder without a size (e.g. 'torus') or a "
            f"scalable preset (e.g. 'ic5'), got {devices}",
            param="devices",
        )
    return topology


def check_devices(devices: int | None, key: str | None = None) -> None:
    """*devices* is None (the topology's own size) or a GPU count >= 1 (an error at *key*,
    else about the *devices* parameter)."""
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise TopologyError(f"expected a GPU count >= 1, got {devices!r}", key=key, param="devices")


def topology_summary(spec: TopologySpec | Topology, devices: int | None = None) -> TopologySummary:
    """GPUs, switches, links grouped by kind and bandwidth, the router and the wiring."""
    return summarize(load_topology(spec, devices))


def route(spec: TopologySpec | Topology, src: int, dst: int, devices: int | None = None) -> RouteSummary:
    """The hops a transfer from GPU rank *src* to GPU rank *dst* crosses, with its latency
    (seconds) and bottleneck bandwidth (bytes/s)."""
    return describe_route(load_topology(spec, devices), src, dst)


def hcm(spec: TopologySpec | Topology, devices: int | None = None) -> HierarchicalCommMatrix:
    """The paper's hierarchical communication matrix (Section 3.4) derived from the graph."""
    return derive_hcm(load_topology(spec, devices))


def format_hcm(matrix: HierarchicalCommMatrix, all_values: str = " (hcm_as_dict has all)") -> str:
    """The matrix as text: per layer its ranks, the P2P matrix and group bandwidth (GB/s); a
    list of values cut short ends with *all_values*."""
    return render_hcm(matrix, all_values)


def hcm_as_dict(matrix: HierarchicalCommMatrix) -> dict[str, Any]:
    """The matrix as JSON-able data (bytes/s)."""
    return hcm_to_dict(matrix)


def presets() -> list[tuple[str, str]]:
    """Every topology preset's name and description."""
    return [(name, str(preset_info(name).get("description", ""))) for name in preset_names()]


def builders() -> list[Builder]:
    """Every registered topology builder with its declared parameters (name, type, unit,
    default, description), as ``atpsim topo list`` prints them."""
    return [builder_info(name) for name in builder_names()]


def draw_topology(topology: Topology, path: str | Path) -> str:
    """Draw *topology* to *path* (PNG); returns a note on what was left out, or ''."""
    # lazy: matplotlib only when a figure is drawn
    from atpsim.report.topology_plot import draw_topology as draw

    return draw(topology, path) or ""
