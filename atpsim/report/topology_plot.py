"""Draw a topology graph with matplotlib: tori as grids, switched fabrics layered by ``level``.

Graphs above :data:`MAX_NODES` nodes are drawn as a sample (a corner block of a torus, or the
switches with the first GPUs under them) and the figure title says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from atpsim.topology.graph import Topology

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MAX_NODES = 512
NODE_COLORS = {
    "gpu": "#76b900",
    "cpu": "#4c72b0",
    "pcie_switch": "#dd8452",
    "nvswitch": "#8172b3",
    "nvl_switch": "#8172b3",
    "nic": "#937860",
    "ib_leaf": "#c44e52",
    "ib_spine": "#da8bc3",
    "switch": "#8c8c8c",
}
LINK_COLORS = {
    "pcie": "#dd8452",
    "socket": "#4c72b0",
    "host": "#55a868",
    "nvlink": "#76b900",
    "nvlink_network": "#8172b3",
    "ib": "#c44e52",
    "torus": "#76b900",
    "custom": "#8c8c8c",
}


def draw_topology(topology: Topology, path: str | Path) -> str:
    """Write a PNG of *topology* to *path*; returns a note when only a sample was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph, note = _sample(topology)
    positions = _layout(topology, graph)
    size = min(16.0, 4.0 + math.sqrt(graph.number_of_nodes()) * 0.8)
    fig, ax = plt.subplots(figsize=(size, size * 0.75))
    _draw_edges(ax, graph, positions)
    _draw_nodes(ax, graph, positions)
    title = topology.name + (f" ({note})" if note else "")
    ax.set_title(title)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return note


def _sample(topology: Topology) -> tuple[nx.Graph, str]:
    graph = topology.graph
    if graph.number_of_nodes() <= MAX_NODES:
        return graph, ""
    dims = topology.meta.get("dims")
    if dims:
        keep = [
            n
            for n in topology.gpu_nodes
            if all(c < 16 for c in graph.nodes[n]["coords"][:2])
            and all(c == 0 for c in graph.nodes[n]["coords"][2:])
        ]
        what = "a 16x16 corner block"
    else:
        switches = [n for n, d in graph.nodes(data=True) if d["kind"] != "gpu"][: MAX_NODES // 2]
        keep = switches + topology.gpu_nodes[: MAX_NODES - len(switches)]
        what = f"{len(switches)} switches/hosts and the first {len(keep) - len(switches)} GPUs"
    shown = graph.subgraph(keep)
    return shown, f"sample: {what} of {graph.number_of_nodes()} nodes"


def _layout(topology: Topology, graph: nx.Graph) -> dict[Any, tuple[float, float]]:
    if topology.meta.get("dims"):
        dims = topology.meta["dims"]
        return {n: _grid_position(graph.nodes[n]["coords"], dims) for n in graph}
    return _layered(graph)


def _layered(graph: nx.Graph) -> dict[Any, tuple[float, float]]:
    """Rows by ``level``; GPUs in rank order, each higher node placed at the mean position of
    its neighbours below (a barycentre pass), so trees read without crossings."""
    levels: dict[int, list[Any]] = {}
    for node, data in graph.nodes(data=True):
        levels.setdefault(int(data.get("level", 0)), []).append(node)
    positions: dict[Any, tuple[float, float]] = {}
    for level in sorted(levels):
        nodes = levels[level]

        def centre(node: Any, level: int = level) -> float:
            below = [positions[n][0] for n in graph.adj[node] if n in positions]
            return sum(below) / len(below) if below else 0.5

        if level != min(levels):
            nodes = sorted(nodes, key=centre)
        for i, node in enumerate(nodes):
            positions[node] = ((i + 0.5) / len(nodes), float(level))
    return positions


def _grid_position(coords: tuple[int, ...], dims: tuple[int, ...]) -> tuple[float, float]:
    """Dimension 0 down the rows, 1 across; further dimensions tile the grids side by side."""
    row = coords[0]
    col = coords[1] if len(coords) > 1 else 0
    offset = 0
    if len(dims) > 2:
        offset = coords[2] * (dims[1] + 1)
    return float(col + offset), float(-row)


def _draw_edges(ax: Axes, graph: nx.Graph, positions: dict[Any, tuple[float, float]]) -> None:
    bandwidths = [d["bandwidth_Bps"] for _, _, d in graph.edges(data=True)] or [1.0]
    top = max(bandwidths)
    seen: set[str] = set()
    for u, v, data in graph.edges(data=True):
        (x0, y0), (x1, y1) = positions[u], positions[v]
        far = abs(x0 - x1) + abs(y0 - y1) > 1.5 and data["kind"] == "torus"
        kind = data["kind"]
        xs, ys = _arc(x0, y0, x1, y1) if far else ([x0, x1], [y0, y1])
        ax.plot(
            xs,
            ys,
            color=LINK_COLORS.get(kind, "#8c8c8c"),
            linewidth=0.6 + 2.4 * math.log1p(data["bandwidth_Bps"]) / math.log1p(top),
            linestyle="--" if far else "-",
            alpha=0.5 if far else 0.8,
            zorder=1,
            label=None if kind in seen else kind,
        )
        seen.add(kind)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="links")


