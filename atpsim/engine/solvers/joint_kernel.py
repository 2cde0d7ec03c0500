"""The joint network's event loop (:class:`~atpsim.engine.solvers.flow_loop.Loop` in the
:data:`~atpsim.engine.solvers.flow_loop.JOINT` order) as compiled functions over arrays: the
same operations in the same order, so the same numbers to the bit.

The reference loop runs an event as tens of small numpy calls (about 250-300 us an event with
a few hundred flows in flight, measured on the 960-GPU SageMaker job, whose gradient buckets
make one live episode of ~46,000 events); these functions run it as loops over the flows and
links in flight. Nothing is approximated: every float operation the reference performs
(the arrival times ``max(now, release) + latency``, the bytes moved ``remaining - rate * dt``,
the completion test ``remaining / rate <= tol``, progressive filling's shares
``max(cap, 0) / load``, its levels and its ``cap - level * gone``, each link's byte and busy
counts) is performed here on the same operands in the same order; sums run in the order
numpy's ``bincount`` and ``add.at`` take (the incidences' order), the arrival queue is
:mod:`heapq`'s algorithm on ``(time, sequence)`` keys, so even the order in which a merged
loop re-queues another's arrivals is the reference's. ``tests/engine/solvers/
test_joint_kernel.py`` holds the two to equality on random flow sets, on merged and extended
loops and on whole jobs.

The functions are plain Python (run as such where numba is missing, slowly) and compiled by
:func:`compiled` (numba, cached on disk); the rate solve is :mod:`~atpsim.engine.solvers.
joint_rates`, the arrays' layout :mod:`~atpsim.engine.solvers.joint_layout`, and
:class:`~atpsim.engine.solvers.joint_loop.CompiledLoop` holds the state and calls them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.solvers import joint_rates
from atpsim.engine.solvers.joint_layout import (
    ACTIVE,
    BUSY,
    BUSY_SINCE,
    BYTES,
    CHANGED,
    CLASS,
    DONE,
    DONE_TOP,
    FINISH,
    FIRST,
    FLAG,
    GROUP,
    GROUP_ENDED,
    GROUP_LEFT,
    IDS,
    IDS_TOP,
    INC_DONE,
    LAT,
    LINK,
    N_ACTIVE,
    N_DONE,
    N_EVENTS,
    N_HEAP,
    N_INC,
    N_NODES,
    N_SEQ,
    NBYTES,
    NOW,
    ON_LINK,
    OWNER,
    PROTOCOL,
    RATE,
    RELEASE,
    REMAINING,
    SEG_LEN,
    SEG_START,
    SEQ,
    START,
    WAITING,
    WEIGHTED,
)
from atpsim.engine.solvers.joint_rates import update_rates
from atpsim.engine.solvers.numba_target import load_cpu_target

#: The array layout these functions are written for (:func:`~atpsim.engine.solvers.joint_layout.
#: fingerprint`; a test holds it to the layout, so a change there changes this file and numba
#: compiles it again instead of loading machine code that indexes the old rows).
LAYOUT = "fe30c811d425"
#: The rate solve's source these functions are built with (joint_rates.py, its SHA-1's first
#: 12 hex digits): the loop's cached machine code carries its own copy of the rate solve, so
#: an edit there reaches the loop only when this file changes too; a test holds this to it.
RATES = "124c903316d9"


def _before(t: float, seq: int, u: float, useq: int) -> bool:
    """Whether key (t, seq) sorts before (u, useq), as heapq compares the tuples."""
    return t < u or (t == u and seq < useq)


def _sift_down(ht: np.ndarray, hi: np.ndarray, start: int, pos: int) -> None:
    """heapq._siftdown: move the entry at *pos* up towards *start* while it sorts first."""
    t, seq, a, b = ht[pos], hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos]
    while pos > start:
        parent = (pos - 1) >> 1
        if _before(t, seq, ht[parent], hi[SEQ, parent]):
            ht[pos] = ht[parent]
            hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos] = hi[SEQ, parent], hi[SEG_START, parent], \
                hi[SEG_LEN, parent]
            pos = parent
            continue
        break
    ht[pos] = t
    hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos] = seq, a, b


def _sift_up(ht: np.ndarray, hi: np.ndarray, pos: int, end: int) -> None:
    """heapq._siftup: the entry at *pos* down to a leaf along the smaller children, then
    :func:`_sift_down` back."""
    start = pos
    t, seq, a, b = ht[pos], hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos]
    child = 2 * pos + 1
    while child < end:
        right = child + 1
        if right < end and not _before(ht[child], hi[SEQ, child], ht[right], hi[SEQ, right]):
            child = right
        ht[pos] = ht[child]
        hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos] = hi[SEQ, child], hi[SEG_START, child], \
            hi[SEG_LEN, child]
        pos = child
        child = 2 * pos + 1
    ht[pos] = t
    hi[SEQ, pos], hi[SEG_START, pos], hi[SEG_LEN, pos] = seq, a, b
    _sift_down(ht, hi, start, pos)


def heap_push(ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray, t: float,
              ids: np.ndarray, lo: int, hi_: int) -> None:
    """Queue ``ids[lo:hi_]`` to arrive at *t* (heapq.heappush with the next sequence number)."""
    s[N_SEQ] += 1
    top = s[IDS_TOP]
    for k in range(lo, hi_):
        buf[IDS, top + k - lo] = ids[k]
    s[IDS_TOP] = top + hi_ - lo
    n = s[N_HEAP]
    ht[n] = t
    hi[SEQ, n], hi[SEG_START, n], hi[SEG_LEN, n] = s[N_SEQ], top, hi_ - lo
    s[N_HEAP] = n + 1
    _sift_down(ht, hi, 0, n)


def _heap_pop(ht: np.ndarray, hi: np.ndarray, s: np.ndarray) -> tuple[int, int]:
    """heapq.heappop: the first entry's segment (start, length) in the ids buffer."""
    n = s[N_HEAP] - 1
    s[N_HEAP] = n
    a, b = hi[SEG_START, 0], hi[SEG_LEN, 0]
    if n > 0:
        ht[0] = ht[n]
        hi[SEQ, 0], hi[SEG_START, 0], hi[SEG_LEN, 0] = hi[SEQ, n], hi[SEG_START, n], hi[SEG_LEN, n]
        _sift_up(ht, hi, 0, n)
    else:
        a, b = hi[SEG_START, n], hi[SEG_LEN, n]
    return a, b


