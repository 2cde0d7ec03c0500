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


def gather(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The entries of CSR rows *rows*, concatenated."""
    lens = ptr[rows + 1] - ptr[rows]
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return idx[np.repeat(ptr[rows], lens) + offsets]


class _Network:
    """Active flows, their rates, remaining bytes and link incidences (weights included)."""

    def __init__(self, routes: PairRoutes, fabric: Fabric, flows: FlowSet):
        self.used, local = np.unique(routes.links, return_inverse=True)
        self.ptr, self.links = routes.ptr, local.astype(np.int64).ravel()
        self.capacity = np.asarray(fabric.capacity_Bps, dtype=np.float64)[self.used]
        self.link_class = np.asarray(fabric.link_class)[self.used]
        self.weight, self.flows = fabric.weight, flows
        n, n_links = len(flows), len(self.used)
        self.rate, self.remaining = np.zeros(n), np.array(flows.nbytes, dtype=np.float64)
        self.active = np.zeros(0, dtype=np.int64)
        self.owner = np.zeros(0, dtype=np.int64)
        self.link = np.zeros(0, dtype=np.int64)
        self.inc_weight = np.zeros(0)
        self.on_link = np.zeros(n_links, dtype=np.int64)
        self.busy_since = np.zeros(n_links)
        self.busy = np.zeros(n_links)
        self.link_bytes = np.zeros(n_links)
        self.changed: list[np.ndarray] = []

    def incidences(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = self.flows.pair[flows]
        starts, lens = self.ptr[pairs], self.ptr[pairs + 1] - self.ptr[pairs]
        owner = np.repeat(np.arange(len(flows)), lens)
        offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        return owner, self.links[np.repeat(starts, lens) + offsets]

    def add(self, flows: np.ndarray, now: float) -> None:
        owner, links = self.incidences(flows)
        weight = self.weight[self.flows.protocol[flows][owner], self.link_class[links]]
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

    def advance(self, dt: float) -> None:
        if dt > 0 and len(self.active):
            self.remaining[self.active] -= self.rate[self.active] * dt

    def time_to_next_completion(self) -> float:
        if not len(self.active):
            return float("inf")
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
        np.add.at(self.link_bytes, links, self.flows.nbytes[self.active[self.owner[gone]]])
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


class _Loop:
    """The clock, the arrivals waiting out their latency, and the dependency counters."""

    def __init__(self, routes: PairRoutes, fabric: Fabric, flows: FlowSet):
        n = len(flows)
        self.net = _Network(routes, fabric, flows)
        self.flows = flows
        self.is_delay = flows.pair < 0
        self.latency = np.where(self.is_delay, 0.0, routes.latency_s[np.maximum(flows.pair, 0)]) \
            if len(routes) else np.zeros(n)
        if flows.delay_s is not None:
            self.latency = np.where(self.is_delay, flows.delay_s, self.latency)
        self.waiting = np.diff(flows.deps[0]).astype(np.int64)
        self.dependents = reverse_csr(flows.deps[0], flows.deps[1], n)
        self.start, self.finish = np.full(n, np.nan), np.full(n, np.nan)
        self.arrivals: list[tuple[float, int, np.ndarray]] = []  # joins and delays' ends
        self.now, self.n_done, self.n_events, self.seq = 0.0, 0, 0, 0

    def release(self, flows: np.ndarray) -> None:
        """*flows* are ready now (or at their release time): each joins after its latency."""
        if not len(flows):
            return
        start = np.maximum(self.now, self.flows.release_s[flows])
        self.start[flows] = start
        arrive = start + self.latency[flows]
        for value in np.unique(arrive):
            self.seq += 1
            heapq.heappush(self.arrivals, (float(value), self.seq, flows[arrive == value]))

    def step(self) -> None:
        """Move to the next arrival or completion, whichever is first, and handle it."""
        net = self.net
        next_arrival = self.arrivals[0][0] if self.arrivals else float("inf")
        dt = net.time_to_next_completion()
        if next_arrival == float("inf") and dt == float("inf"):
            raise RuntimeError(f"joint network stalled: {self.n_done} of {len(self.flows)} flows done")
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
        done = net.pop_completed(TIME_RTOL * max(self.now, 1e-12), self.now)
        if len(done):
            self.complete(done)
        self.n_events += net.update_rates()

    def _join(self, flows: np.ndarray) -> None:
        """Flows arrive in the network; delays and flows whose route has no link (a rank to
        itself) are done on arrival."""
        pairs = self.flows.pair[flows]
        if len(self.net.ptr) > 1:
            safe = np.maximum(pairs, 0)
            empty = (pairs < 0) | (self.net.ptr[safe + 1] == self.net.ptr[safe])
        else:
            empty = np.ones(len(flows), dtype=bool)
        if empty.any():
            self.complete(flows[empty])
        if (~empty).any():
            self.net.add(flows[~empty], self.now)

    def complete(self, done: np.ndarray) -> None:
        self.finish[done] = self.now
        self.n_done += len(done)
        children = gather(*self.dependents, done)
        np.subtract.at(self.waiting, children, 1)
        self.release(np.unique(children[self.waiting[children] == 0]))


def run_flow_set(routes: PairRoutes, fabric: Fabric, flows: FlowSet) -> FlowRun:
    """Simulate *flows* over *routes* on *fabric* from t = 0 (release times are from there)."""
    loop = _Loop(routes, fabric, flows)
    loop.release(np.flatnonzero(loop.waiting == 0))
    while loop.n_done < len(flows):
        loop.step()
    net = loop.net
    n_links = len(fabric.capacity_Bps)
    link_bytes, link_busy = np.zeros(n_links), np.zeros(n_links)
    link_bytes[net.used], link_busy[net.used] = net.link_bytes, net.busy
    return FlowRun(loop.start, loop.finish, link_bytes, link_busy, loop.n_events)
