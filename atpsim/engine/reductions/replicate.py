"""The replication reduction: groups that share no link never interact, so split a call into
clusters of link-sharing groups, time each distinct cluster once and copy its answer to the
clusters that are the same problem up to renaming (identical, link-disjoint groups).

Two clusters are identical when their groups have the same sizes and, walking each group's
pairs in the pattern's order and numbering links by first appearance, they give the same route
sequence over links of the same bandwidth and latency. Then one simulation serves both: the
time of each group carries over and the bytes of link ``k`` of one land on link ``k`` of the
other.

:func:`replicate` splits a call (memoized per topology: a step calls the same groups with
several buffer sizes, and routing every pair is the cost) into a :class:`Replication`, whose
:meth:`~Replication.expand` assembles the answers of the distinct clusters into the call's.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Pattern
from atpsim.engine.result import CollectiveResult
from atpsim.engine.routes import PairRoutes, route_pairs
from atpsim.topology.graph import Topology

NAME = "replicated"
#: Cluster splits (with the routes of every pair) kept per topology.
MEMO_ENTRIES = 16

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Cluster:
    """Group indices of one cluster, its canonical link order, and its identity key."""

    groups: tuple[int, ...]
    links: np.ndarray
    key: tuple


def local_pairs(pattern: Pattern) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (src, dst) local pairs of *pattern*, sorted."""
    seen = [(t.src, t.dst) for t, _ in pattern.in_use()]
    if not seen:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    p = 1 + max(int(max(a.max(), b.max())) for a, b in seen)
    keys = np.unique(np.concatenate([a * p + b for a, b in seen]))
    return keys // p, keys % p


def _occurrences(groups: list[tuple[int, ...]], pairs: dict[int, tuple[np.ndarray, np.ndarray]],
                 n_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Every group's pairs as ``src * n_gpus + dst`` keys, each group's in the pattern's order,
    and the group of each."""
    by_size: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by_size.setdefault(len(g), []).append(i)
    keys, owners = [], []
    for p, ids in by_size.items():
        rows = np.array([groups[i] for i in ids], dtype=np.int64).reshape(len(ids), p)
        a, b = pairs[p]
        keys.append((rows[:, a] * n_gpus + rows[:, b]).reshape(-1))
        owners.append(np.repeat(np.array(ids, dtype=np.int64), len(a)))
    return np.concatenate(keys), np.concatenate(owners)


def _components(owner: np.ndarray, links: np.ndarray, n: int, n_links: int) -> np.ndarray:
    """Connected components of *n* groups joined by shared links (label propagation over the
    incidence ``owner[i]`` crosses ``links[i]``): each group's label is its component's
    smallest group index."""
    label = np.arange(n)
    while True:
        per_link = np.full(n_links, n, dtype=np.int64)
        np.minimum.at(per_link, links, label[owner])
        new = label.copy()
        np.minimum.at(new, owner, per_link[links])
        new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


def _canonical(cluster: np.ndarray, links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Number each cluster's links by first appearance in the incidence order: the number of
    each incidence, and per cluster (sorted) its links in that order with their offsets."""
    ckey = cluster * n_links + links
    unique, first, inverse = np.unique(ckey, return_index=True, return_inverse=True)
    owner = unique // n_links
    order = np.lexsort((first, owner))
    starts = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    begin = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(unique), dtype=np.int64)
    rank[order] = np.arange(len(order)) - begin
    return rank[inverse.reshape(-1)], unique[order] % n_links, np.r_[starts, len(order)]


