"""The mirror reduction: time one flow per orbit of the ranks' reversal, lanes swapped in pairs.

NCCL's double binary tree (:mod:`atpsim.collectives.tree`) is no rank shift's fixed point: a
binary tree over the nodes in order does not survive moving every node along. But its second
tree is its first with the nodes and each node's members in reverse order, so the reversal
``sigma: r_i -> r_{k-1-i}`` of the cluster's sorted ranks ``r_0 < ... < r_{k-1}`` maps tree 0
of each channel onto tree 1 of a channel (on a fabric whose routes the reversal maps onto
routes: a fat tree's). The transfers of every step go to transfers of the same step, same
bytes, in lane ``lambda(lane)``, an involution of the lanes.

As for the rank shift (:mod:`~atpsim.engine.reductions.symmetry`), if ``sigma`` maps the
transfers of every step so, and the route of every pair onto the route of its image link by
link under one bijection ``tau`` of the links used (equal bandwidth and latency), the schedule,
the rendezvous rule (kept per rank and lane, which ``sigma`` and ``lambda`` carry together)
and the start are invariant and max-min rates are unique, so flows that ``sigma`` maps onto
each other start, share links and finish alike. ``sigma`` has no fixed rank (``k`` even) and
``tau`` must fix no used link, so every orbit holds two ranks, two flows, two links: one flow
per orbit is simulated (those whose source sits in the first half), links read as their
orbit's representative, and a link's load in the quotient is each real link's.

The rendezvous is over (rank, lane), and an end ``(r, a)`` is the same as ``(sigma(r),
lambda(a))``: the quotient names each such orbit by an id (first-half position, lane) and runs
its transfers between ids in one lane; the ids are the quotient's ranks and its routes are
keyed by them. ``lambda`` must move every lane, so that an id's lane tells on which side of
the mirror the real end sits and each pair of ids stands for one pair of ranks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from atpsim.collectives.schedule import Step, Steps
from atpsim.engine.problem import Problem, Solution, same_rank
from atpsim.engine.reductions.symmetry import MAX_SEARCH_TRANSFERS, link_map
from atpsim.engine.routes import PairRoutes, used_links

NAME = "mirror"


@dataclass(frozen=True, eq=False)
class Mirror:
    """The reversal of the sorted cluster *ranks* (*position[r]*: the place of GPU ``r`` among
    them, -1 outside), lanes swapped by *lanes* (``lambda``); *link_rep[l]*: the smaller of
    ``l`` and ``tau(l)`` (``l`` for unused links); *used_links*: the links the routes cross;
    *routes*: the quotient's routes, keyed by id pairs (module docstring)."""

    ranks: np.ndarray
    position: np.ndarray
    lanes: np.ndarray
    link_rep: np.ndarray
    used_links: np.ndarray
    routes: PairRoutes

    @property
    def half(self) -> int:
        return len(self.ranks) // 2

    def ids(self, ranks: np.ndarray, lanes: np.ndarray) -> np.ndarray:
        """The quotient id of each end (rank, lane) (:func:`_ids`)."""
        return _ids(self.position, self.lanes, ranks, lanes)

    def shrink(self, problem: Problem) -> Problem:
        """The transfers whose source sits in the first half, between quotient ids, one lane."""
        steps = problem.steps.map(self._quotient_step)
        return replace(problem, steps=steps, routes=self.routes, rank_of=same_rank,
                       n_ids=self.half * len(self.lanes))

    def expand(self, quotient: Solution) -> Solution:
        """Each rank finishes with the last of its ids (a rank and its mirror image alike; NaN
        outside the cluster); every used link carries what its orbit's representative
        carried; twice the bytes."""
        last = quotient.done_s.reshape(self.half, len(self.lanes)).max(axis=1)
        q = np.arange(len(self.ranks))
        done = np.full(len(self.position), np.nan)
        done[self.ranks] = last[np.minimum(q, len(self.ranks) - 1 - q)]
        link_bytes = np.zeros(len(quotient.link_bytes))
        link_bytes[self.used_links] = quotient.link_bytes[self.link_rep[self.used_links]]
        spread = Solution(done, link_bytes, quotient.delivered_bytes * 2, quotient.path)
        return spread.relabel(NAME)

    def _quotient_step(self, s: Step) -> Step:
        mine = self.position[s.src] < self.half
        lanes = s.lanes[mine]
        return Step(self.ids(s.src[mine], lanes), self.ids(s.dst[mine], lanes), s.nbytes[mine],
                    s.group[mine], None)


