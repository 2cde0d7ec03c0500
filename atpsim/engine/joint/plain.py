"""The plain joint run: the whole task graph as one network of flows and delays, no reduction.

Every task becomes nodes of one static graph (:class:`~atpsim.engine.joint.flows.FlowSet`):

- a delay (or marker) task: a delay node after its dependencies;
- a comm task: a rendezvous node (it waits for the task's dependencies), the call's fixed
  latency as a delay after it, every transfer of its groups' schedule as a flow after that
  (and after the transfers the call's rendezvous rule makes it wait for), and an end node
  after all of them; a call that moves nothing ends after its alone time.

Then one run of the event loop (:func:`~atpsim.engine.joint.flows.run_flow_set`): every flow
of every call in flight shares every link by (weighted) max-min, rates solved again whenever
any flow anywhere starts or ends. This is the reference every shortcut of
:mod:`atpsim.engine.joint.engine` is tested against; its cost grows with every transfer of
every call, so it is meant for small graphs and for measuring (``bench/bench_joint.py``).
"""

from __future__ import annotations

import numpy as np

from atpsim.engine.joint.calls import PROTOCOL_ROWS
from atpsim.engine.joint.flows import FlowSet, run_flow_set
from atpsim.engine.joint.graph import COMM, DELAY, GraphTimeline, TaskGraph
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.routes import PairRoutes, route_pairs


class _Nodes:
    """The static graph under construction, in blocks: each node's pair key (``src * n +
    dst``; -1 for a delay), bytes, protocol row, delay and dependencies (a CSR per block)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, ...]] = []
        self.n = 0

    def add(self, key: np.ndarray, nbytes: np.ndarray, protocol: int, delay: np.ndarray,
            dep_ptr: np.ndarray, dep_idx: np.ndarray) -> int:
        """Nodes ``n .. n + len(key) - 1``; node ``i`` of the block waits for
        ``dep_idx[dep_ptr[i]:dep_ptr[i + 1]]`` (global ids). Returns the first id."""
        first = self.n
        self.blocks.append((key, nbytes, np.full(len(key), protocol, dtype=np.int64), delay,
                            np.diff(dep_ptr), dep_idx))  # fmt: skip
        self.n += len(key)
        return first

    def one(self, seconds: float, deps: np.ndarray) -> int:
        return self.add(np.array([-1]), np.zeros(1), 0, np.array([seconds]),
                        np.array([0, len(deps)]), deps)  # fmt: skip

    def flow_set(self, routes: PairRoutes, n_gpus: int) -> FlowSet:
        key, nbytes, protocol, delay, lens, idx = (np.concatenate([b[i] for b in self.blocks])
                                                   for i in range(6))  # fmt: skip
        ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        pair = np.full(self.n, -1, dtype=np.int64)
        flow = key >= 0
        pair[flow] = routes.index(key[flow] // n_gpus, key[flow] % n_gpus)
        return FlowSet(pair, nbytes, protocol, np.zeros(self.n), (ptr, idx.astype(np.int64)), delay)


def run_plain(graph: TaskGraph, network: JointNetwork) -> GraphTimeline:
    """Every task of *graph* in one network of flows and delays on *network* (module
    docstring): task start and finish times, bytes and busy time per link."""
    nodes, n = _Nodes(), network.topology.n_gpus
    first, last = np.zeros(len(graph), dtype=np.int64), np.zeros(len(graph), dtype=np.int64)
    for task in range(len(graph)):
        deps = last[graph.deps(task)]
        if graph.kind[task] == COMM:
            first[task], last[task] = _comm_nodes(nodes, graph, network, task, deps)
        else:
            seconds = graph.seconds[task] * (1.0 if graph.kind[task] == DELAY else graph.fraction[task])
            first[task] = last[task] = nodes.one(float(seconds), deps)
    keys = np.unique(np.concatenate([b[0] for b in nodes.blocks]))
    routes = route_pairs(network.topology, keys[keys >= 0])
    flows = nodes.flow_set(routes, n)
    run = run_flow_set(routes, network.fabric, flows)
    stats = {"flows": int(np.count_nonzero(flows.pair >= 0)), "nodes": len(flows),
             "rate_solves": run.n_events}  # fmt: skip
    return GraphTimeline(graph, run.start_s[first], run.finish_s[last], run.link_bytes,
                         run.link_busy_s, stats)  # fmt: skip


def _comm_nodes(nodes: _Nodes, graph: TaskGraph, network: JointNetwork, task: int,
                deps: np.ndarray) -> tuple[int, int]:
    """A comm task's nodes (module docstring); returns (rendezvous node, end node)."""
    plan = network.plan(graph.calls[graph.call[task]])
    groups = graph.groups[task]
    meet = nodes.one(0.0, deps)
    if not plan.moves_bytes:
        return meet, nodes.one(float(plan.alone(groups).max()), np.array([meet]))
    fixed = nodes.one(plan.fixed_s, np.array([meet]))
    schedule = plan.schedule(groups)
    indptr, indices = schedule.dependencies()
    count = len(schedule.src)
    start = nodes.n
    # each transfer: its rendezvous dependencies (shifted to global ids), then the fixed delay
    lens = np.diff(indptr) + 1
    ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    idx = np.full(int(ptr[-1]), fixed, dtype=np.int64)
    within = np.repeat(ptr[:-1], np.diff(indptr)) + (np.arange(len(indices)) - np.repeat(indptr[:-1], np.diff(indptr)))
    idx[within] = indices + start
    nodes.add(schedule.src * network.topology.n_gpus + schedule.dst, schedule.transfer_bytes,
              PROTOCOL_ROWS.index(plan.protocol), np.zeros(count), ptr, idx)
    end = nodes.one(0.0, np.arange(start, nodes.n))
    return meet, end