def release(nf: np.ndarray, ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray,
            clock: np.ndarray, ids: np.ndarray) -> None:
    """Loop.release in the joint order: *ids* (ascending) start at ``max(now, release)`` and
    arrive after their latency, queued one entry per arrival time, in time order."""
    k = len(ids)
    if k == 0:
        return
    now = clock[NOW]
    arrive = np.empty(k)
    for j in range(k):
        i = ids[j]
        r = nf[RELEASE, i]
        start = r if r > now else now
        if r != r:
            start = r
        nf[START, i] = start
        arrive[j] = start + nf[LAT, i]
    order = np.argsort(arrive, kind="mergesort")
    grouped = ids[order]
    lo = 0
    while lo < k:
        value = arrive[order[lo]]
        hi_ = lo + 1
        while hi_ < k and arrive[order[hi_]] == value:
            hi_ += 1
        # ids[arrive == value] is ascending: so is a stable sort's run of equal values
        heap_push(ht, hi, buf, s, value, grouped, lo, hi_)
        lo = hi_


def _complete(nf: np.ndarray, ni: np.ndarray, link_ptr: np.ndarray, dptr: np.ndarray, didx: np.ndarray,
              ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray, clock: np.ndarray,
              done: np.ndarray) -> None:
    """Loop.complete: *done* finish now; the dependents that wait for nothing else are
    released (ascending, each once). Counts the incidences of the nodes done (the flows in
    flight cross at most the others': what the incidence arrays need room for)."""
    now = clock[NOW]
    total = 0
    top = s[DONE_TOP]
    for j in range(len(done)):
        d = done[j]
        nf[FINISH, d] = now
        buf[DONE, top + j] = d
        total += dptr[d + 1] - dptr[d]
        s[INC_DONE] += link_ptr[d + 1] - link_ptr[d]
        g = ni[GROUP, d]
        if g >= 0:
            buf[GROUP_LEFT, g] -= 1
            if buf[GROUP_LEFT, g] == 0:
                s[GROUP_ENDED] = 1
    s[DONE_TOP] = top + len(done)
    s[N_DONE] += len(done)
    children = np.empty(total, dtype=np.int64)
    c = 0
    for j in range(len(done)):
        d = done[j]
        for e in range(dptr[d], dptr[d + 1]):
            children[c] = didx[e]
            ni[WAITING, didx[e]] -= 1
            c += 1
    ready = 0
    for j in range(total):  # each child that waits for nothing now, once (-1 marks it taken)
        child = children[j]
        if ni[WAITING, child] == 0:
            ni[WAITING, child] = -1
            children[ready] = child
            ready += 1
    if ready:
        # np.unique's ids without its sort of every listing (a child of k nodes done is
        # listed k times: 580 listings of 158 children an event on the SageMaker job)
        ids = np.sort(children[:ready])
        for j in range(ready):
            ni[WAITING, ids[j]] = 0
        release(nf, ht, hi, buf, s, clock, ids)