def _arc(x0: float, y0: float, x1: float, y1: float) -> tuple[list[float], list[float]]:
    """A wrap-around link as a quadratic curve bulging out of the grid, so it does not hide
    the links it would otherwise run along."""
    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
    length = math.hypot(x1 - x0, y1 - y0)
    bulge = 0.15 * length + 0.3
    cx, cy = (mx, my + bulge) if abs(y1 - y0) < 1e-9 else (mx - bulge, my)
    ts = [i / 24 for i in range(25)]
    xs = [(1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t**2 * x1 for t in ts]
    ys = [(1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t**2 * y1 for t in ts]
    return xs, ys


def _draw_nodes(ax: Axes, graph: nx.Graph, positions: dict[Any, tuple[float, float]]) -> None:
    labels = graph.number_of_nodes() <= 64
    for node, data in graph.nodes(data=True):
        x, y = positions[node]
        ax.scatter(
            [x],
            [y],
            s=120 if labels else 20,
            color=NODE_COLORS.get(data["kind"], "#8c8c8c"),
            zorder=2,
        )
        if labels:
            ax.annotate(
                str(node),
                (x, y),
                fontsize=6,
                ha="center",
                va="bottom",
                xytext=(0, 5),
                textcoords="offset points",
            )


def draw_link_usage(topology: Topology, utilization: dict[tuple[str, str], float],
                    busiest: list[str], path: str | Path, title: str) -> Path:
    """A PNG of the cables that carried traffic (*utilization*: (node, node) -> busiest
    direction's busy share of the iteration), coloured from idle to always busy, the links
    named in *busiest* (``src->dst``) labelled. Above :data:`MAX_NODES` nodes, the busiest
    cables' nodes are kept first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    ranked = sorted(utilization.items(), key=lambda kv: -kv[1])
    nodes: dict[str, None] = {}
    for (u, v), _ in ranked:
        if len(nodes) >= MAX_NODES:
            break
        nodes.update({u: None, v: None})
    graph = topology.graph.subgraph(nodes)
    positions = _layered(graph)
    fig, ax = plt.subplots(figsize=(min(16.0, 5.0 + math.sqrt(len(nodes))), 7.0))
    top = max((share for _, share in ranked), default=0.0) or 1.0
    cmap, norm = colormaps["inferno_r"], Normalize(0.0, top)
    for (u, v), share in ranked:
        if u in positions and v in positions:
            (x0, y0), (x1, y1) = positions[u], positions[v]
            ax.plot([x0, x1], [y0, y1], color=cmap(norm(share)), linewidth=0.8 + 3.0 * share / top, zorder=1)
    _draw_nodes(ax, graph, positions)
    for i, name in enumerate(busiest):
        u, v = name.split("->")
        if u in positions and v in positions:
            (x0, y0), (x1, y1) = positions[u], positions[v]
            ax.annotate(f"{i + 1}. {name}", ((x0 + x1) / 2, (y0 + y1) / 2), fontsize=7,
                        xytext=(12, 14 * (i + 1)), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "lw": 0.5},
                        bbox={"boxstyle": "round", "fc": "white", "alpha": 0.85})  # fmt: skip
    fig.colorbar(ScalarMappable(norm, cmap), ax=ax, label="busy share of the iteration")
    shown = "" if len(nodes) >= len({n for pair in utilization for n in pair}) else " (busiest first)"
    ax.set_title(title + shown)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
