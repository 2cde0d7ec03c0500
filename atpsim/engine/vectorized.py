"""The vectorized fast path: a longest-path sweep, exact when no link is ever shared.

If no two flows are moving over the same directed link at the same time, every flow runs at
its route's bottleneck bandwidth, so its duration is fixed: ``latency + bytes / bottleneck``.
Then the step sweep of the rendezvous rule is the whole simulation::

    start = max(done[src], done[dst]);  finish = start + duration;  done[ends] max= finish

one numpy update per step for all ranks and groups (a ring of 4096 GPUs: 8190 updates).
With lanes (the bidirectional ring), ``done`` is kept per (rank, lane), as the rule says.

Exactness is checked, not assumed. Transfers of the same pair in the same lane never overlap
(the later one waits for the earlier one's step); a pair used by two lanes is refused. So a link crossed by a single pair is safe by construction;
for links crossed by several pairs the sweep records the moving intervals
``[start + latency, finish)`` of those pairs' flows and checks that on each link they are
disjoint (sorted by start, each begins after the previous one ends). If they are not, the
sweep returns None and the caller runs the event engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Step
from atpsim.engine.routes import PairRoutes

RankMap = Callable[[np.ndarray], np.ndarray]

#: Intervals on a link may overlap by this fraction of their end time (float noise).
OVERLAP_RTOL = 1e-10
#: Give up recording intervals past this many (flow, link) incidences; the event engine runs.
MAX_CHECKED_INCIDENCES = 20_000_000
#: Check the intervals of the first this many watched steps at once: a contended run usually
#: overlaps there, and giving up early saves recording the rest.
EARLY_CHECK_STEPS = 4


@dataclass(frozen=True)
class SweepResult:
    """Finish time of each rank (its last transfer), bytes moved per pair and per link."""

    done_s: np.ndarray
    pair_bytes: np.ndarray
    link_bytes: np.ndarray


class _StepArrays:
    """Per distinct step arrays: pair ids, durations, rates, uniqueness, conflict positions,
    and the ends' places in the ``done`` array (rank id, lane)."""

    def __init__(self, routes: PairRoutes, conflict_pair: np.ndarray, n_ids: int, rank_of: RankMap):
        self.routes = routes
        self.conflict_pair = conflict_pair
        self.n_ids = n_ids
        self.rank_of = rank_of
        self.cache: dict[tuple[int, ...], tuple] = {}
        self.uses: dict[tuple[int, ...], int] = {}

    def pair_bytes(self) -> np.ndarray:
        """Bytes each pair carried: every use of a step moves its transfers' bytes."""
        out = np.zeros(len(self.routes))
        for key, arrays in self.cache.items():
            np.add.at(out, arrays[0], self.uses[key] * arrays[-1])
        return out

    def get(self, s: Step) -> tuple:
        key = (id(s.src), id(s.dst), id(s.nbytes), id(s.lane))
        if key not in self.cache:
            offset = s.lanes * self.n_ids
            ends = (self.rank_of(s.src) + offset, self.rank_of(s.dst) + offset)
            pairs = self.routes.index(s.src, s.dst)
            rate = self.routes.bottleneck_Bps[pairs]
            latency = self.routes.latency_s[pairs]
            duration = latency + s.nbytes / rate
            src_unique = len(np.unique(ends[0])) == len(s.src)
            dst_unique = len(np.unique(ends[1])) == len(s.dst)
            pairs_unique = len(np.unique(pairs)) == len(pairs)
            watched = np.flatnonzero(self.conflict_pair[pairs])
            self.cache[key] = (pairs, latency, duration, src_unique, dst_unique, pairs_unique,
                               watched, ends, s.nbytes)
            self.uses[key] = 0
        self.uses[key] += 1
        return self.cache[key]


def _conflicting_pairs(routes: PairRoutes) -> tuple[np.ndarray, np.ndarray]:
    """Pairs that share a link with another pair, and the links crossed by several pairs."""
    n_links = int(routes.links.max()) + 1 if len(routes.links) else 0
    per_link = np.bincount(routes.links, minlength=n_links)
    shared_link = per_link >= 2
    if not len(routes):
        return np.zeros(0, dtype=bool), shared_link
    hits = shared_link[routes.links].astype(np.int64)
    return np.add.reduceat(hits, routes.ptr[:-1]) > 0, shared_link


