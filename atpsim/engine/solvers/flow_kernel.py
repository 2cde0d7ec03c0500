"""The event loop of :mod:`~atpsim.engine.solvers.event_loop` as one compiled kernel (numba),
with every event's work proportional to the flows whose rates it changes.

The same run as the reference loop (:class:`~atpsim.engine.solvers.flow_loop.Loop` in the
:data:`~atpsim.engine.solvers.flow_loop.COLLECTIVE` order, over
:class:`~atpsim.engine.solvers.flow_network.FlowNetwork` and
:func:`~atpsim.engine.solvers.maxmin.max_min_rates`): a heap of arrival batches (time, then
creation order), flows that finish within ``TIME_RTOL`` of now
finish together, rates are max-min fair. What an event costs differs (SimGrid's lazy max-min,
Casanova et al., "Versatile, scalable and accurate simulation of distributed applications and
platforms", JPDC 2014, Sec. 4.2):

- each link keeps the list of the active flows that cross it (a doubly linked list over
  incidence slots), so the flows whose sharing changed, the connected component of the links
  that flows joined or left, are found by a walk over that component alone, closed every time
  (max-min fairness decomposes over components, so solving the component is solving all);
- progressive filling over the component takes its links from a heap keyed by fair share, so
  a solve costs its incidences times a logarithm, however many distinct levels it has;
- a flow's bytes are settled only when its rate changes or it finishes (``remaining -= rate *
  (now - last)``), and its finish time ``last + remaining / rate`` sits in an indexed heap, so
  the next completion is the heap's top instead of a pass over every active flow.

Times agree with the reference loop to float rounding (the bytes of a flow are summed in fewer,
longer steps; tests hold them to 1e-9 relative, as both are held to a plain reference).

Written in plain Python over arrays; :func:`compiled_kernel` gives its numba compilation, or
None where numba is not installed (the reference loop then runs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.solvers.numba_target import load_cpu_target

# Fields and rows of the kernel's state arrays (see :func:`_state`). A flow's record (one row
# per flow, so an event touches a cache line or two per flow), floats, integers and flags:
REMAINING, DELIVERED, RATE, NEW_RATE, LAST = range(5)
SLOT_BASE, FPOS = range(2)
IN_COMP, FROZEN, RELEASED = range(3)
# rows of n floats: the finish and arrival heaps' keys, latency values, start and finish times
FKEY, AKEY, VALUES, START, FINISH = range(5)
# rows of n + 1 integers: lists and heaps by position
COMP, FITEM, AITEM, APOS, ARRIVED, BATCH_FLOWS, BATCH_PTR, DONE, READY = range(9)
# per link, floats and integers (PEND: bytes of the flows not yet joined, per incidence):
LINK_BYTES, CAP, LKEY, PEND = range(4)
HEAD, SEEDS, COUNT, LITEM, LPOS, FULL, DIRTY = range(7)
# per link, flags:
MARKED, TOUCHED = range(2)
# per incidence slot:
NEXT, PREV, FLOW = range(3)
#: Slots used before the first compaction (then twice those in use, at least).
FIRST_SLOTS = 1 << 20
#: Events between two checks of every link's bytes to come against the horizon (a pass over
#: the links: a few operations an event at this spacing).
HORIZON_CHECK_EVENTS = 4096


def _sift_up(key, item, pos, i):
    """Indexed binary min-heap (*key*, *item*; *pos[item]* its place): move entry *i* up."""
    k, it = key[i], item[i]
    while i > 0:
        parent = (i - 1) >> 1
        if key[parent] <= k:
            break
        key[i], item[i] = key[parent], item[parent]
        pos[item[i]] = i
        i = parent
    key[i], item[i] = k, it
    pos[it] = i


def _sift_down(key, item, pos, size, i):
    """Move entry *i* of the indexed heap down to its place."""
    k, it = key[i], item[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and key[child + 1] < key[child]:
            child += 1
        if key[child] >= k:
            break
        key[i], item[i] = key[child], item[child]
        pos[item[i]] = i
        i = child
    key[i], item[i] = k, it
    pos[it] = i


def _heap_set(key, item, pos, size, it, k):
    """Give *it* the key *k* (inserted when absent); returns the new size."""
    i = pos[it]
    if i < 0:
        key[size], item[size] = k, it
        _sift_up(key, item, pos, size)
        return size + 1
    old = key[i]
    key[i] = k
    if k < old:
        _sift_up(key, item, pos, i)
    else:
        _sift_down(key, item, pos, size, i)
    return size


def _heap_remove(key, item, pos, size, it):
    """Take *it* out of the indexed heap; returns the new size."""
    i = pos[it]
    pos[it] = -1
    size -= 1
    if i < size:
        key[i], item[i] = key[size], item[size]
        pos[item[i]] = i
        if i > 0 and key[i] < key[(i - 1) >> 1]:
            _sift_up(key, item, pos, i)
        else:
            _sift_down(key, item, pos, size, i)
    return size


def _seed(lk, marked, seeds, n_seeds):
    """Mark link *lk* as one whose sharing changed; returns the new seed count."""
    if not marked[lk]:
        marked[lk] = True
        seeds[n_seeds] = lk
        n_seeds += 1
    return n_seeds


def _link_in(f, base, flow_pair, route_ptr, route_links, slots, head):
    """Put flow *f*'s incidences in slots ``base ..`` and at the head of its links' lists."""
    nxt, prv, owner = slots[NEXT], slots[PREV], slots[FLOW]
    pair = flow_pair[f]
    for j in range(route_ptr[pair + 1] - route_ptr[pair]):
        lk = route_links[route_ptr[pair] + j]
        s = base + j
        owner[s] = f
        prv[s] = -1
        nxt[s] = head[lk]
        if head[lk] >= 0:
            prv[head[lk]] = s
        head[lk] = s


def _compact(n_joined, n_heap, flow_pair, route_ptr, route_links, slots, free_head, ints, irec,
             head):
    """Every linked flow (those in the finish heap and the first *n_joined* arrived ones)
    moved to slots ``0 ..`` in turn and relinked, the freed runs forgotten: the slots in use
    stay within about twice the incidences in flight, however route lengths change. Returns
    the slots used."""
    for i in range(n_heap + n_joined):
        f = ints[FITEM, i] if i < n_heap else ints[ARRIVED, i - n_heap]
        pair = flow_pair[f]
        for j in range(route_ptr[pair], route_ptr[pair + 1]):
            head[route_links[j]] = -1
    free_head[:] = -1
    bump = 0
    for i in range(n_heap + n_joined):
        f = ints[FITEM, i] if i < n_heap else ints[ARRIVED, i - n_heap]
        irec[f, SLOT_BASE] = bump
        _link_in(f, bump, flow_pair, route_ptr, route_links, slots, head)
        bump += route_ptr[flow_pair[f] + 1] - route_ptr[flow_pair[f]]
    return bump


def _join(n_arrived, now, n_heap, flow_pair, route_ptr, route_links, slots, free_head, room,
          ints, irec, floats, lflt, links, marked, n_seeds, stats):
    """The arrived flows start moving: each takes a run of incidence slots (a freed run of its
    length, else fresh ones, after compacting past *room[1]* of them) and is linked into its
    links' lists, which become seeds; their bytes leave their links' PEND. *room*: slots
    used, soft limit, hard limit. Returns the seeds."""
    head, seeds = links[HEAD], links[SEEDS]
    for a in range(n_arrived):
        f = ints[ARRIVED, a]
        pair = flow_pair[f]
        length = route_ptr[pair + 1] - route_ptr[pair]
        base = free_head[length]
        if base >= 0:
            free_head[length] = slots[NEXT, base]
        else:
            if room[0] + length > room[1]:
                room[0] = _compact(a, n_heap, flow_pair, route_ptr, route_links, slots,
                                   free_head, ints, irec, head)
                room[1] = min(max(room[1], 2 * (room[0] + length)), room[2])
                stats[5] += 1
            base = room[0]
            room[0] += length
        irec[f, SLOT_BASE] = base
        floats[f, LAST] = now
        _link_in(f, base, flow_pair, route_ptr, route_links, slots, head)
        for j in range(route_ptr[pair], route_ptr[pair + 1]):
            n_seeds = _seed(route_links[j], marked, seeds, n_seeds)
            lflt[PEND, route_links[j]] -= floats[f, REMAINING]
    return n_seeds


def _component(n_seeds, marked, links, slots, flags, ints, flow_pair, route_ptr, route_links,
               capacity, lflt):
    """The active flows reachable from the seed links over shared links, into the COMP row
    (flagged IN_COMP, not FROZEN); every link they cross joins the seeds, at full capacity
    (CAP) with its flows counted (COUNT), as progressive filling starts. Returns (seeds,
    flows)."""
    head, seeds, count, nxt, owner = links[HEAD], links[SEEDS], links[COUNT], slots[NEXT], slots[FLOW]
    cap = lflt[CAP]
    for q in range(n_seeds):
        cap[seeds[q]] = capacity[seeds[q]]
        count[seeds[q]] = 0
    n_comp = 0
    q = 0
    while q < n_seeds:
        s = head[seeds[q]]
        q += 1
        while s >= 0:
            f = owner[s]
            s = nxt[s]
            if flags[f, IN_COMP]:
                continue
            flags[f, IN_COMP] = True
            flags[f, FROZEN] = False
            ints[COMP, n_comp] = f
            n_comp += 1
            pair = flow_pair[f]
            for j in range(route_ptr[pair], route_ptr[pair + 1]):
                lk = route_links[j]
                if not marked[lk]:
                    marked[lk] = True
                    seeds[n_seeds] = lk
                    n_seeds += 1
                    cap[lk] = capacity[lk]
                    count[lk] = 0
                count[lk] += 1
    return n_seeds, n_comp


def _heapify(n_links, lflt, links):
    """The component's links that carry flows in the share heap (built in place: linear, not
    a push per link). Returns the heap's size."""
    cap, count, lkey, litem, lpos = lflt[CAP], links[COUNT], lflt[LKEY], links[LITEM], links[LPOS]
    size = 0
    for j in range(n_links):
        lk = links[SEEDS, j]
        if count[lk] > 0:
            lkey[size], litem[size] = max(cap[lk], 0.0) / count[lk], lk
            lpos[lk] = size
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(lkey, litem, lpos, size, i)
    return size


