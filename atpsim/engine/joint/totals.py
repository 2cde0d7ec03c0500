"""Per-link totals of a joint run: each final episode's bytes and busy seconds on the links it
loaded, added in episode order.

An episode's counts are sparse (the links it loaded, a few hundred of the fabric's); adding a
dense array per episode was a pass over every link per episode (98 k episodes x 2 x n_links on
the 1024-GPU job). The sum here adds only the non-zero entries, with :func:`numpy.add.at`
(which adds in the order given, so the numbers are the dense sum's to the bit), a batch of
about :data:`_TOTALS_BATCH` entries at a time (bounding the memory the entries take).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from atpsim.engine.solvers.flow_loop import positions

#: Link entries buffered before they are added (bounds :func:`sparse_totals`' memory).
_TOTALS_BATCH = 1 << 18

Counts = tuple[np.ndarray, np.ndarray, np.ndarray]


def sparse_totals(counts: Iterable[Counts], n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and busy seconds per link of *n_links*: each (links, bytes, busy) of *counts*
    added in order."""
    distinct: list[Counts] = []
    where: dict[int, int] = {}  # id of a counts tuple -> its place in distinct (each kept alive there)
    order = []
    for entry in counts:
        j = where.get(id(entry))
        if j is None:
            j = where[id(entry)] = len(distinct)
            distinct.append(entry)
        order.append(j)
    return _ordered_totals(np.array(order, dtype=np.int64), distinct, n_links)


def _ordered_totals(order: np.ndarray, distinct: list[Counts], n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sparse_totals` of the counts ``distinct[j]`` for each *j* of *order*: the
    entries gathered a batch of about :data:`_TOTALS_BATCH` at a time from one copy of each
    distinct counts (the calls alone of one kind share theirs: 72,392 on the 512-H100 job, of
    a few dozen kinds), added in order."""
    totals = np.zeros(n_links), np.zeros(n_links)
    if not len(order):
        return totals
    lens = np.array([len(c[0]) for c in distinct], dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(lens)])
    links, nbytes, busy = (np.concatenate([c[i] for c in distinct]) for i in range(3))
    ends = np.cumsum(lens[order])  # entries up to each counts of order
    first = 0
    while first < len(order):
        done = ends[first - 1] if first else 0
        last = max(int(np.searchsorted(ends, done + _TOTALS_BATCH, side="right")), first + 1)
        at = positions(ptr, order[first:last])
        np.add.at(totals[0], links[at], nbytes[at])
        np.add.at(totals[1], links[at], busy[at])
        first = last
    return totals


def nonzero_counts(link_bytes: np.ndarray, link_busy: np.ndarray) -> Counts:
    """(links, bytes, busy) of the links with bytes or busy time."""
    links = np.flatnonzero((link_bytes != 0) | (link_busy != 0))
    return links, link_bytes[links], link_busy[links]
