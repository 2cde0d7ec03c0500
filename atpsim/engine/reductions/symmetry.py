"""The symmetry reduction: time one flow per orbit of a rank shift that maps the run onto itself.

Let the cluster's ranks, sorted, be ``r_0 < ... < r_{k-1}`` and ``sigma`` the shift
``r_i -> r_{(i + d) mod k}`` for a divisor ``d`` of ``k``. If ``sigma`` maps the transfers of
every step onto the transfers of the same step (same bytes, same lane), and the route of
every transfer onto the route of its image link by link under one bijection ``tau`` of the
links used, with equal bandwidth and latency, then the whole run commutes with ``sigma``:
the schedule, the dependencies and the start at t = 0 are invariant, and max-min fair rates
are unique, so flows that ``sigma`` maps onto each other start, share links and finish
alike. On a torus this is translation along the torus (dimension-order routing is
translation invariant): dimension-1 groups of ``DeviceMesh(1024, 4)`` on a 64 x 64 torus are
invariant under a shift by one torus row, ``d = 64``; one ring of every GPU on a switch under
``d = 1``.

Then one flow per orbit is enough: those whose source sits at a position ``< d``, with ranks
read modulo ``d`` (the rendezvous rule on the quotient gives each orbit's dependencies) and
links replaced by their orbit's representative. ``sigma`` acts freely on ranks, and we ask it
to act freely on the links used (every orbit of ``k / d`` links), so a link's load in the
quotient, counting a flow once per link of the orbit it crosses, is the load of each real
link of the orbit, and so are the bytes it carries.

:func:`find_symmetry` looks for the shift; :meth:`Symmetry.shrink` gives the quotient problem
and :meth:`Symmetry.expand` spreads its solution back over the orbits (path ``symmetry+...``).
Invariance is checked once per template step the schedule declares.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from atpsim.collectives.schedule import Step
from atpsim.engine.problem import Problem, Solution
from atpsim.engine.routes import GATHER_CHUNK_PAIRS, PairRoutes, used_links

NAME = "symmetry"
#: Skip the search when the template steps hold more transfers than this (all-to-all at scale).
MAX_SEARCH_TRANSFERS = 4_000_000


@dataclass(frozen=True)
class Symmetry:
    """Shift by *shift* positions over the sorted cluster *ranks* (*position[r]*: the place of
    GPU ``r`` among them, -1 outside); *link_rep[l]* is the representative link of the orbit of
    link ``l`` (``l`` itself for unused links); *used_links* are the links the routes cross."""

    ranks: np.ndarray
    position: np.ndarray
    shift: int
    link_rep: np.ndarray
    used_links: np.ndarray

    @property
    def order(self) -> int:
        """Members of every orbit (ranks, flows and links alike): ``k / d``."""
        return len(self.ranks) // self.shift

    def orbit_id(self, ranks: np.ndarray) -> np.ndarray:
        """The quotient's rank id of each GPU rank: its position modulo the shift."""
        return self.position[ranks] % self.shift

    def shrink(self, problem: Problem) -> Problem:
        """The transfers whose source sits at a position ``< d``, links read as their orbit's,
        rendezvous kept over orbit ids (templates stay templates, so alike steps stay alike)."""
        steps = problem.steps.map(self._quotient_step)
        return replace(problem, steps=steps, routes=self._quotient_routes(problem.routes),
                       rank_of=self.orbit_id, n_ids=self.shift)

    def expand(self, quotient: Solution) -> Solution:
        """Every rank finishes as its orbit's representative (NaN outside the cluster); every
        used link carries what its orbit's representative carried; bytes times the order."""
        done = np.full(len(self.position), np.nan)
        done[self.ranks] = quotient.done_s[np.arange(len(self.ranks)) % self.shift]
        link_bytes = np.zeros(len(quotient.link_bytes))
        link_bytes[self.used_links] = quotient.link_bytes[self.link_rep[self.used_links]]
        spread = Solution(done, link_bytes, quotient.delivered_bytes * self.order, quotient.path)
        return spread.relabel(NAME)

    def _quotient_step(self, s: Step) -> Step:
        mine = self.position[s.src] < self.shift
        return Step(s.src[mine], s.dst[mine], s.nbytes[mine], s.group[mine],
                    None if s.lane is None else s.lane[mine])

    def _quotient_routes(self, routes: PairRoutes) -> PairRoutes:
        keep = np.flatnonzero(self.position[routes.src] < self.shift)
        lens = routes.route_len[keep]
        ptr = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        links = routes.links_of(keep, lens)
        return PairRoutes(routes.n_gpus, routes.keys[keep], routes.src[keep], routes.dst[keep],
                          ptr, self.link_rep[links].astype(links.dtype), routes.latency_s[keep],
                          routes.bottleneck_Bps[keep])


def _step_invariant(s: Step, position: np.ndarray, k: int, d: int) -> bool:
    """Do the transfers of *s*, shifted by *d* positions, give the same transfers back?"""
    a, b, lane = position[s.src], position[s.dst], s.lanes
    lanes = int(lane.max()) + 1 if len(lane) else 1
    key = (a * k + b) * lanes + lane
    moved = (((a + d) % k) * k + (b + d) % k) * lanes + lane
    first, second = np.lexsort((s.nbytes, key)), np.lexsort((s.nbytes, moved))
    return bool(np.array_equal(key[first], moved[second])
                and np.array_equal(s.nbytes[first], s.nbytes[second]))


