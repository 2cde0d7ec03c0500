"""The event loop of :mod:`~atpsim.engine.solvers.event_loop` as one compiled kernel (numba).

The same run, step for step and operation for operation, as the simpy loop over
:class:`~atpsim.engine.solvers.flow_network.FlowNetwork` and
:func:`~atpsim.engine.solvers.maxmin.max_min_rates`: a heap of arrival batches (time, then
creation order, as simpy orders timeouts), flows that finish within ``TIME_RTOL`` of now
popped together, rates re-solved by progressive filling over the connected component of the
links whose flows changed (whole when it does not close within ``MAX_EXPAND_ROUNDS``), every
float formed by the same operations in the same order, so every time comes out bit for bit
as before. What changes is the cost of an event: tens of numpy calls (each a few µs of
overhead on a few thousand flows) become loops over the flows and links it touches.

Written in plain Python over arrays; :func:`compiled_kernel` gives its numba compilation, or
None where numba is not installed (the simpy loop then runs).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import Any

import numpy as np


def _component(n_active, owner, link, n_inc, marked, marked_list, n_marked, in_comp, comp,
               active, flow_pair, route_ptr, route_links, max_rounds):
    """The active positions reachable from the *marked* seed links, round by round, into
    *comp* (flagged in *in_comp*): each round adds the flows touching a marked link, then
    marks their links; closed when a round marks nothing new. Returns (closed and not every
    active flow, links marked in all, positions in *comp*); not closed: all are solved."""
    n_comp = 0
    for _ in range(max_rounds):
        first_new = n_comp
        for i in range(n_inc):
            p = owner[i]
            if marked[link[i]] and not in_comp[p]:
                in_comp[p] = True
                comp[n_comp] = p
                n_comp += 1
        grown = False
        for c in range(first_new, n_comp):
            pair = flow_pair[active[comp[c]]]
            for j in range(route_ptr[pair], route_ptr[pair + 1]):
                lk = route_links[j]
                if not marked[lk]:
                    marked[lk] = True
                    marked_list[n_marked] = lk
                    n_marked += 1
                    grown = True
        if not grown:
            return n_comp < n_active, n_marked, n_comp
    return False, n_marked, n_comp


def _max_min(active, n_active, comp, n_sel, closed, flow_pair, route_ptr, route_links,
             capacity, rate, cap, count, gone, comp_links, level_rtol, inc_owner, inc_link,
             frozen):
    """Progressive filling over the links of the positions *comp[:n_sel]* (every active
    flow unless *closed*), round for round as
    :func:`~atpsim.engine.solvers.maxmin.max_min_rates`: the lowest share of any link is the
    level, flows crossing a link within ``level_rtol`` of it freeze there, their links give
    up that rate, again until every flow is frozen. Returns (rounds, incidences)."""
    m = 0
    n_links = 0
    for c in range(n_sel if closed else n_active):
        p = comp[c] if closed else c
        pair = flow_pair[active[p]]
        for j in range(route_ptr[pair], route_ptr[pair + 1]):
            lk = route_links[j]
            inc_owner[m] = p
            inc_link[m] = lk
            m += 1
            if count[lk] == 0:
                comp_links[n_links] = lk
                n_links += 1
                cap[lk] = capacity[lk]
            count[lk] += 1.0
    frozen[:n_active] = False
    rounds, n_comp = 0, m
    while m:
        rounds += 1
        level = np.inf
        for j in range(n_links):
            lk = comp_links[j]
            if count[lk] > 0:
                level = min(level, max(cap[lk], 0.0) / count[lk])
        bound = level * (1 + level_rtol)
        for i in range(m):
            lk = inc_link[i]
            p = inc_owner[i]
            if not frozen[p] and max(cap[lk], 0.0) / count[lk] <= bound:
                frozen[p] = True
                rate[active[p]] = level
        keep = 0
        for i in range(m):
            if frozen[inc_owner[i]]:
                gone[inc_link[i]] += 1
            else:
                inc_owner[keep] = inc_owner[i]
                inc_link[keep] = inc_link[i]
                keep += 1
        m = keep
        for j in range(n_links):
            lk = comp_links[j]
            cap[lk] -= level * gone[lk]
            count[lk] -= gone[lk]
            gone[lk] = 0
    for j in range(n_links):
        count[comp_links[j]] = 0.0
    return rounds, n_comp


def _release(flows, n_flows, now, latency, start, arrived, n_arrived, heap, batch_flows,
             batch_ptr, n_batches, values):
    """*flows[:n_flows]* (sorted) are ready at *now*: each joins after its path latency, one
    batch per latency value in ascending order (zero: at once, into *arrived*)."""
    n_values = 0
    for i in range(n_flows):
        f = flows[i]
        start[f] = now
        value = latency[f]
        seen = False
        for v in range(n_values):
            if values[v] == value:
                seen = True
                break
        if not seen:
            values[n_values] = value
            n_values += 1
    values[:n_values].sort()
    for v in range(n_values):
        value = values[v]
        if value == 0:
            for i in range(n_flows):
                if latency[flows[i]] == value:
                    arrived[n_arrived] = flows[i]
                    n_arrived += 1
        else:
            at = batch_ptr[n_batches]
            for i in range(n_flows):
                if latency[flows[i]] == value:
                    batch_flows[at] = flows[i]
                    at += 1
            batch_ptr[n_batches + 1] = at
            heapq.heappush(heap, (now + value, n_batches))
            n_batches += 1
    return n_arrived, n_batches


def _grown(a, n_used, size):
    """*a* with room for *size* entries, its first *n_used* kept."""
    out = np.empty(size, dtype=a.dtype)
    out[:n_used] = a[:n_used]
    return out


def _run(route_ptr, route_links, capacity, flow_pair, flow_bytes, waiting, rev_ptr, rev_idx,
         latency, max_rounds, time_rtol, level_rtol):
    """Start, finish, bytes delivered per flow, bytes per (local) link, flows done, and
    counts: events, rate solves, active incidences and component incidences summed over
    the solves, progressive-filling rounds."""
    n, n_links = len(flow_pair), len(capacity)
    remaining = flow_bytes.copy()
    delivered = np.zeros(n)
    rate = np.zeros(n)
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    link_bytes = np.zeros(n_links)
    room = 1024  # incidences of active flows held; grows by doubling
    active = np.empty(n, dtype=np.int64)
    owner = np.empty(room, dtype=np.int64)
    link = np.empty(room, dtype=np.int64)
    in_comp = np.zeros(n, dtype=np.bool_)
    marked = np.zeros(n_links, dtype=np.bool_)
    marked_list = np.empty(n_links, dtype=np.int64)
    cap = np.zeros(n_links)
    count = np.zeros(n_links)
    gone = np.zeros(n_links, dtype=np.int64)
    comp_links = np.empty(n_links, dtype=np.int64)
    arrived = np.empty(n, dtype=np.int64)
    batch_flows = np.empty(n, dtype=np.int64)
    batch_ptr = np.zeros(n + 1, dtype=np.int64)
    heap = [(0.0, 0)]
    heap.pop()
    inc_owner = np.empty(room, dtype=np.int64)
    inc_link = np.empty(room, dtype=np.int64)
    comp = np.empty(n, dtype=np.int64)
    frozen = np.zeros(n, dtype=np.bool_)
    done = np.empty(n, dtype=np.int64)
    position = np.empty(n, dtype=np.int64)
    children = np.empty(len(rev_idx), dtype=np.int64)
    ready = np.empty(n, dtype=np.int64)
    released = np.zeros(n, dtype=np.bool_)
    values = np.empty(n, dtype=np.float64)
    n_active = n_inc = n_marked = n_arrived = n_batches = n_done = 0
    changed = False
    now = 0.0
    stats = np.zeros(5, dtype=np.int64)  # events, solves, incidences, in components, rounds
    n_ready = 0
    for f in range(n):
        if waiting[f] == 0:
            ready[n_ready] = f
            n_ready += 1
    n_arrived, n_batches = _release(ready, n_ready, now, latency, start, arrived, n_arrived, heap,
                                    batch_flows, batch_ptr, n_batches, values)
    while n_done < n:
        if n_arrived:
            for a in range(n_arrived):
                f = arrived[a]
                pair = flow_pair[f]
                if n_inc + route_ptr[pair + 1] - route_ptr[pair] > room:
                    room = max(2 * room, n_inc + route_ptr[pair + 1] - route_ptr[pair])
                    owner = _grown(owner, n_inc, room)
                    link = _grown(link, n_inc, room)
                    inc_owner = np.empty(room, dtype=np.int64)
                    inc_link = np.empty(room, dtype=np.int64)
                for j in range(route_ptr[pair], route_ptr[pair + 1]):
                    owner[n_inc] = n_active
                    link[n_inc] = route_links[j]
                    n_inc += 1
                    if not marked[route_links[j]]:
                        marked[route_links[j]] = True
                        marked_list[n_marked] = route_links[j]
                        n_marked += 1
                active[n_active] = f
                n_active += 1
            n_arrived = 0
            changed = True
        if changed:
            changed = False
            if n_active:
                closed, n_marked, n_sel = _component(
                    n_active, owner, link, n_inc, marked, marked_list, n_marked, in_comp, comp,
                    active, flow_pair, route_ptr, route_links, max_rounds)
                rounds, n_comp = _max_min(active, n_active, comp, n_sel, closed, flow_pair,
                                          route_ptr, route_links, capacity, rate, cap, count,
                                          gone, comp_links, level_rtol, inc_owner, inc_link,
                                          frozen)
                for c in range(n_sel):
                    in_comp[comp[c]] = False
                stats[1] += 1
                stats[2] += n_inc
                stats[3] += n_comp
                stats[4] += rounds
            for j in range(n_marked):
                marked[marked_list[j]] = False
            n_marked = 0
        t_next = np.inf
        if n_active:
            first = np.inf
            for i in range(n_active):
                f = active[i]
                first = min(first, remaining[f] / rate[f])
            t_next = now + max(0.0, first)
        if len(heap) and heap[0][0] < t_next:
            t_next = heap[0][0]
        if t_next == np.inf:
            break
        while len(heap) and heap[0][0] <= t_next:
            b = heapq.heappop(heap)[1]
            for j in range(batch_ptr[b], batch_ptr[b + 1]):
                arrived[n_arrived] = batch_flows[j]
                n_arrived += 1
        dt = t_next - now
        now = t_next
        stats[0] += 1
        if dt > 0:
            for i in range(n_active):
                f = active[i]
                moved = rate[f] * dt
                remaining[f] -= moved
                delivered[f] += moved
        if not n_active:
            continue
        tol = time_rtol * max(now, 1e-12)
        n_gone = 0
        for i in range(n_active):
            f = active[i]
            if remaining[f] / rate[f] <= tol:
                done[n_gone] = f
                position[i] = -1
                n_gone += 1
            else:
                position[i] = i - n_gone
        if not n_gone:
            continue
        kept = 0
        for i in range(n_inc):
            p = owner[i]
            lk = link[i]
            if position[p] < 0:
                link_bytes[lk] += delivered[active[p]]
                if not marked[lk]:
                    marked[lk] = True
                    marked_list[n_marked] = lk
                    n_marked += 1
            else:
                owner[kept] = position[p]
                link[kept] = lk
                kept += 1
        n_inc = kept
        kept = 0
        for i in range(n_active):
            if position[i] >= 0:
                active[kept] = active[i]
                kept += 1
        n_active = kept
        changed = True
        n_children = 0
        for g in range(n_gone):
            f = done[g]
            rate[f] = 0.0
            finish[f] = now
            for j in range(rev_ptr[f], rev_ptr[f + 1]):
                children[n_children] = rev_idx[j]
                waiting[rev_idx[j]] -= 1
                n_children += 1
        n_done += n_gone
        n_ready = 0
        for j in range(n_children):
            c = children[j]
            if waiting[c] == 0 and not released[c]:
                released[c] = True
                ready[n_ready] = c
                n_ready += 1
        if n_ready:
            ready[:n_ready].sort()
            n_arrived, n_batches = _release(ready, n_ready, now, latency, start, arrived,
                                            n_arrived, heap, batch_flows, batch_ptr, n_batches,
                                            values)
    return start, finish, delivered, link_bytes, n_done, stats


@functools.cache
def compiled_kernel() -> Callable[..., Any] | None:
    """:func:`_run` compiled by numba (imported here, on first use: importing it costs a few
    tenths of a second; the machine code is cached on disk), None where numba is missing."""
    try:
        from numba import njit
    except ImportError:  # pragma: no cover
        return None
    jit = njit(cache=True, error_model="numpy")
    for name in ("_component", "_max_min", "_release", "_grown"):  # _run calls them compiled
        globals()[name] = jit(globals()[name])
    return jit(_run)
