"""Link-disjoint parts of a flow set run separately, and identical parts once.

Max-min rates decompose over the connected components of the graph whose edges join a flow
to the links it crosses and to the flows it depends on: flows of two components never share
a link and never wait for each other, so each component runs as it would alone. Two
components that are the same problem up to renaming (the same flows in the same order, with
the same bytes, protocol, release time and dependencies, over routes that visit links of
the same capacity, class and latency in the same pattern, links numbered by first use) have
the same answer; one is simulated and its times and per-link counts are copied to the other.
This is how the data-parallel groups of the eight TP positions of a stage (eight NIC rails,
each with its own ring or tree and its own pipeline sends) are timed once, where no rank shift
maps the episode onto itself (NCCL's trees are not shift invariant).
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from atpsim.engine.joint.flows import FlowRun, FlowSet, run_flow_set
from atpsim.engine.routes import PairRoutes, subset
from atpsim.engine.solvers.flow_network import Fabric


def run_by_components(routes: PairRoutes, fabric: Fabric, flows: FlowSet) -> tuple[FlowRun, int, int]:
    """:func:`~atpsim.engine.joint.flows.run_flow_set` of *flows*, each distinct link-disjoint
    component once (module docstring); also how many components there were and how many
    were simulated."""
    label = _components(routes, flows)
    n_comp = int(label.max()) + 1 if len(label) else 0
    if n_comp <= 1:
        return run_flow_set(routes, fabric, flows), n_comp, n_comp
    members = [np.flatnonzero(label == c) for c in range(n_comp)]
    parts = [_part(routes, fabric, flows, idx) for idx in members]
    solved: dict[str, tuple[FlowRun, np.ndarray]] = {}
    n = len(flows)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    link_bytes, link_busy = np.zeros(len(fabric.capacity_Bps)), np.zeros(len(fabric.capacity_Bps))
    events = 0
    for idx, (key, sub, links) in zip(members, parts, strict=True):
        if key not in solved:
            solved[key] = (run_flow_set(*sub), links)
            events += solved[key][0].n_events
        run, rep_links = solved[key]
        start[idx], finish[idx] = run.start_s, run.finish_s
        link_bytes[links] = run.link_bytes[rep_links]
        link_busy[links] = run.link_busy_s[rep_links]
    return FlowRun(start, finish, link_bytes, link_busy, events), n_comp, len(solved)


def _components(routes: PairRoutes, flows: FlowSet) -> np.ndarray:
    """Component label of each flow: flows joined through shared links and dependencies."""
    n = len(flows)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lens = routes.route_len[flows.pair]
    owner = np.repeat(np.arange(n), lens)
    _, links = routes.flow_links(flows.pair)
    _, link_node = np.unique(links, return_inverse=True)
    ptr, idx = flows.deps
    child = np.repeat(np.arange(n), np.diff(ptr))
    rows = np.concatenate([owner, child])
    cols = np.concatenate([n + link_node.ravel(), idx])
    size = n + (int(link_node.max()) + 1 if len(link_node) else 0)
    graph = coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(size, size))
    _, label = connected_components(graph, directed=False)
    _, compact = np.unique(label[:n], return_inverse=True)
    return compact.astype(np.int64)


def _part(routes: PairRoutes, fabric: Fabric, flows: FlowSet, idx: np.ndarray
          ) -> tuple[str, tuple[PairRoutes, Fabric, FlowSet], np.ndarray]:
    """One component: its signature, its own (routes, fabric, flows) and its links in the
    order of first use (the renaming that makes twins equal)."""
    pairs = flows.pair[idx]
    keys = np.unique(routes.keys[pairs])
    sub_routes = subset(routes, keys)
    local_pair = np.searchsorted(sub_routes.keys, routes.keys[pairs])
    where = np.full(len(flows), -1, dtype=np.int64)
    where[idx] = np.arange(len(idx))
    ptr, dep = flows.deps
    lens = np.diff(ptr)[idx]
    sub_ptr = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lens, out=sub_ptr[1:])
    rows = np.repeat(ptr[idx], lens) + (np.arange(int(lens.sum())) - np.repeat(sub_ptr[:-1], lens))
    sub_dep = where[dep[rows]]
    sub = FlowSet(local_pair, flows.nbytes[idx], flows.protocol[idx], flows.release_s[idx],
                  (sub_ptr, sub_dep))  # fmt: skip
    _, seq = sub_routes.flow_links(local_pair)
    first = np.unique(seq, return_index=True)
    order = first[0][np.argsort(first[1], kind="stable")]
    relabel = np.argsort(order)[np.searchsorted(np.sort(order), seq)]
    digest = hashlib.sha1()
    for array in (sub.nbytes, sub.protocol, sub.release_s, sub_ptr, sub_dep,
                  sub_routes.route_len[local_pair], relabel, sub_routes.latency_s[local_pair],
                  np.asarray(fabric.capacity_Bps)[order], np.asarray(fabric.link_class)[order]):
        digest.update(np.ascontiguousarray(array).tobytes())
        digest.update(b"|")
    return digest.hexdigest(), (sub_routes, fabric, sub), order
