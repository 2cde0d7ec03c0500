"""Deterministic routers: a router maps (topology, source node, destination node) to a path.

Routers are small pluggable objects so that a builder can pick the one that fits its shape:
shortest path by hop count for small irregular graphs, dimension-order routing on tori,
up*/down* (tree) routing with destination-mod-k uplink choice on switched fabrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import networkx as nx

if TYPE_CHECKING:
    from atpsim.topology.graph import Topology


class Router(Protocol):
    """Anything with ``path(topology, src, dst) -> [src, ..., dst]`` (node names)."""

    name: str

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]: ...


class ShortestPathRouter:
    """Fewest hops; ties broken by networkx's BFS order, which follows insertion order."""

    name = "shortest"

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]:
        return list(nx.shortest_path(topology.graph, src, dst))


class DimensionOrderRouter:
    """Dimension-order routing on a torus of shape *dims*: correct dimension 0, then 1, ...; in
    each, go the shorter way round, and the positive way on a tie (exactly half way). GPU nodes
    carry ``coords``; the GPU at coordinates c has the row-major rank of c. The route length is
    the wrapped Manhattan distance, and no search is needed."""

    name = "dimension-order"

    def __init__(self, dims: tuple[int, ...]):
        self.dims = tuple(dims)

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]:
        here = list(topology.graph.nodes[src]["coords"])
        target = topology.graph.nodes[dst]["coords"]
        path = [src]
        for axis, size in enumerate(self.dims):
            forward = (target[axis] - here[axis]) % size
            backward = size - forward
            step, hops = (1, forward) if forward <= backward else (-1, backward)
            for _ in range(hops if forward else 0):
                here[axis] = (here[axis] + step) % size
                path.append(topology.gpu_nodes[rank_of(here, self.dims)])
        return path


def rank_of(coords: Sequence[int], dims: tuple[int, ...]) -> int:
    """Row-major index of *coords* in a torus of shape *dims* (the last dimension varies fastest)."""
    rank = 0
    for c, size in zip(coords, dims, strict=True):
        rank = rank * size + c
    return rank


class UpDownState:
    """What :class:`UpDownRouter` precomputes once per topology: levels, up/down/peer neighbours,
    the GPU ranks below each node, and per-link bandwidths."""

    def __init__(self, topology: Topology):
        graph = topology.graph
        level = {n: int(d.get("level", 0)) for n, d in graph.nodes(data=True)}
        self.ups: dict[Any, list[Any]] = {n: [] for n in graph}
        self.downs: dict[Any, list[Any]] = {n: [] for n in graph}
        self.peers: dict[Any, list[Any]] = {n: [] for n in graph}
        self.adjacent: dict[Any, set[Any]] = {n: set(graph.adj[n]) for n in graph}
        self.bandwidth: dict[tuple[Any, Any], float] = {}
        for u, v, data in graph.edges(data=True):
            self.bandwidth[(u, v)] = self.bandwidth[(v, u)] = data["bandwidth_Bps"]
            if level[u] == level[v]:
                self.peers[u].append(v)
                self.peers[v].append(u)
            else:
                low, high = (u, v) if level[u] < level[v] else (v, u)
                self.ups[low].append(high)
                self.downs[high].append(low)
        self.rank = {n: d["rank"] for n, d in graph.nodes(data=True) if d["kind"] == "gpu"}
        self.below: dict[Any, frozenset[int]] = {}
        for node in sorted(graph, key=lambda n: level[n]):
            ranks = {self.rank[node]} if node in self.rank else set()
            for child in self.downs[node]:
                ranks |= self.below[child]
            self.below[node] = frozenset(ranks)
        self.down_choice: dict[Any, dict[int, list[Any]]] = {}

    def best(self, node: Any, candidates: list[Any]) -> list[Any]:
        """The *candidates* joined to *node* by the fastest link, and among those the ones with
        the fewest GPUs below (the nearest common ancestor)."""
        key = {c: (-self.bandwidth[(node, c)], len(self.below[c])) for c in candidates}
        smallest = min(key.values())
        return [c for c in candidates if key[c] == smallest]

    def downs_towards(self, node: Any, dst_rank: int) -> list[Any]:
        """The best children of *node* that have GPU *dst_rank* below them (cached per node)."""
        table = self.down_choice.get(node)
        if table is None:
            by_rank: dict[int, list[Any]] = {}
            for child in self.downs[node]:
                for rank in self.below[child]:
                    by_rank.setdefault(rank, []).append(child)
            table = {rank: self.best(node, children) for rank, children in by_rank.items()}
            self.down_choice[node] = table
        return table[dst_rank]