def _max_min(n_comp, n_links, capacity, flow_pair, route_ptr, route_links, slots, ints, flags,
             floats, lflt, links, touched, level_rtol):
    """Progressive filling over the component's flows and links: the lowest fair share
    ``max(cap, 0) / count`` of any link is the level, the unfrozen flows on every link within
    ``level_rtol`` of it freeze there (NEW_RATE) and give that rate back on each of their
    links, whose shares are then updated in the heap once each; again until all are frozen.
    Returns the number of levels."""
    cap, count, lkey, litem, lpos = lflt[CAP], links[COUNT], lflt[LKEY], links[LITEM], links[LPOS]
    head, full, dirty, nxt, owner = links[HEAD], links[FULL], links[DIRTY], slots[NEXT], slots[FLOW]
    size = _heapify(n_links, lflt, links)
    levels = 0
    while size:
        levels += 1
        level = lkey[0]
        bound = level * (1 + level_rtol)
        n_full = 0
        while size and lkey[0] <= bound:
            full[n_full] = litem[0]
            size = _heap_remove(lkey, litem, lpos, size, litem[0])
            n_full += 1
        n_dirty = 0
        for i in range(n_full):
            s = head[full[i]]
            while s >= 0:
                f = owner[s]
                s = nxt[s]
                if flags[f, FROZEN]:
                    continue
                flags[f, FROZEN] = True
                floats[f, NEW_RATE] = level
                pair = flow_pair[f]
                for j in range(route_ptr[pair], route_ptr[pair + 1]):
                    lk = route_links[j]
                    cap[lk] -= level
                    count[lk] -= 1
                    if lpos[lk] >= 0 and not touched[lk]:
                        touched[lk] = True
                        dirty[n_dirty] = lk
                        n_dirty += 1
        for i in range(n_dirty):
            lk = dirty[i]
            touched[lk] = False
            if count[lk] > 0:
                size = _heap_set(lkey, litem, lpos, size, lk, max(cap[lk], 0.0) / count[lk])
            else:
                size = _heap_remove(lkey, litem, lpos, size, lk)
    return levels