def _lane_count(steps: tuple[Step, ...], routes: PairRoutes) -> int | None:
    """Lanes of *steps*; None when one pair is used by two lanes (they could overlap)."""
    if all(s.lane is None for s in steps):
        return 1
    distinct = {(id(s.src), id(s.dst), id(s.lane)): s for s in steps}
    lane_of = np.full(len(routes), -1, dtype=np.int64)
    for s in distinct.values():
        pairs, lanes = routes.index(s.src, s.dst), s.lanes
        order = np.lexsort((lanes, pairs))
        pairs, lanes = pairs[order], lanes[order]
        if np.any((pairs[1:] == pairs[:-1]) & (lanes[1:] != lanes[:-1])):
            return None
        seen = lane_of[pairs]
        if np.any((seen >= 0) & (seen != lanes)):
            return None
        lane_of[pairs] = lanes
    return int(lane_of.max()) + 1


def _same(ranks: np.ndarray) -> np.ndarray:
    return ranks


def sweep(steps: tuple[Step, ...], routes: PairRoutes, n_ranks: int, n_links: int,
          rank_of: RankMap = _same) -> SweepResult | None:
    """Run *steps* with fixed durations; None when some link would carry two flows at once.

    The rendezvous rule is kept over ``rank_of(rank)`` (``0 .. n_ranks - 1``; the rank itself
    by default), and *done_s* is indexed so. A pair that crosses one link twice counts as
    sharing it (in a one-flow-per-orbit run it stands for two flows on that link)."""
    n_lanes = _lane_count(steps, routes)
    if n_lanes is None:
        return None
    conflict_pair, shared_link = _conflicting_pairs(routes)
    arrays = _StepArrays(routes, conflict_pair, n_ranks, rank_of)
    done = np.zeros(n_ranks * n_lanes)
    watched: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    budget = MAX_CHECKED_INCIDENCES
    route_len = routes.route_len
    for s in steps:
        pairs, latency, duration, src_unique, dst_unique, pairs_unique, watch, (src, dst), _ = arrays.get(s)
        if not pairs_unique:
            return None
        start = np.maximum(done[src], done[dst])
        finish = start + duration
        if src_unique:
            done[src] = finish
        else:
            np.maximum.at(done, src, finish)
        if dst_unique:
            done[dst] = np.maximum(done[dst], finish)
        else:
            np.maximum.at(done, dst, finish)
        if len(watch):
            budget -= int(route_len[pairs[watch]].sum())
            if budget < 0:
                return None
            watched.append((pairs[watch], start[watch] + latency[watch], finish[watch]))
            if len(watched) == EARLY_CHECK_STEPS and not _disjoint_on_links(watched, routes, shared_link):
                return None
    if watched and not _disjoint_on_links(watched, routes, shared_link):
        return None
    pair_bytes = arrays.pair_bytes()
    link_bytes = np.zeros(n_links)
    np.add.at(link_bytes, routes.links, np.repeat(pair_bytes, route_len))
    return SweepResult(done.reshape(n_lanes, n_ranks).max(axis=0), pair_bytes, link_bytes)


def _disjoint_on_links(watched: list, routes: PairRoutes, shared_link: np.ndarray) -> bool:
    pairs = np.concatenate([w[0] for w in watched])
    begin = np.concatenate([w[1] for w in watched])
    end = np.concatenate([w[2] for w in watched])
    moving = end > begin
    pairs, begin, end = pairs[moving], begin[moving], end[moving]
    owner, links = routes.flow_links(pairs)
    keep = shared_link[links]
    owner, links = owner[keep], links[keep]
    b, e = begin[owner], end[owner]
    order = np.lexsort((b, links))
    links, b, e = links[order], b[order], e[order]
    same = links[1:] == links[:-1]
    overlap = b[1:] < e[:-1] - OVERLAP_RTOL * e[:-1]
    return not bool(np.any(same & overlap))