def _link_map(routes: PairRoutes, sym_ranks: np.ndarray, position: np.ndarray, d: int,
              bandwidth_Bps: np.ndarray, latency_s: np.ndarray) -> np.ndarray | None:
    """``tau`` of the shift by *d* positions (:func:`link_map`)."""
    k = len(sym_ranks)
    src = sym_ranks[(position[routes.src] + d) % k]
    dst = sym_ranks[(position[routes.dst] + d) % k]
    return link_map(routes, src, dst, bandwidth_Bps, latency_s)


def link_map(routes: PairRoutes, src: np.ndarray, dst: np.ndarray, bandwidth_Bps: np.ndarray,
             latency_s: np.ndarray) -> np.ndarray | None:
    """``tau`` as an array over link ids (identity off the routes) for a rank map that sends
    pair ``i`` to ``(src[i], dst[i])``, or None when the routes of some pair and of its
    image do not match link for link (same bandwidth and latency, one bijection)."""
    image = np.minimum(routes.index(src, dst), len(routes) - 1)
    if not np.array_equal(routes.keys[image], src * routes.n_gpus + dst):
        return None
    if not np.array_equal(routes.route_len[image], routes.route_len):
        return None
    tau = np.full(len(bandwidth_Bps), -1)
    inverse = np.full(len(bandwidth_Bps), -1)
    for i in range(0, len(routes), GATHER_CHUNK_PAIRS):  # chunks: the routes can be 33 M links
        end = min(i + GATHER_CHUNK_PAIRS, len(routes))
        here = routes.links[routes.ptr[i]:routes.ptr[end]]
        there = routes.links_of(image[i:end])
        if not (np.array_equal(bandwidth_Bps[here], bandwidth_Bps[there])
                and np.array_equal(latency_s[here], latency_s[there])
                and _assign(tau, here, there) and _assign(inverse, there, here)):
            return None
    unused = tau < 0
    tau[unused] = np.flatnonzero(unused)
    return tau


def _assign(mapping: np.ndarray, keys: np.ndarray, values: np.ndarray) -> bool:
    """Set ``mapping[keys] = values`` (-1: unset); False where a key already had, or gets
    here, two different values (one link sent to two images, or two links to one)."""
    before = mapping[keys]
    if np.any((before >= 0) & (before != values)):
        return False
    mapping[keys] = values
    return bool(np.array_equal(mapping[keys], values))


def _power(tau: np.ndarray, e: int) -> np.ndarray:
    """``tau`` composed with itself *e* times (by squaring)."""
    out, base = np.arange(len(tau)), tau
    while e:
        if e & 1:
            out = base[out]
        base = base[base]
        e >>= 1
    return out


def _prime_factors(m: int) -> list[int]:
    out, q = [], 2
    while q * q <= m:
        if m % q == 0:
            out.append(q)
            while m % q == 0:
                m //= q
        q += 1
    return out + ([m] if m > 1 else [])


def _orbit_min(tau: np.ndarray, m: int) -> np.ndarray:
    """Smallest id in ``{tau^j(l) : 0 <= j < m}`` for every link (windows doubled)."""
    result = np.full(len(tau), np.iinfo(np.int64).max)
    offset, window_min, window_map = np.arange(len(tau)), np.arange(len(tau)), tau
    while m:
        if m & 1:
            result = np.minimum(result, window_min[offset])
            offset = window_map[offset]
        window_min = np.minimum(window_min, window_min[window_map])
        window_map = window_map[window_map]
        m >>= 1
    return result


def _free_on(tau: np.ndarray, used: np.ndarray, m: int) -> bool:
    """No used link is fixed by a power ``tau^j``, ``0 < j < m`` (enough: ``j = m / q``)."""
    return all(not np.any(_power(tau, m // q)[used] == used) for q in _prime_factors(m))


def find_symmetry(problem: Problem) -> Symmetry | None:
    """The shift with the smallest *d* (most reduction) under which the run is invariant."""
    templates = [t for t, _ in problem.steps.in_use()]
    routes, links = problem.routes, problem.links
    if not len(routes) or sum(len(t) for t in templates) > MAX_SEARCH_TRANSFERS:
        return None
    ranks = np.unique(np.concatenate([t.src for t in templates] + [t.dst for t in templates]))
    k = len(ranks)
    position = np.full(routes.n_gpus, -1, dtype=np.int64)
    position[ranks] = np.arange(k)
    used = used_links(routes.links, len(links))
    for d in (d for d in range(1, k) if k % d == 0):
        if not all(_step_invariant(t, position, k, d) for t in templates):
            continue
        tau = _link_map(routes, ranks, position, d, links.bandwidth_Bps, links.latency_s)
        if tau is None or not _free_on(tau, used, k // d):
            continue
        return Symmetry(ranks, position, d, _orbit_min(tau, k // d), used)
    return None