def _settle(f, now, floats):
    """Move flow *f*'s bytes at its rate from its last settlement to *now*."""
    dt = now - floats[f, LAST]
    if dt > 0:
        moved = floats[f, RATE] * dt
        floats[f, REMAINING] -= moved
        floats[f, DELIVERED] += moved
    floats[f, LAST] = now


def _resolve(n_seeds, now, n_heap, capacity, flow_pair, route_ptr, route_links, slots, ints,
             irec, flags, floats, col, lflt, links, marks, level_rtol, stats):
    """New max-min rates over the component of the seed links; each flow whose rate changed
    (or that just joined) is settled and its finish time rescheduled. Returns the finish
    heap's size."""
    marked = marks[MARKED]
    n_links, n_comp = _component(n_seeds, marked, links, slots, flags, ints, flow_pair,
                                 route_ptr, route_links, capacity, lflt)
    if n_comp:
        stats[4] += _max_min(n_comp, n_links, capacity, flow_pair, route_ptr, route_links, slots,
                             ints, flags, floats, lflt, links, marks[TOUCHED], level_rtol)
        stats[1] += 1
        stats[2] += n_comp
    for c in range(n_comp):
        f = ints[COMP, c]
        flags[f, IN_COMP] = False
        stats[3] += route_ptr[flow_pair[f] + 1] - route_ptr[flow_pair[f]]
        if floats[f, NEW_RATE] != floats[f, RATE] or irec[f, FPOS] < 0:
            _settle(f, now, floats)
            floats[f, RATE] = floats[f, NEW_RATE]
            n_heap = _heap_set(col[FKEY], ints[FITEM], irec[:, FPOS], n_heap, f,
                               now + floats[f, REMAINING] / floats[f, RATE])
    for j in range(n_links):
        marked[links[SEEDS, j]] = False
    return n_heap


