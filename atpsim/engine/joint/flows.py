"""The joint network's event loop: flows of many calls, released at their calls' start
times, sharing every link by weighted max-min (:mod:`~atpsim.engine.joint.sharing`).

As in the collective engine's loop (:mod:`atpsim.engine.solvers.event_loop`), a flow is
*ready* when the flows it depends on (its call's rendezvous rule) have finished and its
release time has come; it then pays its route's latency and joins the network, where its
rate is its weighted max-min share of every link it crosses; rates are solved again, over
the links whose flows changed and the flows reachable from them, whenever a flow joins or
finishes anywhere. What this loop adds: a release time per flow (a call's start in the
step, plus NCCL's fixed latency), a weight per (flow, link) (the protocol's efficiency),
and the time each link spends carrying at least one flow (its busy time).

The flow network here is its own small class rather than
:class:`~atpsim.engine.solvers.flow_network.FlowNetwork` because it needs the weights and
the busy time; the max-min solve with unit weights is that module's.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from atpsim.engine.joint.sharing import weighted_max_min_rates
from atpsim.engine.routes import PairRoutes

#: Flows whose finish lies within this fraction of the current time finish together (as in
#: the collective engine's loop).
TIME_RTOL = 1e-10
#: Rounds of growing the component of changed links before solving every active flow.
MAX_EXPAND_ROUNDS = 8


@dataclass(frozen=True)
class FlowSet:
    """Nodes to run together, flows and delays: *pair[i]* indexes the routes (-1: node ``i``
    is a delay of *delay_s[i]* seconds that moves nothing: compute, a fixed latency, a join),
    *nbytes[i]* data bytes, *protocol[i]* a row of the fabric's weight table, *release_s[i]*
    the earliest time it may start (s), *deps* the CSR ``(indptr, indices)`` of the nodes it
    waits for."""

    pair: np.ndarray
    nbytes: np.ndarray
    protocol: np.ndarray
    release_s: np.ndarray
    deps: tuple[np.ndarray, np.ndarray]
    delay_s: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.pair)


@dataclass(frozen=True)
class Fabric:
    """The links the flows share: *capacity_Bps[l]* (per direction), *link_class[l]* (a
    column of *weight*) and *weight[protocol, class]*, wire bytes per data byte."""

    capacity_Bps: np.ndarray
    link_class: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True)
class FlowRun:
    """Per flow: *start_s* (ready) and *finish_s*; per directed link of the fabric: data
    *link_bytes* and *link_busy_s* (time carrying at least one flow); *n_events*: the times
    rates were solved."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    n_events: int


def reverse_csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of dependents from the CSR of dependencies."""
    owners = np.repeat(np.arange(n), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=ptr[1:])
    return ptr, owners[order]


def _append_dependents(dependents: tuple[np.ndarray, np.ndarray], nodes: Nodes, first: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The dependents CSR of a loop's nodes after *nodes* join it as nodes ``first...``: their
    dependencies are among themselves, so the old nodes' dependents do not change and the new
    ones' are appended (the reverse of the whole CSR, sorted again at every call that joined
    a live episode, was quadratic in its calls)."""
    ptr, idx = dependents
    new_ptr, new_idx = reverse_csr(nodes.dep_ptr, nodes.dep_idx, len(nodes))
    return np.concatenate([ptr, new_ptr[1:] + ptr[-1]]), np.concatenate([idx, new_idx + first])