def add_flows(nf: np.ndarray, ni: np.ndarray, link_ptr: np.ndarray, node_links: np.ndarray,
              inc: np.ndarray, incw: np.ndarray, lf: np.ndarray, li: np.ndarray, w: np.ndarray,
              s: np.ndarray, clock: np.ndarray, flows: np.ndarray) -> None:
    """FlowNetwork.add: *flows* start moving now; their links' incidences join at the end,
    links that carried nothing start being busy, and the links are marked changed."""
    now = clock[NOW]
    n_inc, n_active = s[N_INC], s[N_ACTIVE]
    first = n_inc
    for j in range(len(flows)):
        f = flows[j]
        row = ni[PROTOCOL, f]
        ni[FIRST, n_active + j] = n_inc
        for e in range(link_ptr[f], link_ptr[f + 1]):
            link = node_links[e]
            inc[OWNER, n_inc] = n_active + j
            inc[LINK, n_inc] = link
            incw[n_inc] = w[row, li[CLASS, link]] if s[WEIGHTED] else 1.0
            n_inc += 1
        ni[ACTIVE, n_active + j] = f
    for e in range(first, n_inc):  # busy from now where nothing was on the link before
        link = inc[LINK, e]
        if li[ON_LINK, link] == 0:
            lf[BUSY_SINCE, link] = now
    for e in range(first, n_inc):
        li[ON_LINK, inc[LINK, e]] += 1
        li[FLAG, inc[LINK, e]] = 1
    s[N_INC], s[N_ACTIVE] = n_inc, n_active + len(flows)
    if n_inc > first:
        s[CHANGED] = 1


def _advance(nf: np.ndarray, ni: np.ndarray, s: np.ndarray, dt: float) -> None:
    """FlowNetwork.advance: every active flow moves ``rate * dt`` bytes."""
    if dt > 0:
        for a in range(s[N_ACTIVE]):
            f = ni[ACTIVE, a]
            nf[REMAINING, f] = nf[REMAINING, f] - nf[RATE, f] * dt


def _to_next(nf: np.ndarray, ni: np.ndarray, s: np.ndarray) -> float:
    """FlowNetwork.time_to_next_completion: ``max(0, min(remaining / rate))`` (inf: no flow;
    a NaN ratio makes it 0, as Python's ``max(0.0, nan)`` is)."""
    n = s[N_ACTIVE]
    if n == 0:
        return np.inf
    least = np.inf
    for a in range(n):
        f = ni[ACTIVE, a]
        v = nf[REMAINING, f] / nf[RATE, f]
        if v != v:
            return 0.0
        if v < least:
            least = v
    return least if least > 0.0 else 0.0


def next_time(nf: np.ndarray, ni: np.ndarray, ht: np.ndarray, s: np.ndarray, clock: np.ndarray) -> float:
    """Loop.next_time: the next arrival or completion, whichever is first."""
    arrival = ht[0] if s[N_HEAP] else np.inf
    return min(arrival, clock[NOW] + _to_next(nf, ni, s))