def _finish(now, bound, n_heap, flow_pair, route_ptr, route_links, slots, free_head, ints,
            irec, floats, col, lflt, links, marked):
    """The flows due by *bound* finish: settled, unlinked from their links' lists (which
    become seeds and count their bytes), their slots freed. Returns (heap size, flows done
    (in the DONE row), seeds)."""
    nxt, prv = slots[NEXT], slots[PREV]
    head, seeds, link_bytes = links[HEAD], links[SEEDS], lflt[LINK_BYTES]
    n_gone = n_seeds = 0
    while n_heap and col[FKEY, 0] <= bound:
        f = ints[FITEM, 0]
        n_heap = _heap_remove(col[FKEY], ints[FITEM], irec[:, FPOS], n_heap, f)
        _settle(f, now, floats)
        ints[DONE, n_gone] = f
        n_gone += 1
        pair = flow_pair[f]
        base = irec[f, SLOT_BASE]
        length = route_ptr[pair + 1] - route_ptr[pair]
        for j in range(length):
            lk = route_links[route_ptr[pair] + j]
            s = base + j
            link_bytes[lk] += floats[f, DELIVERED]
            if prv[s] >= 0:
                nxt[prv[s]] = nxt[s]
            else:
                head[lk] = nxt[s]
            if nxt[s] >= 0:
                prv[nxt[s]] = prv[s]
            n_seeds = _seed(lk, marked, seeds, n_seeds)
        nxt[base] = free_head[length]
        free_head[length] = base
        floats[f, RATE] = 0.0
        col[FINISH, f] = now
    return n_heap, n_gone, n_seeds


