"""`torus`: GPUs on an n-dimensional torus with wrap-around links, routed dimension-order.

The paper's IC6 (Figure 7(b)) is a 2D torus of 25 GB/s links; TPU v4 is a 3D torus
(measured-data.md "Links"). A dimension of size 2 gets one link per pair of neighbours (the
two wrap directions are the same link), a dimension of size 1 none.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from atpsim.errors import TopologyError
from atpsim.topology.builders._common import add_gpu, add_link
from atpsim.topology.builders.base import register_builder
from atpsim.topology.graph import Topology
from atpsim.topology.params import BuilderParam, bandwidth_param, count_param, time_param
from atpsim.topology.routing import DimensionOrderRouter, rank_of

#: Figure 7(b) of the paper: 25 GB/s per torus link (per direction).
DEFAULT_LINK_BANDWIDTH_BPS = 25e9
#: Assumption (the paper gives none): 1 us per torus hop, of the order of NCCL's per-step
#: network latency constants (measured-data.md, "NCCL's own latency model" [C]).
DEFAULT_LINK_LATENCY_S = 1e-6


def square_dims(n_gpus: int) -> tuple[int, int]:
    """The most square 2D shape d x e = *n_gpus* with d <= e (e.g. 32 -> 4 x 8, 7 -> 1 x 7)."""
    n_gpus = count_param(n_gpus, "gpus")
    d = math.isqrt(n_gpus)
    while n_gpus % d:
        d -= 1
    return d, n_gpus // d


def coords_of(rank: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Inverse of :func:`~atpsim.topology.routing.rank_of`."""
    coords = []
    for size in reversed(dims):
        rank, c = divmod(rank, size)
        coords.append(c)
    return tuple(reversed(coords))


def _check_dims(dims: Any) -> tuple[int, ...]:
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = (dims,)
    if not isinstance(dims, (list, tuple)) or not dims:
        raise TopologyError(
            f"expected a list of dimension sizes such as [4, 4], got {dims!r}", key="dims"
        )
    return tuple(count_param(d, f"dims[{i}]") for i, d in enumerate(dims))


TORUS_PARAMS = (
    BuilderParam("dims", "dims", "the shape, e.g. 32x32 or 16x16x16; GPU rank = row-major index"),
    BuilderParam("link_bandwidth_Bps", "bandwidth", "every link, per direction (paper Fig. 7(b))"),
    BuilderParam("link_latency_s", "time", "every hop (an assumption; the paper gives none)"),
)


@register_builder("torus", TORUS_PARAMS)
def torus(
    dims: Any = (4, 4),
    link_bandwidth_Bps: Any = DEFAULT_LINK_BANDWIDTH_BPS,
    link_latency_s: Any = DEFAULT_LINK_LATENCY_S,
) -> Topology:
    """GPUs on a torus with wrap-around links, routed dimension-order.

    *dims* is the shape (e.g. ``(32, 32)`` or ``(16, 16, 16)``); GPU rank = row-major index of
    its coordinates (node attribute ``coords``); every link has *link_bandwidth_Bps* per
    direction and *link_latency_s*."""
    dims = _check_dims(dims)
    bandwidth = bandwidth_param(link_bandwidth_Bps, "link_bandwidth_Bps")
    latency = time_param(link_latency_s, "link_latency_s")
    n = math.prod(dims)
    graph = nx.Graph()
    for rank in range(n):
        add_gpu(graph, rank, coords=coords_of(rank, dims))
    for rank in range(n):
        coords = coords_of(rank, dims)
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            step = list(coords)
            step[axis] = (coords[axis] + 1) % size
            add_link(
                graph, f"gpu{rank}", f"gpu{rank_of(tuple(step), dims)}", "torus", bandwidth, latency
            )
    shape = "x".join(map(str, dims))
    return Topology(
        f"torus:{shape}",
        graph,
        DimensionOrderRouter(dims),
        description=(
            f"{len(dims)}D torus {shape} ({n} GPUs), wrap-around links of "
            f"{bandwidth / 1e9:g} GB/s per direction, dimension-order routing"
        ),
        meta={"builder": "torus", "dims": dims},
    )
