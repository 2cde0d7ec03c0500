"""Link-disjoint components: split a problem into parts that share no link, simulate one part
of each kind and copy its answer to the parts that are the same problem up to renaming.

Max-min rates decompose over the connected components of the graph whose edges join each
item (a collective's group, a joint flow) to the links it crosses and to the items it waits
for: items of two components never share a link and never wait for each other, so each
component runs as it would alone. Walk a component's items in order and each item's links
(its hops) in order, and number the links by first use: two components whose walks give the
same numbers, over links alike, with items alike (what "alike" means is each level's key)
are the same problem up to that renaming, so they have the same answer: item ``i`` of one
behaves as item ``i`` of the other, and link ``k`` of one carries what link ``k`` of the
other carries.

Both levels go through here: the collective level (:mod:`~atpsim.engine.reductions.replicate`:
clusters of groups) and the joint network (:mod:`~atpsim.engine.joint.components`: parts of a
flow set). :func:`split` finds the components and numbers their links; the level builds one
key per component from the :class:`Split` and gets the :class:`Components` (each one's first
twin) from :meth:`Split.twins`; it simulates :meth:`Components.distinct` and
:meth:`Components.spread` copies the answers back.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Components:
    """Items split into link-disjoint components (numbered by their smallest item):
    *members[c]* the items of component ``c`` (ascending), *links[c]* its links in order of
    first use (the renaming under which twins are equal), *twin[c]* the first component with
    the same key (``c`` itself for those to simulate)."""

    members: tuple[np.ndarray, ...]
    links: tuple[np.ndarray, ...]
    twin: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.twin)

    def distinct(self) -> list[int]:
        """The components to simulate: the first of each kind."""
        return [c for c, first in enumerate(self.twin) if first == c]

    @property
    def copied(self) -> bool:
        """Whether some component's answer is a copy of another's."""
        return any(first != c for c, first in enumerate(self.twin))

    def spread(self, per_item: Mapping[int, Sequence[np.ndarray]],
               per_link: Mapping[int, Sequence[np.ndarray]], n_items: int, n_links: int
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The whole problem's arrays from the distinct components' answers (by component):
        *per_item[c]* arrays over ``members[c]`` (in their order), *per_link[c]* arrays over
        every link; each component takes its twin's item values in place and its twin's
        link values on its own links (NaN for items and zero for links no component has)."""
        first = self.distinct()[0]
        items = [np.full(n_items, np.nan) for _ in per_item[first]]
        links = [np.zeros(n_links) for _ in per_link[first]]
        for c, t in enumerate(self.twin):
            for out, value in zip(items, per_item[t], strict=True):
                out[self.members[c]] = value
            for out, value in zip(links, per_link[t], strict=True):
                out[self.links[c]] = value[self.links[t]]
        return items, links


@dataclass(frozen=True)
class Split:
    """Components of *n* items before their keys: *label* (each item's component), the
    items sorted by component (*items*, bounds *item_bounds*), the hops sorted by
    (component, item, given order) (*hops*, bounds *hop_bounds*) with each one's link
    number of first use in its component (*number*), and each component's links in that
    order (*link_order*, bounds *link_bounds*)."""

    n: int
    label: np.ndarray
    items: np.ndarray
    item_bounds: np.ndarray
    hops: np.ndarray
    hop_bounds: np.ndarray
    number: np.ndarray
    link_order: np.ndarray
    link_bounds: np.ndarray

    def members(self, c: int) -> np.ndarray:
        """The items of component *c*, ascending."""
        return self.items[self.item_bounds[c]:self.item_bounds[c + 1]]

    def links(self, c: int) -> np.ndarray:
        """The links of component *c* in order of first use."""
        return self.link_order[self.link_bounds[c]:self.link_bounds[c + 1]]

    def numbers(self, c: int) -> np.ndarray:
        """The link number of each hop of component *c*, in walk order."""
        return self.number[self.hop_bounds[c]:self.hop_bounds[c + 1]]

    def twins(self, keys: Sequence[Hashable]) -> Components:
        """The components, each with its first twin: the first with an equal key."""
        first: dict[Hashable, int] = {}
        twin = tuple(first.setdefault(key, c) for c, key in enumerate(keys))
        return Components(tuple(self.members(c) for c in range(self.n)),
                          tuple(self.links(c) for c in range(self.n)), twin)


def split(n_items: int, hop_item: np.ndarray, hop_link: np.ndarray, n_links: int,
          edges: tuple[np.ndarray, np.ndarray] | None = None) -> Split:
    """The components of *n_items* items whose hops cross links (hop ``h``: item
    ``hop_item[h]`` crosses link ``hop_link[h]``; each item's hops in its walk order), also
    joined by *edges* ``(a, b)`` (item ``a[i]`` waits for item ``b[i]``)."""
    label = _labels(n_items, hop_item, hop_link, n_links, edges)
    n = int(label.max()) + 1 if n_items else 0
    items = np.argsort(label, kind="stable")
    hops = np.lexsort((hop_item, label[hop_item]))
    component = label[hop_item][hops]
    number, link_order, link_bounds = _first_use(component, hop_link[hops], n_links, n)
    return Split(n, label, items, _bounds(label[items], n), hops, _bounds(component, n), number,
                 link_order, link_bounds)


def _labels(n: int, owner: np.ndarray, links: np.ndarray, n_links: int,
            edges: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Each item's component, numbered ``0, 1, ...`` in order of its smallest item: label
    propagation over the incidence (item ``owner[i]`` crosses ``links[i]``) and *edges*, each
    label then replaced by its label's (pointer jumping), until nothing moves."""
    a, b = edges if edges is not None else (_EMPTY, _EMPTY)
    label = np.arange(n)
    while True:
        per_link = np.full(n_links, n, dtype=np.int64)
        np.minimum.at(per_link, links, label[owner])
        new = label.copy()
        np.minimum.at(new, owner, per_link[links])
        np.minimum.at(new, a, label[b])
        np.minimum.at(new, b, label[a])
        new = new[new]
        if np.array_equal(new, label):
            return np.unique(label, return_inverse=True)[1].reshape(-1)
        label = new


def _first_use(component: np.ndarray, links: np.ndarray, n_links: int, n: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Number each component's links by first appearance in the hop order (*component*
    sorted): the number of each hop, and per component its links in that order with their
    bounds."""
    key = component * n_links + links
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    owner = unique // n_links
    order = np.lexsort((first, owner))
    starts = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    begin = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(unique), dtype=np.int64)
    rank[order] = np.arange(len(order)) - begin
    return rank[inverse.reshape(-1)], unique[order] % n_links, _bounds(owner[order], n)


def _bounds(sorted_ids: np.ndarray, n: int) -> np.ndarray:
    """Where each of the ids ``0 .. n-1`` begins in *sorted_ids*, and its end."""
    return np.searchsorted(sorted_ids, np.arange(n + 1))
