"""The longest-path solver: one vectorized sweep over the steps, exact when no link is shared.

If no two flows are moving over the same directed link at the same time, every flow runs at
its route's bottleneck bandwidth, so its duration is fixed: ``latency + bytes / bottleneck``.
Then the step sweep of the rendezvous rule is the whole simulation::

    start = max(done[src], done[dst]);  finish = start + duration;  done[ends] max= finish

one numpy update per step for all ranks and groups (a ring of 4096 GPUs: 8190 updates).
With lanes (the bidirectional ring), ``done`` is kept per (rank, lane), as the rule says.

Exactness is checked, not assumed. Transfers of the same pair in the same lane never overlap
(the later one waits for the earlier one's step); a pair used by two lanes is refused. So a
link crossed by a single pair is safe by construction; for links crossed by several pairs the
sweep records the moving intervals
``[start + latency, finish)`` of those pairs' flows and checks that on each link they are
disjoint (sorted by start, each begins after the previous one ends). If they are not, the
solver answers None and the next solver (the event-driven one) runs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from atpsim.collectives.schedule import Step, Steps
from atpsim.engine.problem import Problem, Solution
from atpsim.engine.routes import PairRoutes

NAME = "longest-path"

#: Intervals on a link may overlap by this fraction of their end time (float noise).
OVERLAP_RTOL = 1e-10
#: Give up recording intervals past this many (flow, link) incidences; the next solver runs.
MAX_CHECKED_INCIDENCES = 20_000_000
#: Check the intervals of the first this many watched steps at once: a contended run usually
#: overlaps there, and giving up early saves recording the rest.
EARLY_CHECK_STEPS = 4


class _TemplateArrays:
    """Per template step: pair ids, latencies, durations, uniqueness of the ends and pairs,
    the positions of transfers whose pair shares a link, the ends' places in the ``done``
    array (rank id, lane) and the bytes; computed on first use."""

    def __init__(self, problem: Problem, conflict_pair: np.ndarray):
        self.problem = problem
        self.conflict_pair = conflict_pair
        self.cache: dict[int, tuple] = {}

    def pair_bytes(self) -> np.ndarray:
        """Bytes each pair carried: every run of a template moves its transfers' bytes."""
        out = np.zeros(len(self.problem.routes))
        uses = Counter(self.problem.steps.order)
        for index, arrays in self.cache.items():
            np.add.at(out, arrays[0], uses[index] * arrays[-1])
        return out

    def get(self, index: int) -> tuple:
        if index not in self.cache:
            self.cache[index] = self._arrays(self.problem.steps.templates[index])
        return self.cache[index]

    def _arrays(self, s: Step) -> tuple:
        routes, rank_of = self.problem.routes, self.problem.rank_of
        offset = s.lanes * self.problem.n_ids
        ends = (rank_of(s.src) + offset, rank_of(s.dst) + offset)
        pairs = routes.index(s.src, s.dst)
        latency = routes.latency_s[pairs]
        duration = latency + s.nbytes / routes.bottleneck_Bps[pairs]
        src_unique = len(np.unique(ends[0])) == len(s.src)
        dst_unique = len(np.unique(ends[1])) == len(s.dst)
        pairs_unique = len(np.unique(pairs)) == len(pairs)
        watched = np.flatnonzero(self.conflict_pair[pairs])
        return (pairs, latency, duration, src_unique, dst_unique, pairs_unique, watched, ends,
                s.nbytes)


def _conflicting_pairs(routes: PairRoutes) -> tuple[np.ndarray, np.ndarray]:
    """Pairs that share a link with another pair, and the links crossed by several pairs."""
    n_links = int(routes.links.max()) + 1 if len(routes.links) else 0
    per_link = np.bincount(routes.links, minlength=n_links)
    shared_link = per_link >= 2
    if not len(routes):
        return np.zeros(0, dtype=bool), shared_link
    return np.logical_or.reduceat(shared_link[routes.links], routes.ptr[:-1]), shared_link


def _lane_count(steps: Steps, routes: PairRoutes) -> int | None:
    """Lanes of *steps*; None when one pair is used by two lanes (they could overlap)."""
    templates = [t for t, _ in steps.in_use()]
    if all(t.lane is None for t in templates):
        return 1
    lane_of = np.full(len(routes), -1, dtype=np.int64)
    for t in templates:
        pairs, lanes = routes.index(t.src, t.dst), t.lanes
        order = np.lexsort((lanes, pairs))
        pairs, lanes = pairs[order], lanes[order]
        if np.any((pairs[1:] == pairs[:-1]) & (lanes[1:] != lanes[:-1])):
            return None
        seen = lane_of[pairs]
        if np.any((seen >= 0) & (seen != lanes)):
            return None
        lane_of[pairs] = lanes
    return int(lane_of.max()) + 1


class LongestPath:
    """The longest-path solver (module docstring); answers None where it would not be exact."""

    name = NAME

    def solve(self, problem: Problem) -> Solution | None:
        """Run the steps with fixed durations; None when some link would carry two flows at
        once. A pair that crosses one link twice counts as sharing it (in a symmetry quotient
        it stands for two flows on that link)."""
        routes, n_ids = problem.routes, problem.n_ids
        n_lanes = _lane_count(problem.steps, routes)
        if n_lanes is None:
            return None
        conflict_pair, shared_link = _conflicting_pairs(routes)
        arrays = _TemplateArrays(problem, conflict_pair)
        done = np.zeros(n_ids * n_lanes)
        watched: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        budget, route_len = MAX_CHECKED_INCIDENCES, routes.route_len
        for index in problem.steps.order:
            pairs, latency, duration, src_unique, dst_unique, pairs_unique, watch, ends, _ = arrays.get(index)
            if not pairs_unique:
                return None
            start, finish = _advance(done, ends, duration, src_unique, dst_unique)
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
        link_bytes = np.zeros(problem.n_links)
        np.add.at(link_bytes, routes.links, np.repeat(pair_bytes, route_len))
        return Solution(done.reshape(n_lanes, n_ids).max(axis=0), link_bytes,
                        float(pair_bytes.sum()), NAME)


def _advance(done: np.ndarray, ends: tuple[np.ndarray, np.ndarray], duration: np.ndarray,
             src_unique: bool, dst_unique: bool) -> tuple[np.ndarray, np.ndarray]:
    """One step of the rendezvous rule: each transfer starts when both its ends are done
    and lasts *duration*; the ends are done at its finish. Returns (start, finish)."""
    src, dst = ends
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
    return start, finish


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
