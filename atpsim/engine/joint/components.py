"""Link-disjoint parts of a flow set run separately, and identical parts once.

The joint network's side of :mod:`atpsim.engine.reductions.components`: the items are flows,
joined through the links they cross and the flows they wait for. Two parts are the same
problem up to renaming when they hold the same flows in the same order, with the same bytes,
protocol, release time and dependencies, over routes that visit links of the same capacity,
class and latency in the same pattern (links numbered by first use); one is simulated and
its times and per-link counts are copied to the other. This is how the data-parallel groups
of the eight TP positions of a stage (eight NIC rails, each with its own ring or tree and its
own pipeline sends) are timed once, where no rank shift maps the episode onto itself (NCCL's
trees are not shift invariant).
"""

from __future__ import annotations

import hashlib

import numpy as np

from atpsim.engine.joint.flows import FlowRun, FlowSet, run_flow_set
from atpsim.engine.reductions.components import Split, split
from atpsim.engine.routes import PairRoutes, subset
from atpsim.engine.solvers.flow_network import Fabric


def run_by_components(routes: PairRoutes, fabric: Fabric, flows: FlowSet) -> tuple[FlowRun, int, int]:
    """:func:`~atpsim.engine.joint.flows.run_flow_set` of *flows*, each distinct link-disjoint
    component once (module docstring); also how many components there were and how many
    were simulated."""
    n, n_links = len(flows), len(fabric.capacity_Bps)
    parts = _split(routes, flows, n_links)
    if parts.n <= 1:
        return run_flow_set(routes, fabric, flows), parts.n, parts.n
    local = np.empty(n, dtype=np.int64)
    local[parts.items] = np.arange(n) - np.repeat(parts.item_bounds[:-1], np.diff(parts.item_bounds))
    subs = [_sub_flows(flows, parts.members(c), local) for c in range(parts.n)]
    found = parts.twins([_signature(routes, fabric, sub, parts.numbers(c), parts.links(c))
                         for c, sub in enumerate(subs)])  # fmt: skip
    runs = {c: _run_part(routes, fabric, subs[c]) for c in found.distinct()}
    (start, finish), (link_bytes, link_busy) = found.spread(
        {c: (run.start_s, run.finish_s) for c, run in runs.items()},
        {c: (run.link_bytes, run.link_busy_s) for c, run in runs.items()}, n, n_links)
    events = sum(run.n_events for run in runs.values())
    return FlowRun(start, finish, link_bytes, link_busy, events), parts.n, len(runs)


def _split(routes: PairRoutes, flows: FlowSet, n_links: int) -> Split:
    """The flows' components: joined through shared links and dependencies."""
    owner, links = routes.flow_links(flows.pair)
    ptr, idx = flows.deps
    child = np.repeat(np.arange(len(flows)), np.diff(ptr))
    return split(len(flows), owner, links, n_links, (child, idx))


def _sub_flows(flows: FlowSet, idx: np.ndarray, local: np.ndarray) -> FlowSet:
    """The flows *idx* (one component; *local*: each flow's place in its component) as a flow
    set of their own, dependencies renumbered; pairs still index the whole routes."""
    ptr, dep = flows.deps
    lens = np.diff(ptr)[idx]
    sub_ptr = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lens, out=sub_ptr[1:])
    rows = np.repeat(ptr[idx], lens) + (np.arange(int(lens.sum())) - np.repeat(sub_ptr[:-1], lens))
    return FlowSet(flows.pair[idx], flows.nbytes[idx], flows.protocol[idx], flows.release_s[idx],
                   (sub_ptr, local[dep[rows]]))  # fmt: skip


def _signature(routes: PairRoutes, fabric: Fabric, sub: FlowSet, number: np.ndarray,
               links: np.ndarray) -> str:
    """A component's identity: its flows, dependencies, route lengths, link numbers of first
    use, latencies and the capacity and class of its links in that order."""
    pairs = sub.pair
    digest = hashlib.sha1()
    for array in (sub.nbytes, sub.protocol, sub.release_s, *sub.deps, routes.route_len[pairs],
                  number, routes.latency_s[pairs], np.asarray(fabric.capacity_Bps)[links],
                  np.asarray(fabric.link_class)[links]):  # fmt: skip
        digest.update(np.ascontiguousarray(array).tobytes())
        digest.update(b"|")
    return digest.hexdigest()


def _run_part(routes: PairRoutes, fabric: Fabric, sub: FlowSet) -> FlowRun:
    """One component run alone over the routes of its own pairs."""
    keys = np.unique(routes.keys[sub.pair])
    sub_routes = subset(routes, keys)
    local_pair = np.searchsorted(sub_routes.keys, routes.keys[sub.pair])
    return run_flow_set(sub_routes, fabric, FlowSet(local_pair, sub.nbytes, sub.protocol,
                                                    sub.release_s, sub.deps))
