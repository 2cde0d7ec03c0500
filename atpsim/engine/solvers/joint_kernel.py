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
:func:`compiled` (numba, cached on disk); :class:`~atpsim.engine.solvers.joint_loop.
CompiledLoop` holds the state and calls them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from atpsim.engine.solvers.maxmin import LEVEL_RTOL

# Rows of the per-node float state, the per-node integer state and the per-link state.
LAT, NBYTES, RELEASE, START, FINISH, REMAINING, RATE = range(7)
# (ACTIVE and FIRST are by position among the flows in flight: the flow, its first incidence;
# GROUP: the node's group, whose end a run may stop at, -1: none)
PROTOCOL, WAITING, ACTIVE, FIRST, GROUP = range(5)
# the incidences of the flows in flight (each flow's consecutive, flows in ACTIVE order), and
# a scratch row: the incidences grouped by link
OWNER, LINK, BY_LINK = range(3)
# per link: state, then scratch rows of the rate solve (working capacity, load, share, gone)
CAP, BUSY_SINCE, BUSY, BYTES, WCAP, LOAD, SHARE, GONE = range(8)
# per link: class, flows on it, changed mark; scratch: mark, CSR pointer, queue (one more
# entry than the links: the CSR's end)
CLASS, ON_LINK, FLAG, MARK, PTR, QUEUE = range(6)
# The arrival heap's integer rows and the node buffers' rows (GROUP_LEFT by group: its nodes
# not done).
SEQ, SEG_START, SEG_LEN = range(3)
IDS, DONE, GROUP_LEFT = range(3)
# Scalar slots (int64) and the clock (float64).
N_NODES, N_DONE, N_EVENTS, N_SEQ, N_ACTIVE, N_INC, N_HEAP, IDS_TOP, DONE_TOP, CHANGED, WEIGHTED, \
    N_LINKS, INC_DONE, N_GROUPS, GROUP_ENDED = range(15)
NOW = 0
#: Rounds of growing the changed links' component before solving every flow
#: (:data:`~atpsim.engine.solvers.flow_network.MAX_EXPAND_ROUNDS`).
MAX_EXPAND_ROUNDS = 8


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
    for j in range(total):
        if ni[WAITING, children[j]] == 0:
            children[ready] = children[j]
            ready += 1
    if ready:
        release(nf, ht, hi, buf, s, clock, np.unique(children[:ready]))


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


def _by_link(inc: np.ndarray, li: np.ndarray, n_inc: int, n_links: int) -> None:
    """The incidences grouped by link (``inc[BY_LINK]``, each link's in incidence order); link
    ``j``'s run ends at ``li[PTR, j]`` and starts where link ``j - 1``'s ends (0 for link 0)."""
    for j in range(n_links + 1):
        li[PTR, j] = 0
    for e in range(n_inc):
        li[PTR, inc[LINK, e] + 1] += 1
    for j in range(n_links):
        li[PTR, j + 1] += li[PTR, j]
    for e in range(n_inc):  # PTR moves from each link's start to its end
        link = inc[LINK, e]
        inc[BY_LINK, li[PTR, link]] = e
        li[PTR, link] += 1


def _component(ni: np.ndarray, inc: np.ndarray, li: np.ndarray, s: np.ndarray) -> np.ndarray:
    """FlowNetwork._component: the active flows reachable from the changed links (a mask;
    all of them where the component is every flow or grows past :data:`MAX_EXPAND_ROUNDS`
    rounds). Clears the changed marks.

    The reference marks, round after round, every flow on a marked link and then every link
    of those flows, and stops where a round marks no new link. Here a round visits only the
    links first marked in the round before (through the incidences grouped by link), so the
    rounds cost the component, not the flows in flight each: the same rounds, the same mask."""
    n_active, n_inc, n_links = s[N_ACTIVE], s[N_INC], s[N_LINKS]
    _by_link(inc, li, n_inc, n_links)
    n_marked = 0
    for j in range(n_links):
        if li[FLAG, j] == 1:
            li[FLAG, j] = 0
            li[MARK, j] = 1
            li[QUEUE, n_marked] = j
            n_marked += 1
    flows = np.zeros(n_active, dtype=np.bool_)
    front, closed = 0, False
    for _ in range(MAX_EXPAND_ROUNDS):
        end = n_marked
        for q in range(front, end):
            link = li[QUEUE, q]
            for r in range(li[PTR, link - 1] if link else 0, li[PTR, link]):
                a = inc[OWNER, inc[BY_LINK, r]]
                if flows[a]:
                    continue
                flows[a] = True
                for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
                    other = inc[LINK, e]
                    if li[MARK, other] == 0:
                        li[MARK, other] = 1
                        li[QUEUE, n_marked] = other
                        n_marked += 1
        if n_marked == end:
            closed = True
            break
        front = end
    for q in range(n_marked):
        li[MARK, li[QUEUE, q]] = 0
    if not closed:
        flows[:] = True
    return flows