def _children(n_gone, rev_ptr, rev_idx, waiting, flags, ints):
    """The flows the finished DONE flows were the last wait of, into the READY row."""
    n_ready = 0
    for g in range(n_gone):
        f = ints[DONE, g]
        for j in range(rev_ptr[f], rev_ptr[f + 1]):
            c = rev_idx[j]
            waiting[c] -= 1
            if waiting[c] == 0 and not flags[c, RELEASED]:
                flags[c, RELEASED] = True
                ints[READY, n_ready] = c
                n_ready += 1
    return n_ready


def _release(n_ready, now, latency, ints, col, n_arrived, n_pending, n_batches):
    """The READY flows start at *now*: each joins after its path latency, one batch per
    latency value (zero: at once, into ARRIVED), the batches in an indexed heap by arrival
    time (flows arriving together are solved together, in whatever order). Returns (arrived,
    pending batches, batches made)."""
    values, ptr, members = col[VALUES], ints[BATCH_PTR], ints[BATCH_FLOWS]
    n_values = 0
    for i in range(n_ready):
        f = ints[READY, i]
        col[START, f] = now
        seen = False
        for v in range(n_values):
            if values[v] == latency[f]:
                seen = True
                break
        if not seen:
            values[n_values] = latency[f]
            n_values += 1
    for v in range(n_values):
        value = values[v]
        at = ptr[n_batches]
        for i in range(n_ready):
            f = ints[READY, i]
            if latency[f] != value:
                continue
            if value == 0:
                ints[ARRIVED, n_arrived] = f
                n_arrived += 1
            else:
                members[at] = f
                at += 1
        if value != 0:
            ptr[n_batches + 1] = at
            n_pending = _heap_set(col[AKEY], ints[AITEM], ints[APOS], n_pending, n_batches,
                                  now + value)
            n_batches += 1
    return n_arrived, n_pending, n_batches


def _next_time(now, n_heap, n_pending, col):
    """The next event: the first finish (not before now) or the first pending arrival."""
    t_next = np.inf
    if n_heap:
        t_next = max(now, col[FKEY, 0])
    if n_pending and col[AKEY, 0] < t_next:
        t_next = col[AKEY, 0]
    return t_next


def _arrive(t_next, n_pending, ints, col):
    """The batches due by *t_next* arrive (into ARRIVED). Returns (arrived, pending)."""
    n_arrived = 0
    while n_pending and col[AKEY, 0] <= t_next:
        b = ints[AITEM, 0]
        n_pending = _heap_remove(col[AKEY], ints[AITEM], ints[APOS], n_pending, b)
        for j in range(ints[BATCH_PTR, b], ints[BATCH_PTR, b + 1]):
            ints[ARRIVED, n_arrived] = ints[BATCH_FLOWS, j]
            n_arrived += 1
    return n_arrived, n_pending


def _past(now, limit, capacity, lflt):
    """Whether the run surely ends after *limit*: the bytes still to join some link take
    longer than ``limit - now`` at its full capacity (flows move their bytes over every link
    of their route at once, so all a link's flows are done no sooner)."""
    for lk in range(len(capacity)):
        if now + lflt[PEND, lk] / capacity[lk] > limit:
            return True
    return False


