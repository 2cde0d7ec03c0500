"""The event loop of the event-driven solver: every transfer a flow, simpy as the clock.

One *network* process sleeps until the next flow completion or until it is woken by flows
that finished paying their latency. A transfer becomes ready when its dependencies (the
schedule's CSR) have finished; it then waits its route's latency (the sum of its links'
latencies, paid once, before any byte moves: the first byte reaches the far end after the
path latency and the last ``bytes / rate`` later) and joins the network, where its rate is
the max-min fair share of its links. Flows that become ready, start or finish at the same
instant are handled as one batch, so a step of a symmetric collective is one rate solve.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from atpsim.engine.routes import PairRoutes, used_links
from atpsim.engine.solvers import maxmin
from atpsim.engine.solvers.flow_kernel import compiled_kernel
from atpsim.engine.solvers.flow_network import FlowNetwork

logger = logging.getLogger(__name__)

#: Whether large runs take the compiled loop (where numba is installed); off with
#: ``ATPSIM_EVENT_LOOP=simpy`` (what ``bench/bench_engine.py --loop simpy`` measures).
use_kernel = os.environ.get("ATPSIM_EVENT_LOOP") != "simpy"

#: Flows whose finish lies within this fraction of the current time finish together.
TIME_RTOL = 1e-10
#: Runs of fewer flows take the simpy loop: loading the compiled kernel costs about half a
#: second per process, more than such a run takes (the simpy loop costs about 35 us a flow,
#: the kernel 30-40x less: NCCL's channel rings over 16-256 GPUs, measured; at 10,000 flows a
#: process's only run is about even).
KERNEL_MIN_FLOWS = 10_000


#: A compiled run stops at its horizon only past this fraction beyond it, so that a run cut
#: short surely ends later than the horizon, float rounding included.
HORIZON_RTOL = 1e-9

_HORIZON_S: ContextVar[float] = ContextVar("atpsim_horizon_s", default=math.inf)


class PastHorizon(Exception):  # noqa: N818 - a signal, not an error
    """A run stopped early: it surely ends after the horizon set by :func:`horizon`."""


@contextmanager
def horizon(limit_s: float) -> Iterator[None]:
    """Within the block, compiled runs may stop with :class:`PastHorizon` as soon as they
    surely end after *limit_s* simulated seconds: the next event comes later, or some link's
    bytes still to join take longer at its full capacity. A caller that only needs to know
    whether a run beats a time (NCCL's tuner, :mod:`atpsim.engine.nccl`) sets it; every run
    that finishes is the same as without it."""
    token = _HORIZON_S.set(limit_s)
    try:
        yield
    finally:
        _HORIZON_S.reset(token)


@dataclass(frozen=True)
class FlowTimeline:
    """Per-flow start (ready) and finish times (s), bytes moved, and bytes per directed link."""

    start_s: np.ndarray
    finish_s: np.ndarray
    delivered: np.ndarray
    link_bytes: np.ndarray


def _reverse_csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    owners = np.repeat(np.arange(n), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    rev_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=rev_ptr[1:])
    return rev_ptr, owners[order]


def _gather(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    lens = ptr[rows + 1] - ptr[rows]
    offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return idx[np.repeat(ptr[rows], lens) + offsets]


class _Run:
    def __init__(self, routes: PairRoutes, capacity: np.ndarray, flow_pair: np.ndarray,
                 flow_bytes: np.ndarray, deps: tuple[np.ndarray, np.ndarray]):
        n = len(flow_pair)
        self.env = simpy.Environment()
        self.net = FlowNetwork(routes, capacity, flow_pair, flow_bytes)
        self.latency = routes.latency_s[flow_pair]
        self.waiting = np.diff(deps[0]).astype(np.int64)
        self.dependents = _reverse_csr(deps[0], deps[1], n)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.n_done = 0
        self.arrived: list[np.ndarray] = []
        self.wake = self.env.event()

    def release(self, flows: np.ndarray) -> None:
        """*flows* are ready now: each joins the network after its path latency."""
        if not len(flows):
            return
        self.start[flows] = self.env.now
        lat = self.latency[flows]
        for value in np.unique(lat):
            batch = flows[lat == value]
            if value == 0:
                self.arrive(batch)
            else:
                self.env.timeout(float(value)).callbacks.append(self._arrival(batch))

    def _arrival(self, flows: np.ndarray) -> Callable[[simpy.Event], None]:
        return lambda _event: self.arrive(flows)

    def arrive(self, flows: np.ndarray) -> None:
        self.arrived.append(flows)
        if not self.wake.triggered:
            self.wake.succeed()

    def complete(self, done: np.ndarray) -> None:
        self.finish[done] = self.env.now
        self.n_done += len(done)
        children = _gather(*self.dependents, done)
        np.subtract.at(self.waiting, children, 1)
        self.release(np.unique(children[self.waiting[children] == 0]))

    def network(self):  # simpy process
        self.release(np.flatnonzero(self.waiting == 0))
        n = len(self.finish)
        while self.n_done < n:
            if self.arrived:
                self.net.add(np.concatenate(self.arrived))
                self.arrived.clear()
            self.net.update_rates()
            dt = self.net.time_to_next_completion()
            if self.wake.triggered:
                self.wake = self.env.event()
            begin = self.env.now
            yield self.wake if dt == float("inf") else (self.env.timeout(dt) | self.wake)
            self.net.advance(self.env.now - begin)
            done = self.net.pop_completed(TIME_RTOL * max(self.env.now, 1e-12))
            if len(done):
                self.complete(done)


def run_flows(routes: PairRoutes, capacity_Bps: np.ndarray, flow_pair: np.ndarray,
              flow_bytes: np.ndarray, deps: tuple[np.ndarray, np.ndarray], *,
              loop_flows: int | None = None, guard: int | None = None) -> FlowTimeline:
    """Simulate flows (pair index and bytes each) with CSR dependencies *deps*: by the
    compiled kernel (:mod:`~atpsim.engine.solvers.flow_kernel`) where numba is installed
    and the run has at least :data:`KERNEL_MIN_FLOWS` flows, else by the simpy loop; both
    give the same times to float rounding (the kernel settles a flow's bytes only when its
    rate changes; tested to 1e-9 relative, measured within 2e-13). *loop_flows* (default:
    this run's flows) is the count the loop is chosen by: a prefix of a larger problem
    (:mod:`~atpsim.engine.reductions.periodic`) takes the loop of the whole, so a problem's
    answer does not depend on how far its prefixes grew before one settled. Under a
    :func:`horizon` the compiled loop may raise :class:`PastHorizon`, judging only while no
    flow of index *guard* (default: none) or above has finished (a prefix run is the whole
    run's beginning until a flow of its last step finishes)."""
    size = len(flow_pair) if loop_flows is None else loop_flows
    kernel = compiled_kernel() if use_kernel and size >= KERNEL_MIN_FLOWS else None
    if kernel is not None:
        return _run_compiled(kernel, routes, capacity_Bps, flow_pair, flow_bytes, deps, guard)
    run = _Run(routes, capacity_Bps, flow_pair, flow_bytes, deps)
    run.env.process(run.network())
    run.env.run()
    _check_done(run.n_done, len(flow_pair))
    return FlowTimeline(run.start, run.finish, run.net.delivered, run.net.link_bytes)


def _check_done(n_done: int, n: int) -> None:
    if n_done != n:
        raise RuntimeError(f"event engine stalled: {n_done} of {n} flows done")


def _run_compiled(kernel: Callable[..., Any], routes: PairRoutes, capacity_Bps: np.ndarray,
                  flow_pair: np.ndarray, flow_bytes: np.ndarray,
                  deps: tuple[np.ndarray, np.ndarray], guard: int | None) -> FlowTimeline:
    """:func:`run_flows` by the compiled *kernel*, over the links the routes use (renumbered,
    as :class:`FlowNetwork` does, unless they are a quarter of the topology's or more: then a
    renumbered copy of every route link would cost more than per-link arrays of every link)."""
    used = used_links(routes.links, len(capacity_Bps))
    if 4 * len(used) >= len(capacity_Bps):
        used, local = np.arange(len(capacity_Bps)), routes.links
    else:
        renumber = np.zeros(len(capacity_Bps), dtype=routes.links.dtype)
        renumber[used] = np.arange(len(used))
        local = renumber[routes.links]
    rev_ptr, rev_idx = _reverse_csr(deps[0], deps[1], len(flow_pair))
    pairs = np.asarray(flow_pair, dtype=np.int64)
    start, finish, delivered, local_bytes, n_done, stats = kernel(
        routes.ptr.astype(np.int64, copy=False), local,
        np.asarray(capacity_Bps, dtype=np.float64)[used], pairs,
        np.array(flow_bytes, dtype=np.float64), np.diff(deps[0]).astype(np.int64),
        rev_ptr, rev_idx.astype(np.int64), routes.latency_s[pairs].astype(np.float64),
        TIME_RTOL, maxmin.LEVEL_RTOL, _HORIZON_S.get() * (1 + HORIZON_RTOL), guard)
    if stats[6]:
        raise PastHorizon(f"stopped after {stats[0]} events")
    _check_done(n_done, len(flow_pair))
    logger.debug("event kernel: %d flows, %d events, %d solves, %d flows and %d incidences in"
                 " the solved components, %d levels, %d compactions", len(flow_pair), *stats[:6])
    link_bytes = np.zeros(len(capacity_Bps))
    link_bytes[used] = local_bytes
    return FlowTimeline(start, finish, delivered, link_bytes)