def _pop_completed(nf: np.ndarray, ni: np.ndarray, inc: np.ndarray, incw: np.ndarray, lf: np.ndarray,
                   li: np.ndarray, s: np.ndarray, tol: float, now: float) -> np.ndarray:
    """FlowNetwork.pop_completed: remove the flows that finish within *tol* (in active
    order), count their bytes and their links' busy time, mark their links changed."""
    n_active = s[N_ACTIVE]
    done_mask = np.zeros(n_active, dtype=np.bool_)
    n_done = 0
    for a in range(n_active):
        f = ni[ACTIVE, a]
        if nf[REMAINING, f] / nf[RATE, f] <= tol:
            done_mask[a] = True
            n_done += 1
    if n_done == 0:
        return np.zeros(0, dtype=np.int64)
    _count_leaving(nf, ni, inc, lf, li, s, done_mask, now)
    done = _compact_active(ni, inc, incw, s, done_mask, n_done)
    for j in range(n_done):
        nf[RATE, done[j]] = 0.0
    s[CHANGED] = 1
    return done


def _count_leaving(nf: np.ndarray, ni: np.ndarray, inc: np.ndarray, lf: np.ndarray, li: np.ndarray,
                   s: np.ndarray, done_mask: np.ndarray, now: float) -> None:
    """The flows of *done_mask* leave their links: each link's bytes (in incidence order,
    numpy's add.at), flow count and changed mark, then the busy time of each link left empty
    (once, however many left it)."""
    n_active, n_inc = s[N_ACTIVE], s[N_INC]
    for a in range(n_active):
        if done_mask[a]:
            size = nf[NBYTES, ni[ACTIVE, a]]
            for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
                link = inc[LINK, e]
                lf[BYTES, link] += size
                li[ON_LINK, link] -= 1
                li[FLAG, link] = 1
    for a in range(n_active):
        if done_mask[a]:
            for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
                link = inc[LINK, e]
                if li[ON_LINK, link] == 0 and lf[BUSY_SINCE, link] == lf[BUSY_SINCE, link]:
                    lf[BUSY, link] = lf[BUSY, link] + (now - lf[BUSY_SINCE, link])
                    lf[BUSY_SINCE, link] = np.nan  # counted: not again in this batch


def _compact_active(ni: np.ndarray, inc: np.ndarray, incw: np.ndarray, s: np.ndarray, done_mask: np.ndarray,
                    n_done: int) -> np.ndarray:
    """Drop the flows of *done_mask* from the flows in flight and their incidences (the
    others kept in order); the flows dropped, in active order."""
    n_active, n_inc = s[N_ACTIVE], s[N_INC]
    done = np.empty(n_done, dtype=np.int64)
    kept, kept_inc, d = 0, 0, 0
    for a in range(n_active):
        f, first, last = ni[ACTIVE, a], ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)
        if done_mask[a]:
            done[d] = f
            d += 1
            continue
        ni[ACTIVE, kept], ni[FIRST, kept] = f, kept_inc
        for e in range(first, last):
            inc[OWNER, kept_inc], inc[LINK, kept_inc], incw[kept_inc] = kept, inc[LINK, e], incw[e]
            kept_inc += 1
        kept += 1
    s[N_INC], s[N_ACTIVE] = kept_inc, kept
    return done


def _join(nf: np.ndarray, ni: np.ndarray, link_ptr: np.ndarray, node_links: np.ndarray, dptr: np.ndarray,
          didx: np.ndarray, inc: np.ndarray, incw: np.ndarray, lf: np.ndarray, li: np.ndarray, w: np.ndarray,
          ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray, clock: np.ndarray,
          ids: np.ndarray) -> None:
    """Loop._join: nodes that cross no link are done on arrival, the others join the network."""
    empty = np.empty(len(ids), dtype=np.int64)
    moving = np.empty(len(ids), dtype=np.int64)
    n_empty = n_moving = 0
    for j in range(len(ids)):
        i = ids[j]
        if link_ptr[i + 1] == link_ptr[i]:
            empty[n_empty] = i
            n_empty += 1
        else:
            moving[n_moving] = i
            n_moving += 1
    if n_empty:
        _complete(nf, ni, link_ptr, dptr, didx, ht, hi, buf, s, clock, empty[:n_empty])
    if n_moving:
        add_flows(nf, ni, link_ptr, node_links, inc, incw, lf, li, w, s, clock, moving[:n_moving])


def _arrivals(ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray, arrival: float) -> np.ndarray:
    """Pop every queued entry that arrives at *arrival*: their nodes, entry after entry."""
    total = 0
    segments = np.empty((2, s[N_HEAP]), dtype=np.int64)
    n_seg = 0
    while s[N_HEAP] and ht[0] == arrival:
        a, b = _heap_pop(ht, hi, s)
        segments[0, n_seg], segments[1, n_seg] = a, b
        n_seg += 1
        total += b
    ids = np.empty(total, dtype=np.int64)
    c = 0
    for j in range(n_seg):
        for k in range(segments[0, j], segments[0, j] + segments[1, j]):
            ids[c] = buf[IDS, k]
            c += 1
    return ids