def _loop(route_ptr, route_links, capacity, flow_pair, waiting, rev_ptr, rev_idx, latency,
          time_rtol, level_rtol, limit, guard, floats, irec, flags, col, ints, lflt, links,
          marks, slots, free_head, room, stats):
    """The event loop over the state of :func:`_state` (no allocation, no reference counts).
    Returns the number of flows done; stats: events, solves, flows and incidences in the
    solved components (summed), progressive-filling levels, slot compactions, and 1 where
    the run stopped at its horizon: the next event or a link's bytes to come (every
    :data:`HORIZON_CHECK_EVENTS` events) past *limit* (s) while no flow of index *guard* or
    above had finished."""
    n = len(flow_pair)
    n_ready = 0
    for f in range(n):
        if waiting[f] == 0:
            ints[READY, n_ready] = f
            n_ready += 1
    now = 0.0
    n_arrived, n_pending, n_batches = _release(n_ready, now, latency, ints, col, 0, 0, 0)
    n_seeds = n_heap = n_done = 0
    guarded = False
    while n_done < n:
        n_seeds = _join(n_arrived, now, n_heap, flow_pair, route_ptr, route_links, slots,
                        free_head, room, ints, irec, floats, lflt, links, marks[MARKED], n_seeds,
                        stats)
        if n_seeds:
            n_heap = _resolve(n_seeds, now, n_heap, capacity, flow_pair, route_ptr, route_links,
                              slots, ints, irec, flags, floats, col, lflt, links, marks,
                              level_rtol, stats)
        t_next = _next_time(now, n_heap, n_pending, col)
        if t_next == np.inf:
            break
        if not guarded and (t_next > limit or (stats[0] % HORIZON_CHECK_EVENTS == 0
                                               and limit < np.inf
                                               and _past(now, limit, capacity, lflt))):
            stats[6] = 1
            break
        n_arrived, n_pending = _arrive(t_next, n_pending, ints, col)
        now = t_next
        stats[0] += 1
        n_heap, n_gone, n_seeds = _finish(now, now + time_rtol * max(now, 1e-12), n_heap,
                                          flow_pair, route_ptr, route_links, slots, free_head,
                                          ints, irec, floats, col, lflt, links, marks[MARKED])
        n_done += n_gone
        for g in range(n_gone):
            guarded = guarded or ints[DONE, g] >= guard
        n_ready = _children(n_gone, rev_ptr, rev_idx, waiting, flags, ints)
        n_arrived, n_pending, n_batches = _release(n_ready, now, latency, ints, col,
                                                   n_arrived, n_pending, n_batches)
    return n_done


def _state(route_ptr: np.ndarray, route_links: np.ndarray, flow_pair: np.ndarray,
           flow_bytes: np.ndarray, n_links: int) -> tuple[np.ndarray, ...]:
    """The kernel's arrays (rows named by the module's constants): per flow floats, integers
    and flags, per link floats, integers and marks, incidence slots (as many as all flows
    have, so never grown; only the pages of those in use are touched: freed runs are reused,
    and past a soft limit the slots are compacted; 32-bit where they fit, :func:`slot_dtype`),
    freed slot runs by length, the slots'
    use (in use, soft limit, all), stats."""
    n = len(flow_pair)
    lengths = np.diff(route_ptr)[flow_pair]
    floats = np.zeros((n, 5))
    floats[:, REMAINING] = flow_bytes
    irec = np.empty((n, 2), dtype=np.int64)
    irec[:, FPOS] = -1
    col = np.empty((5, n))
    col[[START, FINISH]] = np.nan
    ints = np.empty((9, n + 1), dtype=np.int64)
    ints[APOS] = -1
    ints[BATCH_PTR, 0] = 0
    links = np.empty((7, n_links), dtype=np.int64)
    links[[HEAD, LPOS]] = -1
    free_head = np.full(int(lengths.max(initial=0)) + 1, -1, dtype=np.int64)
    total = int(lengths.sum())
    room = np.array([0, min(FIRST_SLOTS, total), total], dtype=np.int64)
    lflt = np.zeros((4, n_links))
    per_pair = np.bincount(flow_pair, weights=flow_bytes, minlength=len(route_ptr) - 1)
    lflt[PEND] = _pending_bytes(route_ptr, route_links, per_pair, n_links)
    return (floats, irec, np.zeros((n, 3), dtype=np.bool_), col, ints, lflt, links,
            np.zeros((2, n_links), dtype=np.bool_), np.empty((3, total), dtype=slot_dtype(n, total)),
            free_head, room, np.zeros(7, dtype=np.int64))


#: Pairs whose route links are summed per numpy pass in :func:`_pending_bytes`.
PEND_CHUNK_PAIRS = 1 << 16


