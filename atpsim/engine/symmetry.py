"""Rotational symmetry: simulate one flow per orbit of a shift that maps the run onto itself.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Step
from atpsim.engine.routes import PairRoutes
from atpsim.engine.stepwise import event_run
from atpsim.engine.vectorized import sweep

#: Skip the search when the distinct steps hold more transfers than this (all-to-all at scale).
MAX_SEARCH_TRANSFERS = 4_000_000


@dataclass(frozen=True)
class Symmetry:
    """Shift by *shift* positions over the sorted cluster *ranks*; *link_rep[l]* is the
    representative link of the orbit of link ``l`` (``l`` itself for unused links)."""

    ranks: np.ndarray
    position: np.ndarray
    shift: int
    link_rep: np.ndarray

    @property
    def order(self) -> int:
        """Members of every orbit (ranks, flows and links alike): ``k / d``."""
        return len(self.ranks) // self.shift


@dataclass(frozen=True)
class QuotientRun:
    """Finish time of every rank (NaN outside the cluster), bytes per link, bytes delivered."""

    done_s: np.ndarray
    link_bytes: np.ndarray
    delivered: float
    events: int


def _distinct(steps: tuple[Step, ...]) -> list[Step]:
    seen: dict[tuple[int, ...], Step] = {}
    for s in steps:
        seen.setdefault((id(s.src), id(s.dst), id(s.nbytes), id(s.lane)), s)
    return list(seen.values())


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
    """``tau`` as an array over link ids (identity off the routes), or None when the routes
    of some pair and of its image do not match link for link."""
    k = len(sym_ranks)
    src = sym_ranks[(position[routes.src] + d) % k]
    dst = sym_ranks[(position[routes.dst] + d) % k]
    image = np.minimum(routes.index(src, dst), len(routes) - 1)
    if not np.array_equal(routes.keys[image], src * routes.n_gpus + dst):
        return None
    if not np.array_equal(routes.route_len[image], routes.route_len):
        return None
    here = routes.links
    _, there = routes.flow_links(image)
    if not (np.array_equal(bandwidth_Bps[here], bandwidth_Bps[there])
            and np.array_equal(latency_s[here], latency_s[there])):
        return None
    tau = np.arange(len(bandwidth_Bps))
    tau[here] = there
    inverse = np.full(len(bandwidth_Bps), -1)
    inverse[there] = here
    if not (np.array_equal(tau[here], there) and np.array_equal(inverse[there], here)):
        return None  # one link sent to two images, or two links to one
    return tau


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


def find_symmetry(steps: tuple[Step, ...], routes: PairRoutes, bandwidth_Bps: np.ndarray,
                  latency_s: np.ndarray) -> Symmetry | None:
    """The shift with the smallest *d* (most reduction) under which the run is invariant."""
    distinct = _distinct(steps)
    if not len(routes) or sum(len(s) for s in distinct) > MAX_SEARCH_TRANSFERS:
        return None
    ranks = np.unique(np.concatenate([s.src for s in distinct] + [s.dst for s in distinct]))
    k = len(ranks)
    position = np.full(routes.n_gpus, -1, dtype=np.int64)
    position[ranks] = np.arange(k)
    used = np.unique(routes.links)
    for d in (d for d in range(1, k) if k % d == 0):
        if not all(_step_invariant(s, position, k, d) for s in distinct):
            continue
        tau = _link_map(routes, ranks, position, d, bandwidth_Bps, latency_s)
        if tau is None or not _free_on(tau, used, k // d):
            continue
        return Symmetry(ranks, position, d, _orbit_min(tau, k // d))
    return None


def _quotient_routes(sym: Symmetry, routes: PairRoutes) -> PairRoutes:
    """The pairs whose source sits at a position ``< d``, links read as their orbit's."""
    keep = np.flatnonzero(sym.position[routes.src] < sym.shift)
    lens = routes.route_len[keep]
    ptr = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    _, links = routes.flow_links(keep)
    return PairRoutes(routes.n_gpus, routes.keys[keep], routes.src[keep], routes.dst[keep], ptr,
                      sym.link_rep[links], routes.latency_s[keep], routes.bottleneck_Bps[keep])


def quotient_steps(sym: Symmetry, steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """Each step's transfers whose source sits at a position ``< d`` (steps that share arrays
    still do, so alike steps stay alike)."""
    cache: dict[tuple[int, ...], Step] = {}
    out = []
    for s in steps:
        key = (id(s.src), id(s.dst), id(s.nbytes), id(s.lane))
        if key not in cache:
            mine = sym.position[s.src] < sym.shift
            cache[key] = Step(s.src[mine], s.dst[mine], s.nbytes[mine], s.group[mine],
                              None if s.lane is None else s.lane[mine])
        out.append(cache[key])
    return tuple(out)


def _spread(sym: Symmetry, routes: PairRoutes, orbit_done: np.ndarray, quotient_link_bytes: np.ndarray,
            delivered: float, events: int) -> QuotientRun:
    done = np.full(routes.n_gpus, np.nan)
    done[sym.ranks] = orbit_done[np.arange(len(sym.ranks)) % sym.shift]
    used = np.unique(routes.links)
    link_bytes = np.zeros(len(quotient_link_bytes))
    link_bytes[used] = quotient_link_bytes[sym.link_rep[used]]
    return QuotientRun(done, link_bytes, delivered * sym.order, events)


def sweep_symmetric(sym: Symmetry, steps: tuple[Step, ...], routes: PairRoutes, n_links: int) -> QuotientRun | None:
    """The vectorized sweep over one flow per orbit; None where it is not exact."""
    result = sweep(quotient_steps(sym, steps), _quotient_routes(sym, routes), sym.shift, n_links,
                   rank_of=lambda ranks: sym.position[ranks] % sym.shift)
    if result is None:
        return None
    return _spread(sym, routes, result.done_s, result.link_bytes, float(result.pair_bytes.sum()), 0)


def run_symmetric(sym: Symmetry, steps: tuple[Step, ...], routes: PairRoutes,
                  capacity_Bps: np.ndarray) -> QuotientRun:
    """Simulate one flow per orbit with the event engine and spread the answer over orbits."""
    run = event_run(quotient_steps(sym, steps), _quotient_routes(sym, routes), capacity_Bps,
                    rank_of=lambda ranks: sym.position[ranks] % sym.shift, n_ids=sym.shift)
    return _spread(sym, routes, run.done_s, run.link_bytes, run.delivered, run.events)
