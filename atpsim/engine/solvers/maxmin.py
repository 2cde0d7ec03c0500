"""Max-min fair rates by progressive filling (water-filling), vectorized over a COO incidence;
one family: :func:`weighted_max_min_rates`, whose unit-weight case is :func:`max_min_rates`.

All unfrozen flows grow at the same rate until some link is full; the flows crossing a full
link freeze at that level; repeat with what is left (Bertsekas and Gallager, Data Networks,
Sec. 6.5.2; SimGrid's max-min model). Links whose share is within :data:`LEVEL_RTOL` of the
lowest freeze together, so flows that start together and share alike are solved in one round.

Weights: a flow run by an NCCL protocol moves its data at rate ``r`` but occupies each link
it crosses at ``r / e`` wire bytes per second, ``e`` the protocol's efficiency on that link's
class (:mod:`atpsim.collectives.protocols`: LL sends half flag bytes, LL128 8 in 128, and the
fitted kernel efficiencies). Alone, a call's flows all have the same efficiency on a link,
and the link-level engine runs them on a copy of the topology with every link scaled by it
(:func:`~atpsim.collectives.protocols.effective_topology`). In one network shared by calls
of different protocols a link's constraint is ``sum_f r_f / e_f <= C`` instead: weights
``w = 1 / e`` per (flow, link). Progressive filling then raises every unfrozen flow's rate
together until a link is full, ``level = (C - load of frozen flows) / sum of unfrozen
weights``, freezes the flows crossing it, and repeats. Where every flow on a link has the
same weight ``w`` this is max-min on capacity ``C / w``, the alone case's answer.
"""

from __future__ import annotations

import numpy as np

LEVEL_RTOL = 1e-12


def max_min_rates(
    inc_flow: np.ndarray, inc_link: np.ndarray, n_flows: int, capacity_Bps: np.ndarray
) -> np.ndarray:
    """Rate (bytes/s) of each of *n_flows* flows.

    *inc_flow[i]* (``0..n_flows-1``) crosses link *inc_link[i]* (an index into
    *capacity_Bps*; links no flow crosses are ignored); every flow crosses at least one link.
    """
    n_links = len(capacity_Bps)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    cap = np.array(capacity_Bps, dtype=np.float64)
    count = np.bincount(inc_link, minlength=n_links).astype(np.float64)
    flows, links = inc_flow, inc_link
    while len(flows):
        used = count > 0
        share = np.full(n_links, np.inf)
        share[used] = np.maximum(cap[used], 0.0) / count[used]
        level = share.min()
        full = share <= level * (1 + LEVEL_RTOL)
        newly = np.zeros(n_flows, dtype=bool)
        newly[flows[full[links]]] = True
        rate[newly] = level
        frozen |= newly
        leaving = frozen[flows]
        gone = np.bincount(links[leaving], minlength=n_links)
        cap -= level * gone
        count -= gone
        flows, links = flows[~leaving], links[~leaving]
    return rate


def weighted_max_min_rates(inc_flow: np.ndarray, inc_link: np.ndarray, inc_weight: np.ndarray | None,
                           n_flows: int, capacity_Bps: np.ndarray) -> np.ndarray:
    """Rate (bytes/s) of each of *n_flows* flows; *inc_flow[i]* crosses link *inc_link[i]*
    at cost *inc_weight[i]* wire bytes per byte (None or all ones: plain max-min,
    :func:`max_min_rates`). Every flow crosses at least one link."""
    if inc_weight is None or bool(np.all(inc_weight == 1.0)):
        return max_min_rates(inc_flow, inc_link, n_flows, capacity_Bps)
    n_links = len(capacity_Bps)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    cap = np.array(capacity_Bps, dtype=np.float64)
    flows, links, weights = inc_flow, inc_link, np.asarray(inc_weight, dtype=np.float64)
    while len(flows):
        load = np.bincount(links, weights=weights, minlength=n_links)
        used = load > 0
        share = np.full(n_links, np.inf)
        share[used] = np.maximum(cap[used], 0.0) / load[used]
        level = share.min()
        full = share <= level * (1 + LEVEL_RTOL)
        newly = np.zeros(n_flows, dtype=bool)
        newly[flows[full[links]]] = True
        rate[newly] = level
        frozen |= newly
        leaving = frozen[flows]
        cap -= level * np.bincount(links[leaving], weights=weights[leaving], minlength=n_links)
        flows, links, weights = flows[~leaving], links[~leaving], weights[~leaving]
    return rate
