"""Channels: the rings NCCL's topology search lays over a group, one per NIC (rail).

NCCL runs a collective on C *channels*, each a ring over every rank of the group, and splits
the buffer over them (NVIDIA/nccl ``src/graph/search.cc``, ``rings.cc``). Between nodes each
channel's ring enters and leaves a node through the GPUs closest to one NIC, so C channels on
C NICs cross the fabric C times in parallel; inside a node the ring follows NVLink or NVSwitch
(any order is one hop on a switch). A plain *rank-order* ring instead crosses between nodes
wherever the group's order happens to, through the NIC of whichever GPU is there: on an
``ib-cluster`` with 4 NICs per node it uses one NIC per node.

Here a group's *layout* is read from the topology (each GPU's ``node`` attribute, and the NIC
it reaches over one link), and :func:`ring_orders` returns one order of local positions per
channel. :func:`channel_ring_pattern` turns them into a schedule pattern: channel ``c`` is lane
``c``, a ring over its order moving ``n / (C p)`` per step, so channels never wait for each
other and share links by max-min like any other flows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Pattern, Steps, repeat, step
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology

#: Ring steps per op (all-reduce = reduce-scatter then all-gather), ``p`` ranks.
RING_STEPS = {"all_reduce": lambda p: 2 * (p - 1), "reduce_scatter": lambda p: p - 1,
              "all_gather": lambda p: p - 1}


@dataclass(frozen=True)
class GroupLayout:
    """Where each member of a group sits: *node[i]* the node of local position ``i`` and
    *nic[i]* the NIC it reaches over one link ('' where it has none)."""

    node: tuple[int, ...]
    nic: tuple[str, ...]

    @property
    def n_nodes(self) -> int:
        return len(set(self.node))

    def by_node(self) -> list[list[int]]:
        """Local positions per node, nodes in order of first appearance."""
        nodes: dict[int, list[int]] = {}
        for i, n in enumerate(self.node):
            nodes.setdefault(n, []).append(i)
        return list(nodes.values())

    def rails(self, members: Sequence[int]) -> list[str]:
        """The distinct NICs of *members*, in order of first appearance ('' dropped)."""
        return list(dict.fromkeys(self.nic[i] for i in members if self.nic[i]))


def group_layout(topology: Topology, group: Sequence[int]) -> GroupLayout:
    """The layout of *group* (GPU ranks) on *topology*; a GPU without a ``node`` attribute is
    on node 0 (a single-node fabric)."""
    graph = topology.graph
    nodes, nics = [], []
    for rank in group:
        gpu = topology.gpu(int(rank))
        nodes.append(int(graph.nodes[gpu].get("node", 0)))
        near = sorted(str(v) for v in graph.neighbors(gpu) if graph.nodes[v]["kind"] == "nic")
        nics.append(near[0] if near else "")
    return GroupLayout(tuple(nodes), tuple(nics))


def rail_count(layout: GroupLayout) -> int:
    """Channels a NIC-aware ring uses: the fewest distinct NICs any node of the group reaches
    (1 on one node, or where a node has no NIC)."""
    if layout.n_nodes < 2:
        return 1
    return max(1, min(len(layout.rails(m)) for m in layout.by_node()))


def ring_orders(layout: GroupLayout, channels: int | None = None) -> tuple[tuple[int, ...], ...]:
    """One ring order of local positions per channel (default: :func:`rail_count`). Channel
    ``c`` uses rail ``c mod rails`` of every node: it enters the node at the first member
    closest to that NIC, visits the node's other members in group order and leaves at the last
    member closest to that NIC (:func:`_ends`); nodes follow in order of first appearance."""
    rails = rail_count(layout)
    count = rails if channels is None else check_channels(channels)
    if layout.n_nodes < 2:
        return tuple(tuple(range(len(layout.node))) for _ in range(count))
    return tuple(tuple(_channel_order(layout, c % rails)) for c in range(count))


def _channel_order(layout: GroupLayout, rail: int) -> list[int]:
    order: list[int] = []
    for members in layout.by_node():
        nics = layout.rails(members)
        entry, leave = _ends(layout, members, nics, rail)
        middle = [i for i in members if i not in (entry, leave)]
        order += [entry, *middle] + ([leave] if leave != entry else [])
    return order


def _ends(layout: GroupLayout, members: list[int], nics: list[str], rail: int) -> tuple[int, int]:
    """(entry, exit) of a node for channel *rail*: the first and last members on that rail's
    NIC; where only one member reaches it (a NIC per GPU), the exit is the member on the
    paired rail (``rail ^ 1``, as GPUs sharing a PCIe switch pair their NICs in a DGX), so
    every NIC still carries one channel each way."""
    def near(k: int) -> list[int]:
        nic = nics[k] if k < len(nics) else ""
        return [i for i in members if layout.nic[i] == nic] or members

    here = near(rail)
    if len(here) > 1 or len(nics) < 2:
        return here[0], here[-1]
    pair = rail ^ 1 if (rail ^ 1) < len(nics) else (rail + 1) % len(nics)
    return here[0], near(pair)[0]


#: NCCL's most channels per communicator (MAXCHANNELS, src/include/device.h of NVIDIA/nccl).
MAX_CHANNELS = 64


def check_channels(channels: int, key: str | None = None) -> int:
    """*channels* as an int from 1 to :data:`MAX_CHANNELS`; a SimulationError naming the bad
    value (at *key*, else about the *channels* parameter) otherwise."""
    if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) \
            or not 1 <= channels <= MAX_CHANNELS:  # fmt: skip
        raise SimulationError(f"expected a channel count >= 1 and <= {MAX_CHANNELS} (NCCL's "
                              f"MAXCHANNELS), got {channels!r}", key=key, param="channels")  # fmt: skip
    return int(channels)


def channel_ring_pattern(op: str, orders: tuple[tuple[int, ...], ...], nbytes: float) -> Pattern:
    """*op* as ``len(orders)`` rings side by side, ring ``c`` over *orders[c]* in lane ``c``,
    each carrying ``n / C`` of the buffer: ``RING_STEPS[op](p)`` steps of ``n / (C p)``."""
    if op not in RING_STEPS:
        raise SimulationError(f"no channel ring for {op}; expected one of {sorted(RING_STEPS)}")
    p, count = len(orders[0]), len(orders)
    if p < 2:
        return Steps.of(())
    src = np.concatenate([np.asarray(o) for o in orders])
    dst = np.concatenate([np.roll(np.asarray(o), -1) for o in orders])
    lanes = np.repeat(np.arange(count), p) if count > 1 else None
    return repeat(step(src, dst, nbytes / count / p, lanes), RING_STEPS[op](p))


def hop_classes(topology: Topology, group: Sequence[int], order: Sequence[int],
                layout: GroupLayout | None = None) -> list[str]:
    """The class of each hop of the ring *order* (local positions of *group*): 'net' between
    nodes, 'pcie' inside a node when the route uses a PCIe, host or socket link, else
    'nvlink' (NCCL's three per-step latency classes, tuning.cc). *layout* is *group*'s
    (:func:`group_layout`), worked out here when not given."""
    hops = list(zip(order, list(order[1:]) + [order[0]], strict=True))
    return pair_classes(topology, group, hops, layout)


#: NCCL's per-step latency classes, fastest first: a step is as slow as its slowest hop.
HOP_CLASSES = ("nvlink", "pcie", "net")
#: Link kinds a hop is counted 'pcie' for (:func:`hop_classes`).
PCIE_KINDS = frozenset({"pcie", "host", "socket"})


def pair_classes(topology: Topology, group: Sequence[int], pairs: Sequence[tuple[int, int]],
                 layout: GroupLayout | None = None) -> list[str]:
    """The class (:func:`hop_classes`) of each (src, dst) pair of local positions."""
    found = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    codes = pair_class_codes(topology, group, found[:, 0], found[:, 1], layout)
    return [HOP_CLASSES[c] for c in codes.tolist()]


def pair_class_codes(topology: Topology, group: Sequence[int], src: np.ndarray, dst: np.ndarray,
                     layout: GroupLayout | None = None) -> np.ndarray:
    """The class of each pair ``src[i] -> dst[i]`` of local positions of *group* as an index
    into :data:`HOP_CLASSES` (:func:`hop_classes`), on arrays: a pair across nodes is 'net'
    without routing; pairs inside a node are routed (each distinct pair once, all at once,
    :func:`~atpsim.engine.routes.route_pairs`) only where *topology* has a PCIe, host or socket
    link at all, else they are 'nvlink'. *layout* is *group*'s (:func:`group_layout`)."""
    layout = layout or group_layout(topology, group)
    node = np.asarray(layout.node, dtype=np.int64)
    codes = np.where(node[src] != node[dst], HOP_CLASSES.index("net"), HOP_CLASSES.index("nvlink"))
    inside = np.flatnonzero(codes == HOP_CLASSES.index("nvlink"))
    slow = np.fromiter((k in PCIE_KINDS for k in topology.links.kind), dtype=bool,
                       count=len(topology.links))  # fmt: skip
    if len(inside) and slow.any():
        codes[inside[_through_slow_link(topology, group, src[inside], dst[inside], slow)]] = \
            HOP_CLASSES.index("pcie")
    return codes


def _through_slow_link(topology: Topology, group: Sequence[int], src: np.ndarray, dst: np.ndarray,
                       slow: np.ndarray) -> np.ndarray:
    """Whether the route of each pair ``src[i] -> dst[i]`` (local positions) crosses a link
    marked in *slow* (one flag per directed link); each distinct pair routed once."""
    ranks = np.asarray(group, dtype=np.int64)
    keys, pair = np.unique(ranks[src] * topology.n_gpus + ranks[dst], return_inverse=True)
    n = topology.n_gpus
    crosses = np.fromiter((bool(slow[list(topology.route(a, b))].any())
                           for a, b in zip((keys // n).tolist(), (keys % n).tolist(), strict=True)),
                          dtype=bool, count=len(keys))  # fmt: skip
    return crosses[pair.reshape(-1)]