def clusters(topology: Topology, groups: list[tuple[int, ...]], patterns: dict[int, Pattern]
             ) -> tuple[list[Cluster], PairRoutes | None]:
    """Split *groups* (each of size >= 2) into link-sharing clusters with identity keys; also
    the routes of every pair of every group (None for one group: one cluster, nothing to
    compare or copy, so nothing is routed here; the solver routes its pairs)."""
    if len(groups) == 1:
        return [Cluster((0,), np.zeros(0, dtype=np.int64), (len(groups[0]),))], None
    pairs = {p: local_pairs(pat) for p, pat in patterns.items()}
    keys, owner = _occurrences(groups, pairs, topology.n_gpus)
    distinct, pair_of = np.unique(keys, return_inverse=True)
    table = route_pairs(topology, distinct)
    pair_of = pair_of.reshape(-1)
    n_links = len(topology.links)
    hop_owner, hop_link = table.flow_links(pair_of)
    label = _components(owner[hop_owner], hop_link, len(groups), n_links)
    order = np.lexsort((np.arange(len(owner)), owner, label[owner]))  # cluster, group, pattern
    owner, pair_of = owner[order], pair_of[order]
    lens = table.route_len[pair_of]
    hop_owner, hop_link = table.flow_links(pair_of)
    canonical, link_order, link_bounds = _canonical(label[owner][hop_owner], hop_link, n_links)
    occ_bounds = np.flatnonzero(np.r_[True, label[owner][1:] != label[owner][:-1], True])
    hop_bounds = np.r_[0, np.cumsum(lens)][occ_bounds]
    bandwidth, latency = topology.links.bandwidth_Bps, topology.links.latency_s
    result = []
    for c in range(len(occ_bounds) - 1):
        members = np.unique(owner[occ_bounds[c]:occ_bounds[c + 1]])
        links = link_order[link_bounds[c]:link_bounds[c + 1]]
        key = (
            tuple(len(groups[i]) for i in members),
            lens[occ_bounds[c]:occ_bounds[c + 1]].tobytes(),
            canonical[hop_bounds[c]:hop_bounds[c + 1]].tobytes(),
            bandwidth[links].tobytes(),
            latency[links].tobytes(),
        )
        result.append(Cluster(tuple(members.tolist()), links, key))
    return result, table


@dataclass(frozen=True)
class Replication:
    """A call's groups split into *clusters*; *twin[c]* is the first cluster identical to
    cluster ``c`` (``c`` itself for those to time); *routes* routes every pair of every group
    (None for a single group)."""

    clusters: tuple[Cluster, ...]
    twin: tuple[int, ...]
    routes: PairRoutes | None

    def distinct(self) -> list[int]:
        """The clusters to time: the first of each kind."""
        return [c for c, first in enumerate(self.twin) if first == c]

    def expand(self, answers: dict[int, CollectiveResult], n_groups: int,
               n_links: int) -> CollectiveResult:
        """The call's answer from each distinct cluster's (*answers*, by cluster index): group
        times copied to the twins, link bytes moved onto their links, flows and bytes added."""
        group_time, link_bytes = np.zeros(n_groups), np.zeros(n_links)
        n_flows, sent, delivered = 0, 0.0, 0.0
        for c, cluster in enumerate(self.clusters):
            first = self.twin[c]
            run = answers[first]
            if first == c:
                link_bytes += run.link_bytes
            else:
                link_bytes[cluster.links] += run.link_bytes[self.clusters[first].links]
            group_time[list(cluster.groups)] = run.group_time_s
            n_flows += run.n_flows
            sent += run.bytes_sent
            delivered += run.bytes_delivered
        return CollectiveResult.of(group_time, n_flows, sent, delivered, self._path(answers),
                                   link_bytes)

    def _path(self, answers: dict[int, CollectiveResult]) -> str:
        """The distinct clusters' paths (sorted, ``|`` between different ones), prefixed by
        ``replicated+`` where some cluster's answer was copied."""
        paths = "|".join(sorted({answers[c].path for c in self.distinct()}))
        copied = any(first != c for c, first in enumerate(self.twin))
        return f"{NAME}+{paths}" if copied else paths


def replicate(topology: Topology, groups: list[tuple[int, ...]],
              patterns: dict[int, Pattern]) -> Replication:
    """*groups* (each of size >= 2; *patterns* by group size) split into clusters, each with
    its first identical twin; memoized per topology by the groups and the patterns' pairs."""
    if len(groups) == 1:
        return Replication(tuple(clusters(topology, groups, patterns)[0]), (0,), None)
    memo = _MEMO.setdefault(topology, OrderedDict())
    pairs = tuple((p, *(a.tobytes() for a in local_pairs(pat)))
                  for p, pat in sorted(patterns.items()))
    key = (tuple(groups), pairs)
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    found, routes = clusters(topology, groups, patterns)
    first: dict[tuple, int] = {}
    twin = tuple(first.setdefault(cluster.key, c) for c, cluster in enumerate(found))
    memo[key] = replication = Replication(tuple(found), twin, routes)
    while len(memo) > MEMO_ENTRIES:
        memo.popitem(last=False)
    return replication