def _max_min(owner: np.ndarray, link: np.ndarray, weight: np.ndarray, weighted: bool, n_flows: int,
             lf: np.ndarray, li: np.ndarray) -> np.ndarray:
    """maxmin.max_min_rates (*weighted* False) or weighted_max_min_rates over the incidences
    (*owner*, *link*, *weight*), the same arithmetic on the links they cross (the others'
    shares are infinite and their capacities unchanged there): rounds of :func:`_level`,
    :func:`_freeze` and :func:`_give_back` until every flow is frozen."""
    links_in = _links_in(link, lf, li)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    fo, fl, fw = owner.copy(), link.copy(), weight.copy()
    m = len(fo)
    if not weighted:
        for e in range(m):
            lf[LOAD, fl[e]] += 1.0
    while m > 0:
        level = _level(fl[:m], fw[:m], weighted, links_in, lf)
        _freeze(fo[:m], fl[:m], level, frozen, rate, lf)
        m = _give_back(fo, fl, fw, m, weighted, level, frozen, links_in, lf)
    for j in range(len(links_in)):
        li[MARK, links_in[j]] = 0
    return rate


def _links_in(link: np.ndarray, lf: np.ndarray, li: np.ndarray) -> np.ndarray:
    """The distinct links of *link* (marked in ``li[MARK]`` until the solve ends), each with
    its working capacity set to its capacity and its load to 0."""
    links_in = np.empty(len(link), dtype=np.int64)
    n_in = 0
    for e in range(len(link)):
        k = link[e]
        if li[MARK, k] == 0:
            li[MARK, k] = 1
            links_in[n_in] = k
            n_in += 1
            lf[WCAP, k] = lf[CAP, k]
            lf[LOAD, k] = 0.0
    return links_in[:n_in]


def _level(fl: np.ndarray, fw: np.ndarray, weighted: bool, links_in: np.ndarray, lf: np.ndarray) -> float:
    """A round's fair share: every link's ``max(cap, 0) / load`` (the load summed again in
    incidence order where weighted, numpy's bincount), the least of them."""
    if weighted:
        for j in range(len(links_in)):
            lf[LOAD, links_in[j]] = 0.0
        for e in range(len(fl)):
            lf[LOAD, fl[e]] += fw[e]
    level = np.inf
    for j in range(len(links_in)):
        k = links_in[j]
        if lf[LOAD, k] > 0:
            cap = lf[WCAP, k]
            c = cap if cap > 0.0 else 0.0
            if cap != cap:
                c = cap
            lf[SHARE, k] = c / lf[LOAD, k]
            if lf[SHARE, k] < level:
                level = lf[SHARE, k]
        else:
            lf[SHARE, k] = np.inf
    return level


def _freeze(fo: np.ndarray, fl: np.ndarray, level: float, frozen: np.ndarray, rate: np.ndarray,
            lf: np.ndarray) -> None:
    """Freeze at *level* every flow on a link whose share is within LEVEL_RTOL of it."""
    limit = level * (1 + LEVEL_RTOL)
    for e in range(len(fo)):
        if lf[SHARE, fl[e]] <= limit and not frozen[fo[e]]:
            frozen[fo[e]] = True
            rate[fo[e]] = level


