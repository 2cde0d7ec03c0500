"""The event-driven solver's runs: every transfer a flow, by one of two implementations of
the same loop behind :func:`run_flows`.

A transfer becomes ready when its dependencies (the schedule's CSR) have finished; it then
waits its route's latency and joins the network, where its rate is the max-min fair share of
its links; flows that become ready, start or finish at the same instant are handled as one
batch, so a step of a symmetric collective is one rate solve. The reference implementation is
the flow network's event loop (:class:`~atpsim.engine.solvers.flow_loop.Loop`, with the
collective engine's :data:`~atpsim.engine.solvers.flow_loop.COLLECTIVE` order); large runs
take its compiled kernel (:mod:`~atpsim.engine.solvers.flow_kernel`).
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

from atpsim.engine.routes import PairRoutes, used_links
from atpsim.engine.solvers import maxmin
from atpsim.engine.solvers.flow_kernel import compiled_kernel
from atpsim.engine.solvers.flow_loop import COLLECTIVE, TIME_RTOL, Loop, reverse_csr
from atpsim.engine.solvers.flow_network import Fabric, Nodes

logger = logging.getLogger(__name__)

#: Whether large runs take the compiled loop (where numba is installed); off with
#: ``ATPSIM_EVENT_LOOP=reference`` (or ``simpy``, its old name: what ``bench/bench_engine.py
#: --loop simpy`` measures).
use_kernel = os.environ.get("ATPSIM_EVENT_LOOP") not in ("reference", "simpy")

#: Runs of fewer flows take the reference loop: loading the compiled kernel costs about half a
#: second per process, more than such a run takes (the reference loop costs about 35 us a flow,
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


def run_flows(routes: PairRoutes, capacity_Bps: np.ndarray, flow_pair: np.ndarray,
              flow_bytes: np.ndarray, deps: tuple[np.ndarray, np.ndarray], *,
              loop_flows: int | None = None, guard: int | None = None) -> FlowTimeline:
    """Simulate flows (pair index and bytes each) with CSR dependencies *deps*: by the
    compiled kernel (:mod:`~atpsim.engine.solvers.flow_kernel`) where numba is installed
    and the run has at least :data:`KERNEL_MIN_FLOWS` flows, else by the reference loop; both
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
    loop = Loop(Fabric.plain(capacity_Bps), COLLECTIVE)
    loop.extend(Nodes.of(routes, np.asarray(flow_pair), flow_bytes, deps))
    loop.run()
    _check_done(loop.n_done, len(flow_pair))
    return FlowTimeline(loop.start, loop.finish, loop.net.delivered, loop.link_counts()[0])


def _check_done(n_done: int, n: int) -> None:
    if n_done != n:
        raise RuntimeError(f"event engine stalled: {n_done} of {n} flows done")


def _run_compiled(kernel: Callable[..., Any], routes: PairRoutes, capacity_Bps: np.ndarray,
                  flow_pair: np.ndarray, flow_bytes: np.ndarray,
                  deps: tuple[np.ndarray, np.ndarray], guard: int | None) -> FlowTimeline:
    """:func:`run_flows` by the compiled *kernel*, over the links the routes use (renumbered,
    as :class:`~atpsim.engine.solvers.flow_network.FlowNetwork` does, unless they are a quarter of the topology's or more: then a
    renumbered copy of every route link would cost more than per-link arrays of every link)."""
    used = used_links(routes.links, len(capacity_Bps))
    if 4 * len(used) >= len(capacity_Bps):
        used, local = np.arange(len(capacity_Bps)), routes.links
    else:
        renumber = np.zeros(len(capacity_Bps), dtype=routes.links.dtype)
        renumber[used] = np.arange(len(used))
        local = renumber[routes.links]
    rev_ptr, rev_idx = reverse_csr(deps[0], deps[1], len(flow_pair))
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
