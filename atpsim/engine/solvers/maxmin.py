"""Max-min fair rates by progressive filling (water-filling), vectorized over a COO incidence.

All unfrozen flows grow at the same rate until some link is full; the flows crossing a full
link freeze at that level; repeat with what is left (Bertsekas and Gallager, Data Networks,
Sec. 6.5.2; SimGrid's max-min model). Links whose share is within :data:`LEVEL_RTOL` of the
lowest freeze together, so flows that start together and share alike are solved in one round.
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
