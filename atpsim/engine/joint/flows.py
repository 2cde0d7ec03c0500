"""The joint network's flow sets: flows of many calls and delays, released at their calls'
start times, run by the flow network's event loop in the joint network's order
(:data:`~atpsim.engine.solvers.flow_loop.JOINT`; :func:`~atpsim.engine.solvers.joint_loop.
joint_loop`: the reference :class:`~atpsim.engine.solvers.flow_loop.Loop` or its compiled
twin, the same numbers to the bit) on a fabric whose links each flow shares by
weighted max-min (:func:`~atpsim.engine.solvers.maxmin.weighted_max_min_rates`: a weight per
(flow, link), the protocol's efficiency), counting the time each link spends carrying at least
one flow (its busy time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.engine.routes import PairRoutes
from atpsim.engine.solvers.flow_network import Fabric, Nodes
from atpsim.engine.solvers.joint_loop import joint_loop, run_to_end


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
class FlowRun:
    """Per flow: *start_s* (ready) and *finish_s*; per directed link of the fabric: data
    *link_bytes* and *link_busy_s* (time carrying at least one flow); *n_events*: the times
    rates were solved."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    n_events: int


def nodes_of(routes: PairRoutes, flows: FlowSet) -> Nodes:
    """The loop's nodes of *flows* over *routes*."""
    return Nodes.of(routes, flows.pair, flows.nbytes, flows.deps, protocol=flows.protocol,
                    release_s=flows.release_s, delay_s=flows.delay_s)


def run_flow_set(routes: PairRoutes, fabric: Fabric, flows: FlowSet) -> FlowRun:
    """Simulate *flows* over *routes* on *fabric* from t = 0 (release times are from there)."""
    loop = joint_loop(fabric)
    loop.extend(nodes_of(routes, flows))
    loop, finished = run_to_end(loop)
    if not finished:
        raise RuntimeError(f"joint network stalled: {loop.n_done} of {len(loop)} nodes done")
    link_bytes, link_busy = loop.link_counts()
    return FlowRun(loop.start, loop.finish, link_bytes, link_busy, loop.n_events)