def _give_back(fo: np.ndarray, fl: np.ndarray, fw: np.ndarray, m: int, weighted: bool, level: float,
               frozen: np.ndarray, links_in: np.ndarray, lf: np.ndarray) -> int:
    """Drop the frozen flows' incidences (the others kept in order): each link's capacity less
    ``level`` times what left it (summed in incidence order), its count less what left where
    unweighted. How many incidences are left."""
    for j in range(len(links_in)):
        lf[GONE, links_in[j]] = 0.0
    kept = 0
    for e in range(m):
        if frozen[fo[e]]:
            lf[GONE, fl[e]] += fw[e] if weighted else 1.0
        else:
            fo[kept], fl[kept], fw[kept] = fo[e], fl[e], fw[e]
            kept += 1
    for j in range(len(links_in)):
        k = links_in[j]
        lf[WCAP, k] = lf[WCAP, k] - level * lf[GONE, k]
        if not weighted:
            lf[LOAD, k] = lf[LOAD, k] - lf[GONE, k]
    return kept


def update_rates(nf: np.ndarray, ni: np.ndarray, inc: np.ndarray, incw: np.ndarray, lf: np.ndarray,
                 li: np.ndarray, s: np.ndarray) -> int:
    """FlowNetwork.update_rates: solve the rates of the changed links' component; 1 where
    anything was solved."""
    if not s[CHANGED]:
        return 0
    s[CHANGED] = 0
    if s[N_ACTIVE] == 0:
        li[FLAG, :s[N_LINKS]] = 0
        return 0
    mask = _component(ni, inc, li, s)
    n_active, n_inc = s[N_ACTIVE], s[N_INC]
    members = np.empty(n_active, dtype=np.int64)
    m = k = 0
    for a in range(n_active):
        if mask[a]:
            members[m] = a
            m += 1
            k += (ni[FIRST, a + 1] if a + 1 < n_active else n_inc) - ni[FIRST, a]
    owner = np.empty(k, dtype=np.int64)
    link = np.empty(k, dtype=np.int64)
    weight = np.empty(k)
    k = 0
    ones = True
    for j in range(m):
        a = members[j]
        for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
            owner[k], link[k], weight[k] = j, inc[LINK, e], incw[e]
            if incw[e] != 1.0:
                ones = False
            k += 1
    rates = _max_min(owner, link, weight, bool(s[WEIGHTED]) and not ones, m, lf, li)
    for j in range(m):
        nf[RATE, ni[ACTIVE, members[j]]] = rates[j]
    return 1


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
        upcoming = next_time(nf, ni, ht, s, clock)
        if not to_end and upcoming > until:
            break
        if group_stop and s[GROUP_ENDED] and upcoming > clock[NOW]:
            return True
        arrival = ht[0] if s[N_HEAP] else np.inf
        dt = _to_next(nf, ni, s)
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
#: The helpers they call (compiled first, so the entries call them compiled).
HELPERS = ("_before", "_sift_down", "_sift_up", "_heap_pop", "heap_push", "release", "_complete",
           "add_flows", "_advance", "_to_next", "next_time", "_count_leaving", "_compact_active",
           "_pop_completed", "_by_link", "_component", "_links_in",
           "_level", "_freeze", "_give_back", "_max_min", "update_rates", "_join", "_arrivals")


@functools.cache
def compiled() -> dict[str, Callable[..., Any]] | None:
    """The entry functions compiled by numba (cached on disk), None where numba is missing."""
    try:
        from numba import njit
    except ImportError:  # pragma: no cover
        return None
    module = globals()
    entry, inlined = njit(cache=True, error_model="numpy"), njit(cache=True, error_model="numpy", inline="always")
    for name in HELPERS:  # the helpers inlined into the entry points (one cached unit each)
        module[name] = (entry if name in ENTRY else inlined)(module[name])
    return {name: module[name] for name in ENTRY}


def plain() -> dict[str, Callable[..., Any]]:
    """The entry functions as plain Python (for the tests, where numba is not loaded yet)."""
    return {name: globals()[name] for name in ENTRY}
