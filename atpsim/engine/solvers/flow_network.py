"""Flows moving bytes over directed links at max-min fair rates; pure numpy, no event loop.

The :class:`FlowNetwork` knows every flow of a run up front (its route and bytes) and keeps
the active ones with their link incidence (COO: position in the active list, link id), updated
as flows come and go. Rates are recomputed lazily: only over the connected component (flows
that share links, transitively) of the links whose flows changed, since max-min fairness
decomposes over such components (SimGrid's lazy update); a component that keeps growing past
:data:`MAX_EXPAND_ROUNDS` rounds is solved whole. Every link counts the bytes that crossed it.
Inside, links are renumbered to the ones the routes use, so per-link work is sized by the run,
not by the topology (a 64 x 64 torus has 16,384 directed links; one torus row uses 128).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from atpsim.engine.routes import PairRoutes
from atpsim.engine.solvers.maxmin import max_min_rates

MAX_EXPAND_ROUNDS = 8


class FlowNetwork:
    """Active flows, their rates and bytes; *flow_pair* and *flow_bytes* describe every flow."""

    def __init__(self, routes: PairRoutes, capacity_Bps: np.ndarray, flow_pair: np.ndarray, flow_bytes: np.ndarray):
        self._used, local = np.unique(routes.links, return_inverse=True)
        self.routes = replace(routes, links=local.astype(np.int64))
        self._n_links = len(capacity_Bps)
        self.capacity_Bps = np.asarray(capacity_Bps, dtype=np.float64)[self._used]
        self.flow_pair = flow_pair
        self.rate = np.zeros(len(flow_pair))
        self.remaining = np.array(flow_bytes, dtype=np.float64)
        self.delivered = np.zeros(len(flow_pair))
        self._link_bytes = np.zeros(len(self._used))
        self.active = np.zeros(0, dtype=np.int64)
        self._owner = np.zeros(0, dtype=np.int64)  # position in self.active of each incidence
        self._link = np.zeros(0, dtype=np.int64)
        self._changed: list[np.ndarray] = []

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes that crossed each directed link of the topology so far."""
        out = np.zeros(self._n_links)
        out[self._used] = self._link_bytes
        return out

    def add(self, flows: np.ndarray) -> None:
        """Start moving the bytes of *flows* (their latency has been paid)."""
        owner, links = self.routes.flow_links(self.flow_pair[flows])
        self._owner = np.concatenate([self._owner, owner + len(self.active)])
        self._link = np.concatenate([self._link, links])
        self.active = np.concatenate([self.active, flows])
        self._changed.append(links)

    def advance(self, dt: float) -> None:
        """Move every active flow's bytes for *dt* seconds at its current rate."""
        if dt <= 0 or not len(self.active):
            return
        moved = self.rate[self.active] * dt
        self.remaining[self.active] -= moved
        self.delivered[self.active] += moved

    def time_to_next_completion(self) -> float:
        """Seconds until the first active flow finishes at current rates (inf if none)."""
        if not len(self.active):
            return float("inf")
        return max(0.0, float(np.min(self.remaining[self.active] / self.rate[self.active])))

    def pop_completed(self, tol_s: float) -> np.ndarray:
        """Remove and return the flows that finish within *tol_s*; count their bytes on links."""
        if not len(self.active):
            return self.active
        done_mask = self.remaining[self.active] / self.rate[self.active] <= tol_s
        if not done_mask.any():
            return self.active[:0]
        done = self.active[done_mask]
        gone = done_mask[self._owner]
        links = self._link[gone]
        np.add.at(self._link_bytes, links, self.delivered[self.active[self._owner[gone]]])
        position = np.cumsum(~done_mask) - 1
        self._owner = position[self._owner[~gone]]
        self._link = self._link[~gone]
        self.active = self.active[~done_mask]
        self.rate[done] = 0.0
        self._changed.append(links)
        return done

    def update_rates(self) -> None:
        """Recompute max-min rates over the component touched by flows added or removed."""
        if not self._changed:
            return
        seed = np.concatenate(self._changed)
        self._changed.clear()
        if not len(self.active):
            return
        in_component = self._component(seed)
        owner, links = self._owner, self._link
        if in_component is None:
            flows = np.arange(len(self.active))
        else:
            flows = np.flatnonzero(in_component)
            keep = in_component[owner]
            local = np.cumsum(in_component) - 1
            owner, links = local[owner[keep]], links[keep]
        rates = max_min_rates(owner, links, len(flows), self.capacity_Bps)
        self.rate[self.active[flows]] = rates

    def _component(self, seed: np.ndarray) -> np.ndarray | None:
        """Mask over active flows reachable from *seed* links; None when it is all of them."""
        marked = np.zeros(len(self.capacity_Bps), dtype=bool)
        marked[seed] = True
        owner, links = self._owner, self._link
        for _ in range(MAX_EXPAND_ROUNDS):
            flows = np.zeros(len(self.active), dtype=bool)
            flows[owner[marked[links]]] = True
            reached = links[flows[owner]]
            if marked[reached].all():
                return None if flows.all() else flows
            marked[reached] = True
        return None
