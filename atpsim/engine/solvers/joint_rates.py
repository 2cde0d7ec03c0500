"""The compiled joint loop's rate solve (:meth:`~atpsim.engine.solvers.flow_network.
FlowNetwork.update_rates` over :func:`~atpsim.engine.solvers.maxmin.weighted_max_min_rates`):
the flows reachable from the links that changed, by rounds as the reference finds them, then
progressive filling over them with the reference's arithmetic in its order. Called by the
loop's functions (:mod:`~atpsim.engine.solvers.joint_kernel`), compiled with them."""

from __future__ import annotations

import numpy as np

from atpsim.engine.solvers.flow_network import MAX_EXPAND_ROUNDS
from atpsim.engine.solvers.joint_layout import (
    ACTIVE,
    CAP,
    CHANGED,
    FIRST,
    FLAG,
    GONE,
    LINK,
    LOAD,
    MARK,
    N_ACTIVE,
    N_INC,
    N_LINKS,
    QUEUE,
    RATE,
    SHARE,
    WCAP,
    WEIGHTED,
)
from atpsim.engine.solvers.maxmin import LEVEL_RTOL

#: The array layout these functions are written for (:func:`~atpsim.engine.solvers.joint_layout.
#: fingerprint`; a test holds it to the layout, so a change there changes this file and numba
#: compiles it again instead of loading machine code that indexes the old rows).
LAYOUT = "fe30c811d425"


def _component(ni: np.ndarray, inc: np.ndarray, li: np.ndarray, s: np.ndarray) -> np.ndarray:
    """FlowNetwork._component: the active flows reachable from the changed links (a mask;
    all of them where the component is every flow or grows past :data:`MAX_EXPAND_ROUNDS`
    rounds). Clears the changed marks.

    The reference marks, round after round, every flow on a marked link and then every link
    of those flows, and stops where a round marks no new link. Here a round looks at the flows
    not in yet, each until one of its links is marked (before the round: the links of the
    flows a round takes in are marked after it), so a round costs the incidences of the flows
    left out, not the links' incidence lists rebuilt at every event (they were, sorted by
    link, 13% of the SageMaker job's loop): the same rounds, the same mask."""
    n_active, n_inc, n_links = s[N_ACTIVE], s[N_INC], s[N_LINKS]
    n_marked = 0
    for j in range(n_links):
        if li[FLAG, j] == 1:
            li[FLAG, j] = 0
            li[MARK, j] = 1
            li[QUEUE, n_marked] = j
            n_marked += 1
    flows = np.zeros(n_active, dtype=np.bool_)
    rest = np.arange(n_active)  # the flows not in yet, in order
    n_rest = n_active
    taken = np.empty(n_active, dtype=np.int64)
    closed = False
    for _ in range(MAX_EXPAND_ROUNDS):
        n_taken = kept = 0
        for q in range(n_rest):
            a = rest[q]
            hit = False
            for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
                if li[MARK, inc[LINK, e]] == 1:
                    hit = True
                    break
            if hit:
                flows[a] = True
                taken[n_taken] = a
                n_taken += 1
            else:
                rest[kept] = a
                kept += 1
        n_rest = kept
        before = n_marked
        for t in range(n_taken):
            a = taken[t]
            for e in range(ni[FIRST, a], (ni[FIRST, a + 1] if a + 1 < n_active else n_inc)):
                other = inc[LINK, e]
                if li[MARK, other] == 0:
                    li[MARK, other] = 1
                    li[QUEUE, n_marked] = other
                    n_marked += 1
        if n_marked == before:
            closed = True
            break
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
    :func:`_freeze` and :func:`_give_back` until every flow is frozen. The incidences are
    the caller's scratch: the rounds compact them in place."""
    links_in = _links_in(link, lf, li)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    fo, fl, fw = owner, link, weight
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


#: The rate solve's functions, :data:`ENTRY` first (the others are inlined into it).
ENTRY = ("update_rates",)
HELPERS = ("_component", "_links_in", "_level", "_freeze", "_give_back", "_max_min", "update_rates")
