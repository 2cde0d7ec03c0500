"""The replication reduction: groups that share no link never interact, so split a call into
clusters of link-sharing groups, time each distinct cluster once and copy its answer to the
clusters that are the same problem up to renaming (identical, link-disjoint groups).

The collective level's side of :mod:`atpsim.engine.reductions.components`: the items are
groups, a group's walk is its pairs' routes in the pattern's order. Two clusters are
identical when their groups have the same sizes and, numbering links by first use along that
walk, they give the same route sequence over links of the same bandwidth and latency. Then
one simulation serves both: the time of each group carries over and the bytes of link ``k``
of one land on link ``k`` of the other.

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
from atpsim.engine.reductions.components import Components, split
from atpsim.engine.result import CollectiveResult
from atpsim.engine.routes import PairRoutes, route_pairs
from atpsim.topology.graph import Topology

NAME = "replicated"
#: Cluster splits (with the routes of every pair) kept per topology.
MEMO_ENTRIES = 16

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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


def clusters(topology: Topology, groups: list[tuple[int, ...]], patterns: dict[int, Pattern]
             ) -> tuple[Components, PairRoutes | None]:
    """Split *groups* (each of size >= 2) into link-sharing clusters, each with its first
    identical twin (module docstring); also the routes of every pair of every group (None for
    one group: one cluster over every link, nothing to compare or copy, so nothing is routed
    here; the solver routes its pairs)."""
    if len(groups) == 1:
        return Components((np.zeros(1, dtype=np.int64),), (np.arange(len(topology.links)),), (0,)), None
    pairs = {p: local_pairs(pat) for p, pat in patterns.items()}
    keys, owner = _occurrences(groups, pairs, topology.n_gpus)
    distinct, pair_of = np.unique(keys, return_inverse=True)
    table = route_pairs(topology, distinct)
    pair_of = pair_of.reshape(-1)
    hop_owner, hop_link = table.flow_links(pair_of)
    parts = split(len(groups), owner[hop_owner], hop_link, len(topology.links))
    label = parts.label[owner]
    order = np.lexsort((np.arange(len(owner)), owner, label))  # cluster, group, pattern
    lens = table.route_len[pair_of[order]]
    occ_bounds = np.searchsorted(label[order], np.arange(parts.n + 1))
    bandwidth, latency = topology.links.bandwidth_Bps, topology.links.latency_s
    found = []
    for c in range(parts.n):
        links = parts.links(c)
        found.append((
            tuple(len(groups[i]) for i in parts.members(c)),
            lens[occ_bounds[c]:occ_bounds[c + 1]].tobytes(),
            parts.numbers(c).tobytes(),
            bandwidth[links].tobytes(),
            latency[links].tobytes(),
        ))
    return parts.twins(found), table


@dataclass(frozen=True)
class Replication:
    """A call's groups split into *clusters* (:class:`~atpsim.engine.reductions.components.
    Components`: each one's groups, links and first twin); *routes* routes every pair of every
    group (None for a single group)."""

    clusters: Components
    routes: PairRoutes | None

    def distinct(self) -> list[int]:
        """The clusters to time: the first of each kind."""
        return self.clusters.distinct()

    def groups(self, c: int) -> list[int]:
        """The group indices of cluster *c*."""
        return self.clusters.members[c].tolist()

    def expand(self, answers: dict[int, CollectiveResult], n_groups: int,
               n_links: int) -> CollectiveResult:
        """The call's answer from each distinct cluster's (*answers*, by cluster index): group
        times copied to the twins, link bytes moved onto their links, flows and bytes added."""
        (group_time,), (link_bytes,) = self.clusters.spread(
            {c: (np.asarray(run.group_time_s),) for c, run in answers.items()},
            {c: (run.link_bytes,) for c, run in answers.items()}, n_groups, n_links)
        n_flows, sent, delivered = 0, 0.0, 0.0
        for first in self.clusters.twin:
            run = answers[first]
            n_flows += run.n_flows
            sent += run.bytes_sent
            delivered += run.bytes_delivered
        return CollectiveResult.of(group_time, n_flows, sent, delivered, self._path(answers),
                                   link_bytes)

    def _path(self, answers: dict[int, CollectiveResult]) -> str:
        """The distinct clusters' paths (sorted, ``|`` between different ones), prefixed by
        ``replicated+`` where some cluster's answer was copied."""
        paths = "|".join(sorted({answers[c].path for c in self.distinct()}))
        return f"{NAME}+{paths}" if self.clusters.copied else paths


def replicate(topology: Topology, groups: list[tuple[int, ...]],
              patterns: dict[int, Pattern]) -> Replication:
    """*groups* (each of size >= 2; *patterns* by group size) split into clusters, each with
    its first identical twin; memoized per topology by the groups and the patterns' pairs."""
    if len(groups) == 1:
        return Replication(*clusters(topology, groups, patterns))
    memo = _MEMO.setdefault(topology, OrderedDict())
    pairs = tuple((p, *(a.tobytes() for a in local_pairs(pat)))
                  for p, pat in sorted(patterns.items()))
    key = (tuple(groups), pairs)
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    memo[key] = replication = Replication(*clusters(topology, groups, patterns))
    while len(memo) > MEMO_ENTRIES:
        memo.popitem(last=False)
    return replication