def find_mirror(problem: Problem) -> Mirror | None:
    """The mirror of *problem* (a problem over GPU ranks), or None where the run is not
    invariant under it (module docstring)."""
    templates = [t for t, _ in problem.steps.in_use()]
    routes, links = problem.routes, problem.links
    if (problem.rank_of is not same_rank or not len(routes) or not templates
            or all(t.lane is None for t in templates)
            or sum(len(t) for t in templates) > MAX_SEARCH_TRANSFERS):
        return None
    ranks = np.unique(np.concatenate([t.src for t in templates] + [t.dst for t in templates]))
    if len(ranks) % 2:
        return None
    position = np.full(routes.n_gpus, -1, dtype=np.int64)
    position[ranks] = np.arange(len(ranks))
    lanes = _lane_map(templates, position, len(ranks))
    if lanes is None or not all(_invariant(t, position, lanes) for t in templates):
        return None
    mirrored = ranks[len(ranks) - 1 - position[routes.src]], ranks[len(ranks) - 1 - position[routes.dst]]
    tau = link_map(routes, *mirrored, links.bandwidth_Bps, links.latency_s)
    used = used_links(routes.links, len(links))
    if tau is None or np.any(tau[used] == used):
        return None
    link_rep = np.minimum(tau, np.arange(len(tau)))
    quotient = _quotient_routes(position, lanes, link_rep, problem.steps, routes)
    return None if quotient is None else Mirror(ranks, position, lanes, link_rep, used, quotient)


def _ids(position: np.ndarray, lanes: np.ndarray, ranks: np.ndarray, lane: np.ndarray
         ) -> np.ndarray:
    """The quotient id of each end (``ranks[i]``, ``lane[i]``): ``position * n_lanes + lane``
    for a rank in the first half, its mirror image's (``k - 1 - position``, ``lambda(lane)``)
    else (*lanes*: ``lambda``; ``k``: the ranks placed by *position*)."""
    k = int(position.max()) + 1
    q = position[ranks]
    first = q < k // 2
    return np.where(first, q, k - 1 - q) * len(lanes) + np.where(first, lane, lanes[lane])


def _lane_map(templates: list[Step], position: np.ndarray, k: int) -> np.ndarray | None:
    """``lambda``: lane ``a`` -> the lane whose transfers, in every template, are lane ``a``'s
    mirrored; None unless that is one lane each and an involution moving every lane."""
    n_lanes = max(int(t.lanes.max()) + 1 if len(t) else 1 for t in templates)
    here = [hashlib.sha1() for _ in range(n_lanes)]
    there = [hashlib.sha1() for _ in range(n_lanes)]
    for t in templates:
        a, b = position[t.src], position[t.dst]
        for lane in range(n_lanes):
            mine = t.lanes == lane
            for digest, key in ((here, a * k + b), (there, (k - 1 - a) * k + (k - 1 - b))):
                order = np.lexsort((t.nbytes[mine], key[mine]))
                digest[lane].update(key[mine][order].tobytes())
                digest[lane].update(t.nbytes[mine][order].tobytes() + b"|")
    names = [d.digest() for d in here]
    if len(set(names)) < n_lanes:
        return None
    index = {name: lane for lane, name in enumerate(names)}
    lanes = np.array([index.get(d.digest(), -1) for d in there], dtype=np.int64)
    every = np.arange(n_lanes)
    if np.any(lanes < 0) or not np.array_equal(lanes[lanes], every) or np.any(lanes == every):
        return None
    return lanes


def _invariant(s: Step, position: np.ndarray, lanes: np.ndarray) -> bool:
    """Do the transfers of *s*, mirrored with their lanes swapped, give the same transfers
    back (checked outright; :func:`_lane_map` only compared digests)?"""
    k, n_lanes = int(position.max()) + 1, len(lanes)
    a, b, lane = position[s.src], position[s.dst], s.lanes
    key = (a * k + b) * n_lanes + lane
    moved = ((k - 1 - a) * k + (k - 1 - b)) * n_lanes + lanes[lane]
    first, second = np.lexsort((s.nbytes, key)), np.lexsort((s.nbytes, moved))
    return bool(np.array_equal(key[first], moved[second])
                and np.array_equal(s.nbytes[first], s.nbytes[second]))


def _quotient_routes(position: np.ndarray, lanes: np.ndarray, link_rep: np.ndarray,
                     steps: Steps, routes: PairRoutes) -> PairRoutes | None:
    """Routes of the quotient's id pairs: each the route of the rank pair it stands for, links
    read as their orbit's representative (*link_rep*); None where two rank pairs share an id
    pair."""
    half = (int(position.max()) + 1) // 2
    n_ids = half * len(lanes)
    parts = []
    for t, _ in steps.in_use():
        mine = position[t.src] < half
        src, dst, lane = t.src[mine], t.dst[mine], t.lanes[mine]
        key = _ids(position, lanes, src, lane) * n_ids + _ids(position, lanes, dst, lane)
        parts.append(np.stack([key, routes.index(src, dst)]))
    keys, pairs = np.concatenate(parts, axis=1)
    order = np.argsort(keys, kind="stable")
    keys, pairs = keys[order], pairs[order]
    again = keys[1:] == keys[:-1]
    if np.any(again & (pairs[1:] != pairs[:-1])):
        return None
    keys, pairs = keys[np.r_[True, ~again]], pairs[np.r_[True, ~again]]
    lens = routes.route_len[pairs]
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    links = routes.links_of(pairs, lens)
    return PairRoutes(n_ids, keys, keys // n_ids, keys % n_ids, ptr,
                      link_rep[links].astype(links.dtype), routes.latency_s[pairs],
                      routes.bottleneck_Bps[pairs])
