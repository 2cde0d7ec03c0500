"""Groups that share no link never interact: split a call into clusters of link-sharing groups,
and spot clusters that are the same problem up to renaming (identical, link-disjoint groups).

Two clusters are identical when their groups have the same sizes and, walking each group's
pairs in the pattern's order and numbering links by first appearance, they give the same route
sequence over links of the same bandwidth and latency. Then one simulation serves both: the
time of each group carries over and the bytes of link ``k`` of one land on link ``k`` of the
other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Pattern
from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class Cluster:
    """Group indices of one cluster, its canonical link order, and its identity key."""

    groups: tuple[int, ...]
    links: np.ndarray
    key: tuple


def local_pairs(pattern: Pattern) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (src, dst) local pairs of *pattern*, sorted."""
    seen: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for s in pattern:
        seen.setdefault((id(s.src), id(s.dst)), (s.src, s.dst))
    if not seen:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    p = 1 + max(int(max(a.max(), b.max())) for a, b in seen.values())
    keys = np.unique(np.concatenate([a * p + b for a, b in seen.values()]))
    return keys // p, keys % p


def _group_routes(topology: Topology, group: tuple[int, ...], pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    routes = [topology.route(group[a], group[b]) for a, b in zip(pairs[0].tolist(), pairs[1].tolist(), strict=True)]
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    links = np.fromiter((x for r in routes for x in r), dtype=np.int64, count=int(lens.sum()))
    return lens, links


def _components(group_links: list[np.ndarray], n_links: int) -> list[list[int]]:
    """Connected components of groups joined by shared links (label propagation)."""
    n = len(group_links)
    owner = np.repeat(np.arange(n), [len(x) for x in group_links])
    links = np.concatenate(group_links) if n else np.zeros(0, np.int64)
    label = np.arange(n)
    while True:
        per_link = np.full(n_links, n, dtype=np.int64)
        np.minimum.at(per_link, links, label[owner])
        new = label.copy()
        np.minimum.at(new, owner, per_link[links])
        new = new[new]
        if np.array_equal(new, label):
            break
        label = new
    out: dict[int, list[int]] = {}
    for i, lab in enumerate(label.tolist()):
        out.setdefault(lab, []).append(i)
    return list(out.values())


def clusters(topology: Topology, groups: list[tuple[int, ...]], patterns: dict[int, Pattern]) -> list[Cluster]:
    """Split *groups* (each of size >= 2) into link-sharing clusters with identity keys."""
    pairs = {p: local_pairs(pat) for p, pat in patterns.items()}
    routed = [_group_routes(topology, g, pairs[len(g)]) for g in groups]
    table = topology.links
    result = []
    for members in _components([links for _, links in routed], len(table)):
        lens = np.concatenate([routed[i][0] for i in members])
        links = np.concatenate([routed[i][1] for i in members])
        uniq, first, inverse = np.unique(links, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[order] = np.arange(len(uniq))
        canonical = uniq[order]
        key = (
            tuple(len(groups[i]) for i in members),
            lens.tobytes(),
            rank[inverse].tobytes(),
            table.bandwidth_Bps[canonical].tobytes(),
            table.latency_s[canonical].tobytes(),
        )
        result.append(Cluster(tuple(members), canonical, key))
    return result