def run(nf: np.ndarray, ni: np.ndarray, link_ptr: np.ndarray, node_links: np.ndarray, dptr: np.ndarray,
        didx: np.ndarray, inc: np.ndarray, incw: np.ndarray, lf: np.ndarray, li: np.ndarray, w: np.ndarray,
        ht: np.ndarray, hi: np.ndarray, buf: np.ndarray, s: np.ndarray, clock: np.ndarray,
        until: float, to_end: bool, time_rtol: float, group_stop: bool = False) -> bool:
    """Loop.run (*to_end*: every event; False where it stalls) or Loop.run_until(*until*):
    steps, each the next arrival or completion, whichever is first. *group_stop*: also stop
    once a group's last node is done and every event of that instant is handled (the clock
    stays there: no bytes move past the last event)."""
    s[GROUP_ENDED] = 0
    while s[N_DONE] < s[N_NODES]:
        arrival = ht[0] if s[N_HEAP] else np.inf
        dt = _to_next(nf, ni, s)
        upcoming = min(arrival, clock[NOW] + dt)  # next_time's, from the one pass over the flows
        if not to_end and upcoming > until:
            break
        if group_stop and s[GROUP_ENDED] and upcoming > clock[NOW]:
            return True
        if arrival == np.inf and dt == np.inf:
            return False
        if arrival <= clock[NOW] + dt:
            _advance(nf, ni, s, arrival - clock[NOW])
            clock[NOW] = arrival
            ids = _arrivals(ht, hi, buf, s, arrival)
            _join(nf, ni, link_ptr, node_links, dptr, didx, inc, incw, lf, li, w, ht, hi, buf, s, clock, ids)
        else:
            _advance(nf, ni, s, dt)
            clock[NOW] += dt
        now = clock[NOW]
        done = _pop_completed(nf, ni, inc, incw, lf, li, s, time_rtol * max(abs(now), 1e-12), now)
        if len(done):
            _complete(nf, ni, link_ptr, dptr, didx, ht, hi, buf, s, clock, done)
        s[N_EVENTS] += update_rates(nf, ni, inc, incw, lf, li, s)
    if not to_end and not group_stop and until > clock[NOW]:
        _advance(nf, ni, s, until - clock[NOW])
        clock[NOW] = until
    return True


#: The functions :class:`~atpsim.engine.solvers.joint_loop.CompiledLoop` calls.
ENTRY = ("run", "release", "add_flows", "update_rates", "next_time", "heap_push")
#: The loop's functions (the rate solve's are :mod:`~atpsim.engine.solvers.joint_rates`').
HELPERS = ("_before", "_sift_down", "_sift_up", "_heap_pop", "heap_push", "release", "_complete",
           "add_flows", "_advance", "_to_next", "next_time", "_count_leaving", "_compact_active",
           "_pop_completed", "_join", "_arrivals", "run")


@functools.cache
def compiled() -> dict[str, Callable[..., Any]] | None:
    """The entry functions compiled by numba (cached on disk), None where numba is missing:
    the rate solve's (:mod:`~atpsim.engine.solvers.joint_rates`) first, so the loop's call
    it compiled; each module's helpers inlined into its entry points (one cached unit each)."""
    try:
        from numba import njit
    except ImportError:  # pragma: no cover
        return None
    load_cpu_target()
    entry, inlined = njit(cache=True, error_model="numpy"), njit(cache=True, error_model="numpy", inline="always")
    for module, helpers, entries in ((vars(joint_rates), joint_rates.HELPERS, joint_rates.ENTRY),
                                     (globals(), HELPERS, ENTRY)):  # fmt: skip
        for name in helpers:
            module[name] = (entry if name in entries else inlined)(module[name])
    globals()["update_rates"] = joint_rates.update_rates
    return {name: globals()[name] for name in ENTRY}


def plain() -> dict[str, Callable[..., Any]]:
    """The entry functions as written (for the tests; where :func:`compiled` ran first in the
    process, the helpers they call are the compiled ones)."""
    return {name: globals()[name] for name in ENTRY}
