"""The reference event loop over the flow network: one clock, a queue of arrivals, the
dependency counters and a :class:`~atpsim.engine.solvers.flow_network.FlowNetwork`.

A node is *ready* when the nodes it depends on have finished and its release time has come;
it then pays its route's latency (the sum of its links' latencies, paid once, before any
byte moves: the first byte reaches the far end after the path latency and the last
``bytes / rate`` later) and joins the network, where its rate is its (weighted) max-min share
of every link it crosses; a node that crosses no link (a delay) is done when its latency has
passed. Rates are solved again, over the links whose flows changed and the flows reachable
from them, whenever a flow joins or finishes. Flows whose finish lies within
:data:`TIME_RTOL` of the clock finish together, so a step of a symmetric collective is one
rate solve.

The collective engine (:func:`~atpsim.engine.solvers.event_loop.run_flows`, with the compiled
kernel of :mod:`~atpsim.engine.solvers.flow_kernel` as the other implementation) and the joint
network (:mod:`atpsim.engine.joint`) both run this loop; the joint network also grows a loop
while it runs (:meth:`Loop.extend`), merges loops (:meth:`Loop.absorb`) and advances one with
a task graph's clock (:meth:`Loop.run_until`). The two used to be separate loops that agreed
on all of the above but ordered the events of one instant differently; each order is kept
bit for bit as :class:`Rules` (:data:`COLLECTIVE`, :data:`JOINT`), since float rounding
follows the order of operations and committed results compare exactly.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from atpsim.engine.solvers.flow_network import Fabric, FlowNetwork, GrowingNodes, Nodes
from atpsim.engine.solvers.growing import Column

#: Flows whose finish lies within this fraction of the current time finish together.
TIME_RTOL = 1e-10


@dataclass(frozen=True)
class Rules:
    """How a loop orders the events of one instant and what its links count.

    *join_at_release*: nodes released with no latency join the network in the batch of the
    event that released them (one rate solve), rather than as an event of their own at the
    same instant. *arrivals_by_latency*: a release queues its arrivals in increasing latency
    (as simpy orders one timeout per latency value), rather than in node order per arrival
    time. *step_by_clock*: a step to the next completion moves bytes for ``(now + dt) - now``
    seconds (the clock's difference) rather than ``dt``. *count_moved*: links count the bytes
    moved (rate x time) rather than each flow's size. *busy_time*: links count their busy
    time."""

    join_at_release: bool
    arrivals_by_latency: bool
    step_by_clock: bool
    count_moved: bool
    busy_time: bool


#: The collective engine's order (its loop was a simpy process woken by timeouts).
COLLECTIVE = Rules(join_at_release=True, arrivals_by_latency=True, step_by_clock=True,
                   count_moved=True, busy_time=False)  # fmt: skip
#: The joint network's order (a heap of arrivals, every arrival an event).
JOINT = Rules(join_at_release=False, arrivals_by_latency=False, step_by_clock=False,
              count_moved=False, busy_time=True)  # fmt: skip


def reverse_csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of dependents from the CSR of dependencies."""
    owners = np.repeat(np.arange(n), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=ptr[1:])
    return ptr, owners[order]


@dataclass(frozen=True, eq=False)
class NodeShape:
    """What a loop derives from nodes' structure alone, not their times, for nodes added
    again and again (a call's groups each time they start:
    :func:`~atpsim.engine.joint.live.member_nodes`): each node's dependency count
    (*waiting*), those with none (*roots*), the dependents (*dependents*: the dependencies'
    CSR reversed) and the links crossed (*links*: sorted, unique). Read-only."""

    waiting: np.ndarray
    roots: np.ndarray
    dependents: tuple[np.ndarray, np.ndarray]
    links: np.ndarray

    @classmethod
    def of(cls, nodes: Nodes) -> NodeShape:
        waiting = np.diff(nodes.dep_ptr)
        shape = cls(waiting, np.flatnonzero(waiting == 0), reverse_csr(nodes.dep_ptr, nodes.dep_idx, len(nodes)),
                    np.unique(nodes.link_idx))  # fmt: skip
        for array in (shape.waiting, shape.roots, *shape.dependents, shape.links):
            array.flags.writeable = False
        return shape


def gather(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The entries of CSR rows *rows*, concatenated."""
    return idx[positions(ptr, rows)]


def positions(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Where the entries of CSR rows *rows* (a row may come again) are, row after row."""
    lens = ptr[rows + 1] - ptr[rows]
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(ptr[rows], lens) + offsets


class _Dependents:
    """The dependents CSR of a loop's nodes, grown as nodes join: the dependencies of nodes
    that join are among themselves, so the old nodes' dependents do not change and the new
    ones' are appended (the reverse of the whole CSR, sorted again at every call that joined
    a live episode, was quadratic in its calls; so was concatenating it)."""

    def __init__(self) -> None:
        self.ptr, self.idx = Column(np.zeros(1), np.int64), Column(np.zeros(0), np.int64)

    @property
    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        return self.ptr.view, self.idx.view

    def append(self, nodes: Nodes, first: int) -> tuple[np.ndarray, np.ndarray]:
        """Append the dependents of *nodes*, which join as nodes ``first...``; the CSR."""
        new_ptr, new_idx = reverse_csr(nodes.dep_ptr, nodes.dep_idx, len(nodes))
        self.ptr.extend(new_ptr[1:] + self.ptr.view[-1])
        self.idx.extend(new_idx + first)
        return self.csr


class Loop:
    """The clock, the arrivals waiting out their latency, the dependency counters and the
    network, for nodes that may be added while it runs (:meth:`extend`) and loops that may
    be merged (:meth:`absorb`); *rules*: how events of one instant are ordered. Times are
    absolute."""

    def __init__(self, fabric: Fabric, rules: Rules, now: float = 0.0):
        self.rules = rules
        self.net = FlowNetwork(fabric, count_moved=rules.count_moved, busy=rules.busy_time)
        self.nodes: Nodes | None = None
        self._nodes = GrowingNodes()
        self._columns = (Column(np.zeros(0), np.int64), Column(np.zeros(0)), Column(np.zeros(0)))
        self.waiting, self.start, self.finish = (column.view for column in self._columns)
        self._dependents = _Dependents()
        self.dependents = self._dependents.csr
        self.arrivals: list[tuple[float, int, np.ndarray]] = []  # joins and delays' ends
        self.joining: list[np.ndarray] = []  # released with no latency (join_at_release)
        self.now, self.n_done, self.n_events, self.seq = now, 0, 0, 0
        self.done_log: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.waiting)

    def extend(self, nodes: Nodes, groups: np.ndarray | None = None, shape: NodeShape | None = None) -> int:
        """Add *nodes* now (their dependencies among themselves); those with none are
        released at their release time. Returns the index of the first. (*groups*: what the
        compiled loop stops at, :meth:`~atpsim.engine.solvers.joint_loop.CompiledLoop.
        run_to_group_end`; this loop has no such stop. *shape*: their :class:`NodeShape`
        where the caller keeps it, else derived here.)"""
        first = len(self)
        waiting = shape.waiting if shape is not None else np.diff(nodes.dep_ptr)
        self.nodes = self._nodes.append(nodes)
        self.net.extend(self.nodes)
        unknown = np.full(len(nodes), np.nan)
        self._grow(waiting, unknown, unknown)
        self.dependents = self._dependents.append(nodes, first)
        self.release(first + (shape.roots if shape is not None else np.flatnonzero(waiting == 0)))
        if self.joining:
            self._settle()
        return first

    def _grow(self, waiting: np.ndarray, start: np.ndarray, finish: np.ndarray) -> None:
        """Append the dependency counters and times of nodes that join."""
        self.waiting, self.start, self.finish = (
            column.extend(values) for column, values in zip(self._columns, (waiting, start, finish), strict=True))

    def release(self, ids: np.ndarray) -> None:
        """*ids* are ready now (or at their release time): each joins after its latency."""
        if not len(ids):
            return
        assert self.nodes is not None
        start = np.maximum(self.now, self.nodes.release_s[ids])
        self.start[ids] = start
        latency = self.nodes.latency_s[ids]
        if self.rules.arrivals_by_latency:
            order = np.argsort(latency, kind="stable")
            ids, start, latency = ids[order], start[order], latency[order]
        if self.rules.join_at_release:
            now = latency == 0
            if now.any():
                self.joining.append(ids[now])
                ids, start, latency = ids[~now], start[~now], latency[~now]
        arrive = start + latency
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

    def run(self) -> bool:
        """Handle every event; whether every node finished (False: the loop stalled)."""
        while self.n_done < len(self):
            if not self.step():
                return False
        return True

    def step(self) -> bool:
        """Move to the next arrival or completion, whichever is first, and handle it; False
        (and nothing done) when nothing is left to happen."""
        net = self.net
        next_arrival = self.arrivals[0][0] if self.arrivals else float("inf")
        dt = net.time_to_next_completion()
        if next_arrival == float("inf") and dt == float("inf"):
            return False
        if next_arrival <= self.now + dt:
            net.advance(next_arrival - self.now)
            self.now = next_arrival
            batch = []
            while self.arrivals and self.arrivals[0][0] == next_arrival:
                batch.append(heapq.heappop(self.arrivals)[2])
            self._join(np.concatenate(batch))
        elif self.rules.step_by_clock:
            t = self.now + dt
            net.advance(t - self.now)
            self.now = t
        else:
            net.advance(dt)
            self.now += dt
        done = net.pop_completed(TIME_RTOL * max(abs(self.now), 1e-12), self.now)
        if len(done):
            self.complete(done)
        self._settle()
        return True

    def _settle(self) -> None:
        """Join the nodes released with no latency (:attr:`Rules.join_at_release`), then
        solve the rates the changes touched."""
        while self.joining:
            ids = np.concatenate(self.joining)
            self.joining.clear()
            self._join(ids)
        self.n_events += self.net.update_rates()

    def _join(self, ids: np.ndarray) -> None:
        """Nodes arrive in the network; those that cross no link are done on arrival."""
        assert self.nodes is not None
        empty = self.nodes.link_ptr[ids + 1] == self.nodes.link_ptr[ids]
        if empty.any():
            self.complete(ids[empty])
        if (~empty).any():
            self.net.add(ids[~empty], self.now)

    def complete(self, done: np.ndarray) -> None:
        """*done* finish now: their dependents that wait for nothing else are released."""
        self.finish[done] = self.now
        self.n_done += len(done)
        self.done_log.append(done)
        children = gather(*self.dependents, done)
        np.subtract.at(self.waiting, children, 1)
        self.release(np.unique(children[self.waiting[children] == 0]))

    def absorb(self, other: Loop) -> int:
        """Take over *other* (a loop at the same time, on links this one's flows have not
        met): its nodes, their state and its link counts. Returns the offset of its nodes."""
        assert other.nodes is not None and other.now == self.now and not other.joining
        offset = len(self)
        self.nodes = self._nodes.append(other.nodes)
        self.net.extend(self.nodes)
        self.net.remaining[offset:] = other.net.remaining
        self.net.delivered[offset:] = other.net.delivered
        self.net.forget_next()
        self.net.take_counts(other.net, self.now)
        self._grow(other.waiting, other.start, other.finish)
        self.dependents = self._dependents.append(other.nodes, offset)
        self.n_done += other.n_done
        for t, _, ids in other.arrivals:
            self.seq += 1
            heapq.heappush(self.arrivals, (t, self.seq, ids + offset))
        if len(other.net.active):
            self.net.add(other.net.active + offset, self.now)
            self.n_events += self.net.update_rates()
        return offset

    def take_done(self) -> np.ndarray:
        """The nodes that finished since the last call, in the order they did."""
        done = np.concatenate(self.done_log) if self.done_log else np.zeros(0, dtype=np.int64)
        self.done_log.clear()
        return done

    def link_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and busy time (so far) per directed link of the fabric."""
        return self.net.global_counts(self.now)
