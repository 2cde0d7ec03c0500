"""Flows moving bytes over directed links at (weighted) max-min fair rates; pure numpy, no
clock: the one flow network under the reference event loop (:mod:`~atpsim.engine.solvers.
flow_loop`), for the collective engine and the joint network alike.

What it holds: the links the flows share (:class:`Fabric`: capacity per direction, and
optionally a weight per (protocol, link class): wire bytes per data byte, None meaning one),
the nodes it may carry (:class:`Nodes`, a CSR of the links each crosses), and the active
flows with their link incidences (COO: position in the active list, link, weight), updated as
flows come and go. Rates are recomputed lazily: only over the connected component (flows that
share links, transitively) of the links whose flows changed, since max-min fairness
decomposes over such components (SimGrid's lazy update); a component that keeps growing past
:data:`MAX_EXPAND_ROUNDS` rounds is solved whole (:func:`~atpsim.engine.solvers.maxmin.
weighted_max_min_rates`). Links are numbered locally in order of first use, so per-event work
is sized by the links the flows use, not by the topology (a 64 x 64 torus has 16,384 directed
links; one torus row uses 128). Every link counts the bytes that crossed it and, where asked,
the time it carried at least one flow (its busy time).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from atpsim.engine.routes import PairRoutes
from atpsim.engine.solvers.growing import Column
from atpsim.engine.solvers.maxmin import weighted_max_min_rates

#: Rounds of growing the component of changed links before solving every active flow.
MAX_EXPAND_ROUNDS = 8


@dataclass(frozen=True)
class Fabric:
    """The links the flows share: *capacity_Bps[l]* (per direction), *link_class[l]* (a
    column of *weight*) and *weight[protocol, class]*, wire bytes per data byte (None: every
    flow costs each link its own rate, plain max-min)."""

    capacity_Bps: np.ndarray
    link_class: np.ndarray
    weight: np.ndarray | None = None

    @classmethod
    def plain(cls, capacity_Bps: np.ndarray) -> Fabric:
        """Links of *capacity_Bps*, one class, unit weights."""
        return cls(np.asarray(capacity_Bps, dtype=np.float64), np.zeros(len(capacity_Bps), dtype=np.int64))


@dataclass(frozen=True)
class Nodes:
    """Nodes as the loop holds them: per node, the directed links it crosses (CSR
    *link_ptr*/*link_idx*, the fabric's link ids; none: a delay, or a flow from a rank to
    itself, done when its latency has passed), its *latency_s* (a delay's duration),
    *nbytes*, *protocol* (a row of the fabric's weights), *release_s* (the earliest time it
    may start) and dependencies (CSR *dep_ptr*/*dep_idx*)."""

    link_ptr: np.ndarray
    link_idx: np.ndarray
    latency_s: np.ndarray
    nbytes: np.ndarray
    protocol: np.ndarray
    release_s: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray

    def __len__(self) -> int:
        return len(self.latency_s)

    @classmethod
    def of(cls, routes: PairRoutes, pair: np.ndarray, nbytes: np.ndarray,
           deps: tuple[np.ndarray, np.ndarray], *, protocol: np.ndarray | None = None,
           release_s: np.ndarray | None = None, delay_s: np.ndarray | None = None) -> Nodes:
        """Node ``i`` moves *nbytes[i]* over route *pair[i]* of *routes* (-1: a delay of
        *delay_s[i]* seconds that moves nothing) after its dependencies *deps* (CSR);
        *protocol* and *release_s* default to zeros."""
        n = len(pair)
        flow = pair >= 0
        pairs = np.where(flow, pair, 0)
        lens = np.where(flow, routes.route_len[pairs], 0) if len(routes) else np.zeros(n, np.int64)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        _, links = routes.flow_links(pairs[flow]) if len(routes) else (None, np.zeros(0, np.int64))
        latency = np.where(flow, routes.latency_s[pairs], 0.0) if len(routes) else np.zeros(n)
        if delay_s is not None:
            latency = np.where(flow, latency, delay_s)
        return cls(ptr, np.asarray(links, dtype=np.int64), latency, np.asarray(nbytes, dtype=np.float64),
                   np.zeros(n, np.int64) if protocol is None else np.asarray(protocol, dtype=np.int64),
                   np.zeros(n) if release_s is None else np.asarray(release_s, dtype=np.float64),
                   deps[0].astype(np.int64), deps[1].astype(np.int64))  # fmt: skip

    def then(self, other: Nodes) -> Nodes:
        """These nodes followed by *other*'s (its dependencies shifted past these)."""
        n = len(self)
        return Nodes(np.concatenate([self.link_ptr, other.link_ptr[1:] + self.link_ptr[-1]]),
                     np.concatenate([self.link_idx, other.link_idx]),
                     np.concatenate([self.latency_s, other.latency_s]),
                     np.concatenate([self.nbytes, other.nbytes]),
                     np.concatenate([self.protocol, other.protocol]),
                     np.concatenate([self.release_s, other.release_s]),
                     np.concatenate([self.dep_ptr, other.dep_ptr[1:] + self.dep_ptr[-1]]),
                     np.concatenate([self.dep_idx, other.dep_idx + n]))  # fmt: skip