def _pending_bytes(route_ptr: np.ndarray, route_links: np.ndarray, per_pair: np.ndarray,
                   n_links: int) -> np.ndarray:
    """Bytes each link will carry: *per_pair* bytes over every link of the pair's route,
    summed :data:`PEND_CHUNK_PAIRS` pairs at a time (one pass over every route link at once
    made two copies of them, 270 MB on the Rabenseifner quotient of a 65,536-GPU torus: the
    run's peak). Read only by the horizon check (:func:`_past`)."""
    pending = np.zeros(n_links)
    for i in range(0, len(per_pair), PEND_CHUNK_PAIRS):
        end = min(i + PEND_CHUNK_PAIRS, len(per_pair))
        lo, hi = route_ptr[i], route_ptr[end]
        weights = np.repeat(per_pair[i:end], np.diff(route_ptr[i:end + 1]))
        pending += np.bincount(route_links[lo:hi], weights=weights, minlength=n_links)
    return pending


def slot_dtype(n_flows: int, n_slots: int) -> type[np.signedinteger]:
    """The integer type of the incidence slots: each holds a slot index, -1 or a flow index,
    so 32 bits where those fit (the slots are the run's largest array: 3 x 16.7 M on the
    Rabenseifner quotient of a 65,536-GPU torus, 200 MB instead of 400 MB touched)."""
    return np.int32 if max(n_flows, n_slots) < 2**31 else np.int64


def run_kernel(loop: Callable[..., int], route_ptr: np.ndarray, route_links: np.ndarray,
               capacity: np.ndarray, flow_pair: np.ndarray, flow_bytes: np.ndarray,
               waiting: np.ndarray, rev_ptr: np.ndarray, rev_idx: np.ndarray,
               latency: np.ndarray, time_rtol: float, level_rtol: float,
               limit: float = np.inf, guard: int | None = None) -> tuple[Any, ...]:
    """Start, finish, bytes delivered per flow, bytes per (local) link, flows done and the
    stats of :func:`_loop` (compiled: *loop*), over the kernel's state; the run stops early
    where it surely ends after *limit* (s) (stats[6] = 1), judged only while no flow of index
    *guard* (default: none) or above has finished."""
    state = _state(route_ptr, route_links, flow_pair, flow_bytes, len(capacity))
    n_done = loop(route_ptr, route_links, capacity, flow_pair, waiting, rev_ptr, rev_idx,
                  latency, time_rtol, level_rtol, float(limit),
                  len(flow_pair) if guard is None else int(guard), *state)
    floats, col, lflt, stats = state[0], state[3], state[5], state[-1]
    return (col[START].copy(), col[FINISH].copy(), floats[:, DELIVERED].copy(),
            lflt[LINK_BYTES].copy(), n_done, stats)


def _jit(**options: Any) -> Callable[..., Any]:
    """numba's njit, without reference counting where numba allows it (a private flag: every
    array handed to an inlined helper otherwise costs two atomic updates, a fifth of the
    kernel's time, measured by perf; the kernel allocates nothing, :func:`_state` does), else
    with it (same results)."""
    from numba import njit

    flags: dict[str, Any] = {"cache": True, "error_model": "numpy", **options}
    if _nrt_flag():
        flags["_nrt"] = False
    return njit(**flags)


@functools.cache
def _nrt_flag() -> bool:
    """Whether this numba takes ``_nrt=False``: whether its CPU target lists the option
    (looked up, not tried: compiling a probe cost 0.45 s a process, most of loading the
    kernel)."""
    try:
        from numba.core.cpu import CPUTargetOptions
    except ImportError:  # pragma: no cover - a numba laid out otherwise
        return False
    return hasattr(CPUTargetOptions, "_nrt")


HELPERS = ("_sift_up", "_sift_down", "_heap_set", "_heap_remove", "_seed", "_link_in",
           "_compact", "_join", "_component", "_past",
           "_heapify", "_max_min", "_settle", "_resolve", "_finish", "_children", "_release",
           "_next_time", "_arrive")


@functools.cache
def compiled_kernel() -> Callable[..., Any] | None:
    """The kernel, :func:`run_kernel` over :func:`_loop` compiled by numba (imported here, on
    first use: importing it costs a few tenths of a second; the machine code is cached on
    disk), None where numba is missing."""
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover
        return None
    load_cpu_target()
    inline = _jit(inline="always")
    for name in HELPERS:  # _loop calls them compiled and inlined
        globals()[name] = inline(globals()[name])
    return functools.partial(run_kernel, _jit()(_loop))