def gather(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The entries of CSR rows *rows*, concatenated."""
    lens = ptr[rows + 1] - ptr[rows]
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return idx[np.repeat(ptr[rows], lens) + offsets]


@dataclass(frozen=True)
class Nodes:
    """Nodes as the loop holds them: per node, the directed links it crosses (CSR
    *link_ptr*/*link_idx*, the fabric's link ids; none: a delay, or a flow from a rank to
    itself, done when its latency has passed), its *latency_s* (a delay's duration),
    *nbytes*, *protocol*, *release_s* and dependencies (CSR *dep_ptr*/*dep_idx*)."""

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
    def of(cls, routes: PairRoutes, flows: FlowSet) -> Nodes:
        """The nodes of *flows* over *routes*."""
        flow = flows.pair >= 0
        pairs = np.where(flow, flows.pair, 0)
        lens = np.where(flow, routes.route_len[pairs], 0) if len(routes) else np.zeros(len(flows), np.int64)
        ptr = np.zeros(len(flows) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        _, links = routes.flow_links(pairs[flow]) if len(routes) else (None, np.zeros(0, np.int64))
        latency = np.where(flow, routes.latency_s[pairs], 0.0) if len(routes) else np.zeros(len(flows))
        if flows.delay_s is not None:
            latency = np.where(flow, latency, flows.delay_s)
        return cls(ptr, np.asarray(links, dtype=np.int64), latency, np.asarray(flows.nbytes, dtype=np.float64),
                   np.asarray(flows.protocol, dtype=np.int64), np.asarray(flows.release_s, dtype=np.float64),
                   flows.deps[0].astype(np.int64), flows.deps[1].astype(np.int64))  # fmt: skip

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


class _Network:
    """Active flows, their rates, remaining bytes and link incidences (weights included).
    Links are numbered locally in order of first use (per-event work is sized by the links
    the flows use, not by the fabric)."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.local = np.full(len(fabric.capacity_Bps), -1, dtype=np.int64)
        self.used = np.zeros(0, dtype=np.int64)
        self.capacity, self.link_class = np.zeros(0), np.zeros(0, dtype=np.int64)
        self.nodes: Nodes | None = None
        self.node_links = np.zeros(0, dtype=np.int64)  # local ids, parallel to nodes.link_idx
        self.rate, self.remaining = np.zeros(0), np.zeros(0)
        self.active = np.zeros(0, dtype=np.int64)
        self.owner = np.zeros(0, dtype=np.int64)
        self.link = np.zeros(0, dtype=np.int64)
        self.inc_weight = np.zeros(0)
        self.on_link = np.zeros(0, dtype=np.int64)
        self.busy_since, self.busy, self.link_bytes = np.zeros(0), np.zeros(0), np.zeros(0)
        self.changed: list[np.ndarray] = []

    def extend(self, nodes: Nodes) -> None:
        """Take on *nodes* (all nodes so far, the new ones last)."""
        fresh = np.unique(nodes.link_idx[len(self.node_links):])
        fresh = fresh[self.local[fresh] < 0]
        self.local[fresh] = np.arange(len(self.used), len(self.used) + len(fresh))
        self.used = np.concatenate([self.used, fresh])
        self.capacity = np.concatenate([self.capacity, np.asarray(self.fabric.capacity_Bps, dtype=np.float64)[fresh]])
        self.link_class = np.concatenate([self.link_class, np.asarray(self.fabric.link_class)[fresh]])
        grow = np.zeros(len(fresh))
        self.on_link = np.concatenate([self.on_link, grow.astype(np.int64)])
        self.busy_since, self.busy = np.concatenate([self.busy_since, grow]), np.concatenate([self.busy, grow])
        self.link_bytes = np.concatenate([self.link_bytes, grow])
        added = len(nodes) - len(self.rate)
        self.node_links = np.concatenate([self.node_links, self.local[nodes.link_idx[len(self.node_links):]]])
        self.rate = np.concatenate([self.rate, np.zeros(added)])
        self.remaining = np.concatenate([self.remaining, nodes.nbytes[len(nodes) - added:]])
        self.nodes = nodes

    def incidences(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self.nodes is not None
        return _csr_rows(self.nodes.link_ptr, self.node_links, flows)

    def add(self, flows: np.ndarray, now: float) -> None:
        assert self.nodes is not None
        owner, links = self.incidences(flows)
        weight = self.fabric.weight[self.nodes.protocol[flows][owner], self.link_class[links]]
        self._count(links, +1, now)
        self.owner = np.concatenate([self.owner, owner + len(self.active)])
        self.link = np.concatenate([self.link, links])
        self.inc_weight = np.concatenate([self.inc_weight, weight])
        self.active = np.concatenate([self.active, flows])
        self.changed.append(links)

    def _count(self, links: np.ndarray, sign: int, now: float) -> None:
        """Flows on each link up (+1) or down (-1): a link starts or stops being busy."""
        before = self.on_link[links] > 0
        np.add.at(self.on_link, links, sign)
        after = self.on_link[links] > 0
        if sign > 0:
            self.busy_since[links[~before & after]] = now
        else:
            ended = np.unique(links[before & ~after])
            self.busy[ended] += now - self.busy_since[ended]

    def take_counts(self, other: _Network, now: float) -> None:
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
        if dt > 0 and len(self.active):
            self.remaining[self.active] -= self.rate[self.active] * dt

    def time_to_next_completion(self) -> float:
        if not len(self.active):
            return float("inf")
        with np.errstate(divide="ignore"):  # flows that joined this instant have no rate yet
            return max(0.0, float(np.min(self.remaining[self.active] / self.rate[self.active])))

    def pop_completed(self, tol_s: float, now: float) -> np.ndarray:
        """Remove and return the flows that finish within *tol_s*; count their bytes."""
        if not len(self.active):
            return self.active
        with np.errstate(divide="ignore", invalid="ignore"):  # flows that just joined: rate 0
            done_mask = self.remaining[self.active] / self.rate[self.active] <= tol_s
        if not done_mask.any():
            return self.active[:0]
        done = self.active[done_mask]
        gone = done_mask[self.owner]
        links = self.link[gone]
        np.add.at(self.link_bytes, links, self.nodes.nbytes[self.active[self.owner[gone]]])  # type: ignore[union-attr]
        self._count(links, -1, now)
        position = np.cumsum(~done_mask) - 1
        self.owner, self.link = position[self.owner[~gone]], self.link[~gone]
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
            owner, links, weight = local[owner[keep]], links[keep], weight[keep]
        rates = weighted_max_min_rates(owner, links, weight, len(members), self.capacity)
        self.rate[self.active[members]] = rates
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


def _csr_rows(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in *rows*, entry) of every entry of the CSR rows *rows*."""
    lens = ptr[rows + 1] - ptr[rows]
    owner = np.repeat(np.arange(len(rows)), lens)
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, idx[np.repeat(ptr[rows], lens) + offsets]


class Loop:
    """The clock, the arrivals waiting out their latency, the dependency counters and the
    network, for nodes that may be added while it runs (:meth:`extend`) and loops that may
    be merged (:meth:`absorb`): the joint engine keeps an episode of calls that meet as one
    such loop and advances it with the step (:meth:`run_until`). Times are absolute."""

    def __init__(self, fabric: Fabric, now: float = 0.0):
        self.net = _Network(fabric)
        self.nodes: Nodes | None = None
        self.waiting = np.zeros(0, dtype=np.int64)
        self.start, self.finish = np.zeros(0), np.zeros(0)
        self.dependents = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self.arrivals: list[tuple[float, int, np.ndarray]] = []  # joins and delays' ends
        self.now, self.n_done, self.n_events, self.seq = now, 0, 0, 0
        self.done_log: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.waiting)

    def extend(self, nodes: Nodes) -> int:
        """Add *nodes* now (their dependencies among themselves); those with none are
        released at their release time. Returns the index of the first."""
        first = len(self)
        self.nodes = nodes if self.nodes is None else self.nodes.then(nodes)
        self.net.extend(self.nodes)
        self.waiting = np.concatenate([self.waiting, np.diff(nodes.dep_ptr)])
        self.start = np.concatenate([self.start, np.full(len(nodes), np.nan)])
        self.finish = np.concatenate([self.finish, np.full(len(nodes), np.nan)])
        self.dependents = _append_dependents(self.dependents, nodes, first)
        self.release(first + np.flatnonzero(np.diff(nodes.dep_ptr) == 0))
        return first

    def release(self, ids: np.ndarray) -> None:
        """*ids* are ready now (or at their release time): each joins after its latency."""
        if not len(ids):
            return
        assert self.nodes is not None
        start = np.maximum(self.now, self.nodes.release_s[ids])
        self.start[ids] = start
        arrive = start + self.nodes.latency_s[ids]
        for value in np.unique(arrive):
            self.seq += 1
            heapq.heappush(self.arrivals, (float(value), self.seq, ids[arrive == value]))

    def next_time(self) -> float:
        """When the next event happens (inf when nothing is left to happen)."""
        next_arrival = self.arrivals[0][0] if self.arrivals else float("inf")
        return min(next_arrival, self.now + self.net.time_to_next_completion())

    def run_until(self, t: float) -> None:
        """Handle every event at or before *t*, then move the clock to *t*."""
        while self.n_done < len(self) and self.next_time() <= t:
            self.step()
        if t > self.now:
            self.net.advance(t - self.now)
            self.now = t

    def step(self) -> None:
        """Move to the next arrival or completion, whichever is first, and handle it."""
        net = self.net
        next_arrival = self.arrivals[0][0] if self.arrivals else float("inf")
        dt = net.time_to_next_completion()
        if next_arrival == float("inf") and dt == float("inf"):
            raise RuntimeError(f"joint network stalled: {self.n_done} of {len(self)} nodes done")
        if next_arrival <= self.now + dt:
            net.advance(next_arrival - self.now)
            self.now = next_arrival
            batch = []
            while self.arrivals and self.arrivals[0][0] == next_arrival:
                batch.append(heapq.heappop(self.arrivals)[2])
            self._join(np.concatenate(batch))
        else:
            net.advance(dt)
            self.now += dt
        done = net.pop_completed(TIME_RTOL * max(abs(self.now), 1e-12), self.now)
        if len(done):
            self.complete(done)
        self.n_events += net.update_rates()

    def _join(self, ids: np.ndarray) -> None:
        """Nodes arrive in the network; those that cross no link are done on arrival."""
        assert self.nodes is not None
        empty = self.nodes.link_ptr[ids + 1] == self.nodes.link_ptr[ids]
        if empty.any():
            self.complete(ids[empty])
        if (~empty).any():
            self.net.add(ids[~empty], self.now)

    def complete(self, done: np.ndarray) -> None:
        self.finish[done] = self.now
        self.n_done += len(done)
        self.done_log.append(done)
        children = gather(*self.dependents, done)
        np.subtract.at(self.waiting, children, 1)
        self.release(np.unique(children[self.waiting[children] == 0]))

    def absorb(self, other: Loop) -> int:
        """Take over *other* (a loop at the same time, on links this one's flows have not
        met): its nodes, their state and its link counts. Returns the offset of its nodes."""
        assert other.nodes is not None and other.now == self.now
        offset = len(self)
        self.nodes = other.nodes if self.nodes is None else self.nodes.then(other.nodes)
        self.net.extend(self.nodes)
        self.net.remaining[offset:] = other.net.remaining
        self.net.take_counts(other.net, self.now)
        self.waiting = np.concatenate([self.waiting, other.waiting])
        self.start, self.finish = np.concatenate([self.start, other.start]), np.concatenate([self.finish, other.finish])
        self.dependents = _append_dependents(self.dependents, other.nodes, offset)
        self.n_done += other.n_done
        for t, _, ids in other.arrivals:
            self.seq += 1
            heapq.heappush(self.arrivals, (t, self.seq, ids + offset))
        if len(other.net.active):
            self.net.add(other.net.active + offset, self.now)
            self.n_events += self.net.update_rates()
        return offset

    def link_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and busy time (so far) per directed link of the fabric."""
        return self.net.global_counts(self.now)


def run_flow_set(routes: PairRoutes, fabric: Fabric, flows: FlowSet) -> FlowRun:
    """Simulate *flows* over *routes* on *fabric* from t = 0 (release times are from there)."""
    loop = Loop(fabric)
    loop.extend(Nodes.of(routes, flows))
    while loop.n_done < len(loop):
        loop.step()
    link_bytes, link_busy = loop.link_counts()
    return FlowRun(loop.start, loop.finish, link_bytes, link_busy, loop.n_events)