#: The type of each field of :class:`Nodes`, in order.
NODE_TYPES = (np.int64, np.int64, np.float64, np.float64, np.int64, np.float64, np.int64, np.int64)


class GrowingNodes:
    """Nodes appended set after set, as :meth:`Nodes.then` joins them, without copying the
    nodes before at every append (:mod:`~atpsim.engine.solvers.growing`)."""

    def __init__(self) -> None:
        self.columns: list[Column] = []

    def append(self, other: Nodes) -> Nodes:
        """All nodes so far followed by *other*'s (its dependencies shifted past them)."""
        values = [getattr(other, f.name) for f in fields(Nodes)]
        if not self.columns:
            self.columns = [Column(v, t) for v, t in zip(values, NODE_TYPES, strict=True)]
            return self.nodes
        link_ptr, _, latency, _, _, _, dep_ptr, _ = self.columns
        n, links, deps = len(latency), int(link_ptr.view[-1]), int(dep_ptr.view[-1])
        shifted = {0: values[0][1:] + links, 6: values[6][1:] + deps, 7: values[7] + n}
        for i, column in enumerate(self.columns):
            column.extend(shifted.get(i, values[i]))
        return self.nodes

    @property
    def nodes(self) -> Nodes:
        return Nodes(*(column.view for column in self.columns))


#: The state a :class:`FlowNetwork` grows as nodes join: per link it has used, per node.
_GROWING = {"used": np.int64, "capacity": np.float64, "link_class": np.int64, "on_link": np.int64,
            "busy_since": np.float64, "busy": np.float64, "link_bytes": np.float64,
            "node_links": np.int64, "rate": np.float64, "remaining": np.float64, "delivered": np.float64}