class UpDownRouter:
    """Up*/down* routing on switched fabrics (stars, trees, fat trees) without a search per pair.

    Nodes carry a ``level`` (GPUs 0, switches above). A GPU directly linked to the destination
    takes that link. Otherwise the route climbs until it reaches a node with the destination
    below it, then descends. Climbing prefers uplinks with the destination below, else uplinks
    that lead higher (or across a peer link at the top); descending takes the child with the
    destination below. Among equals the fastest link wins, then the fewest GPUs below, then the
    destination rank modulo the number of choices picks one uplink (source rank modulo k on the
    way down), so routes are deterministic and spread over parallel uplinks.
    """

    name = "up-down"

    def __init__(self) -> None:
        self._state: UpDownState | None = None
        self._topology: Topology | None = None

    def _prepare(self, topology: Topology) -> UpDownState:
        if self._state is None or self._topology is not topology:
            self._state = UpDownState(topology)
            self._topology = topology
        return self._state

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]:
        state = self._prepare(topology)
        if src == dst:
            return [src]
        if dst in state.adjacent[src]:
            return [src, dst]
        return self.extend(topology, [src], dst, state.rank[src])

    def extend(self, topology: Topology, path: list[Any], dst: Any, spread: int) -> list[Any]:
        """Continue *path* (which may end at a switch or socket) up and down to GPU *dst*;
        *spread* (the source rank) picks among equal children on the way down."""
        state = self._prepare(topology)
        dst_rank = state.rank[dst]
        node = path[-1]
        while dst_rank not in state.below[node]:
            node = self._climb(state, node, dst_rank)
            path.append(node)
            if len(path) > len(state.ups):
                raise RuntimeError(f"up/down routing from {path[0]} to {dst} does not terminate")
        while node != dst:
            choices = [dst] if dst in state.adjacent[node] else state.downs_towards(node, dst_rank)
            node = choices[spread % len(choices)]
            path.append(node)
        return path

    @staticmethod
    def _climb(state: UpDownState, node: Any, dst_rank: int) -> Any:
        """The next hop up (or across, at the top) from *node* towards GPU *dst_rank*."""
        choices = UpDownRouter.climb_choices(state, node, dst_rank)
        return choices[dst_rank % len(choices)]

    @staticmethod
    def climb_choices(state: UpDownState, node: Any, dst_rank: int) -> list[Any]:
        """The equal best hops up (or across) from *node* towards GPU *dst_rank*; they depend
        on *dst_rank* only through which of *node*'s up and peer neighbours have it below."""
        ups, peers = state.ups[node], state.peers[node]
        candidates = (
            [u for u in ups if dst_rank in state.below[u]]
            or [u for u in ups if state.ups[u] or state.peers[u]]
            or [p for p in peers if dst_rank in state.below[p]]
            or peers
            or ups
        )
        if not candidates:
            raise RuntimeError(f"up/down routing is stuck at {node}")
        return state.best(node, candidates)


class HostStagedRouter:
    """Every GPU-to-GPU transfer staged through host memory, as with ``NCCL_P2P_DISABLE=1``: up
    from the source GPU to its CPU socket, into and out of that socket's host-memory node (a node
    of kind 'cpu' that the socket node names in its ``host_memory`` attribute), then up*/down*
    to the destination (across the socket link when it sits under the other socket)."""

    name = "host-staged"

    def __init__(self) -> None:
        self._updown = UpDownRouter()

    def path(self, topology: Topology, src: Any, dst: Any) -> list[Any]:
        if src == dst:
            return [src]
        graph = topology.graph
        path, node = [src], src
        while "host_memory" not in graph.nodes[node]:
            ups = self._updown._prepare(topology).ups[node]
            if not ups:
                raise RuntimeError(f"{src} has no CPU socket above it to stage through")
            node = ups[0]
            path.append(node)
        path += [graph.nodes[node]["host_memory"], node]
        return self._updown.extend(topology, path, dst, graph.nodes[src]["rank"])