class FlowNetwork:
    """Active flows, their rates, remaining bytes and link incidences (weights included), over
    nodes that may grow (:meth:`extend`). *count_moved*: links count the bytes moved (rate x
    time, summed per flow in :attr:`delivered`) rather than each flow's size; *busy*: count
    each link's busy time."""

    def __init__(self, fabric: Fabric, *, count_moved: bool = False, busy: bool = True):
        self.fabric, self.count_moved, self.count_busy = fabric, count_moved, busy
        self.local = np.full(len(fabric.capacity_Bps), -1, dtype=np.int64)
        self._columns = {name: Column(np.zeros(0), dtype) for name, dtype in _GROWING.items()}
        self.used, self.link_class, self.on_link, self.node_links = (
            self._columns[name].view for name in ("used", "link_class", "on_link", "node_links"))
        self.capacity, self.busy_since, self.busy, self.link_bytes = (
            self._columns[name].view for name in ("capacity", "busy_since", "busy", "link_bytes"))
        self.rate, self.remaining, self.delivered = (
            self._columns[name].view for name in ("rate", "remaining", "delivered"))
        self.nodes: Nodes | None = None
        self.active = np.zeros(0, dtype=np.int64)
        self.owner = np.zeros(0, dtype=np.int64)  # position in self.active of each incidence
        self.link = np.zeros(0, dtype=np.int64)
        self.inc_weight: np.ndarray | None = None if fabric.weight is None else np.zeros(0)
        self.changed: list[np.ndarray] = []
        self._next_dt: float | None = None  # time_to_next_completion until rates or bytes change

    def extend(self, nodes: Nodes) -> None:
        """Take on *nodes* (all nodes so far, the new ones last): their links' and their own
        state grows at the end (:class:`~atpsim.engine.solvers.growing.Column`; *used*,
        *capacity*, ... and *node_links*, *rate*, ... are views of those columns)."""
        fresh = np.unique(nodes.link_idx[len(self.node_links):])
        fresh = fresh[self.local[fresh] < 0]
        self.local[fresh] = np.arange(len(self.used), len(self.used) + len(fresh))
        grow = np.zeros(len(fresh))
        added = len(nodes) - len(self.rate)
        for name, values in (("used", fresh), ("capacity", np.asarray(self.fabric.capacity_Bps)[fresh]),
                             ("link_class", np.asarray(self.fabric.link_class)[fresh]),
                             ("on_link", grow), ("busy_since", grow), ("busy", grow), ("link_bytes", grow),
                             ("node_links", self.local[nodes.link_idx[len(self.node_links):]]),
                             ("rate", np.zeros(added)), ("remaining", nodes.nbytes[len(nodes) - added:]),
                             ("delivered", np.zeros(added))):  # fmt: skip
            setattr(self, name, self._columns[name].extend(values))
        self.nodes = nodes

    def incidences(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in *flows*, local link) of every link *flows* cross."""
        assert self.nodes is not None
        return csr_rows(self.nodes.link_ptr, self.node_links, flows)

    def add(self, flows: np.ndarray, now: float) -> None:
        """Start moving the bytes of *flows* (their latency has been paid) at time *now*."""
        assert self.nodes is not None
        owner, links = self.incidences(flows)
        if self.count_busy:
            self._count(links, +1, now)
        self.owner = np.concatenate([self.owner, owner + len(self.active)])
        self.link = np.concatenate([self.link, links])
        if self.inc_weight is not None:
            assert self.fabric.weight is not None
            weight = self.fabric.weight[self.nodes.protocol[flows][owner], self.link_class[links]]
            self.inc_weight = np.concatenate([self.inc_weight, weight])
        self.active = np.concatenate([self.active, flows])
        self.changed.append(links)
        self._next_dt = None

    def _count(self, links: np.ndarray, sign: int, now: float) -> None:
        """Flows on each link up (+1) or down (-1): a link starts or stops being busy."""
        before = self.on_link[links] > 0
        np.add.at(self.on_link, links, sign)
        after = self.on_link[links] > 0
        if sign > 0:
            self.busy_since[links[~before & after]] = now
        else:
            ended = links[before & ~after]  # repeats add once, the same amount: no np.unique
            self.busy[ended] += now - self.busy_since[ended]

    def take_counts(self, other: FlowNetwork, now: float) -> None:
        """Add *other*'s link counts (bytes, busy time up to *now*) to these links."""
        other_bytes, other_busy = other.global_counts(now)
        ids = np.flatnonzero(other_bytes + other_busy > 0)
        self.link_bytes[self.local[ids]] += other_bytes[ids]
        self.busy[self.local[ids]] += other_busy[ids]

    def global_counts(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and busy time up to *now* per directed link of the fabric."""
        n = len(self.fabric.capacity_Bps)
        link_bytes, busy = np.zeros(n), np.zeros(n)
        link_bytes[self.used] = self.link_bytes
        busy[self.used] = self.busy + np.where(self.on_link > 0, now - self.busy_since, 0.0)
        return link_bytes, busy

    def advance(self, dt: float) -> None:
        """Move every active flow's bytes for *dt* seconds at its current rate."""
        if dt > 0 and len(self.active):
            self._next_dt = None
            moved = self.rate[self.active] * dt
            self.remaining[self.active] -= moved
            if self.count_moved:
                self.delivered[self.active] += moved

    def time_to_next_completion(self) -> float:
        """Seconds until the first active flow finishes at current rates (inf if none); kept
        until a flow joins or leaves, rates are solved or bytes move."""
        if self._next_dt is None:
            if not len(self.active):
                self._next_dt = float("inf")
            else:
                with np.errstate(divide="ignore"):  # flows that joined this instant have no rate yet
                    self._next_dt = max(0.0, float(np.min(self.remaining[self.active] / self.rate[self.active])))
        return self._next_dt

    def forget_next(self) -> None:
        """Bytes or rates were set from outside: the next completion is found again."""
        self._next_dt = None

    def pop_completed(self, tol_s: float, now: float) -> np.ndarray:
        """Remove and return the flows that finish within *tol_s*; count their bytes."""
        if not len(self.active):
            return self.active
        with np.errstate(divide="ignore", invalid="ignore"):  # flows that just joined: rate 0
            done_mask = self.remaining[self.active] / self.rate[self.active] <= tol_s
        if not done_mask.any():
            return self.active[:0]
        assert self.nodes is not None
        done = self.active[done_mask]
        self._next_dt = None
        gone = done_mask[self.owner]
        links = self.link[gone]
        counted = self.delivered if self.count_moved else self.nodes.nbytes
        np.add.at(self.link_bytes, links, counted[self.active[self.owner[gone]]])
        if self.count_busy:
            self._count(links, -1, now)
        position = np.cumsum(~done_mask) - 1
        self.owner, self.link = position[self.owner[~gone]], self.link[~gone]
        if self.inc_weight is not None:
            self.inc_weight = self.inc_weight[~gone]
        self.active = self.active[~done_mask]
        self.rate[done] = 0.0
        self.changed.append(links)
        return done

    def update_rates(self) -> bool:
        """Solve rates over the component the changes touched; whether anything was solved."""
        if not self.changed:
            return False
        seed = np.concatenate(self.changed)
        self.changed.clear()
        if not len(self.active):
            return False
        mask = self._component(seed)
        owner, links, weight = self.owner, self.link, self.inc_weight
        if mask is None:
            members = np.arange(len(self.active))
        else:
            members = np.flatnonzero(mask)
            keep = mask[owner]
            local = np.cumsum(mask) - 1
            owner, links = local[owner[keep]], links[keep]
            weight = None if weight is None else weight[keep]
        rates = weighted_max_min_rates(owner, links, weight, len(members), self.capacity)
        self.rate[self.active[members]] = rates
        self._next_dt = None
        return True

    def _component(self, seed: np.ndarray) -> np.ndarray | None:
        """Mask over active flows reachable from *seed* links; None when it is all of them."""
        marked = np.zeros(len(self.capacity), dtype=bool)
        marked[seed] = True
        for _ in range(MAX_EXPAND_ROUNDS):
            flows = np.zeros(len(self.active), dtype=bool)
            flows[self.owner[marked[self.link]]] = True
            reached = self.link[flows[self.owner]]
            if marked[reached].all():
                return None if flows.all() else flows
            marked[reached] = True
        return None


def csr_rows(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in *rows*, entry) of every entry of the CSR rows *rows*."""
    lens = ptr[rows + 1] - ptr[rows]
    owner = np.repeat(np.arange(len(rows)), lens)
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, idx[np.repeat(ptr[rows], lens) + offsets]
