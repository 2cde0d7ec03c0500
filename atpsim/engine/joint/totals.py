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

#: Link entries buffered before they are added (bounds :func:`sparse_totals`' memory).
_TOTALS_BATCH = 1 << 18

Counts = tuple[np.ndarray, np.ndarray, np.ndarray]


def sparse_totals(counts: Iterable[Counts], n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and busy seconds per link of *n_links*: each (links, bytes, busy) of *counts*
    added in order."""
    totals = np.zeros(n_links), np.zeros(n_links)
    batch: list[Counts] = []
    size = 0
    for entry in counts:
        batch.append(entry)
        size += len(entry[0])
        if size >= _TOTALS_BATCH:
            _add_in_order(totals, batch)
            batch, size = [], 0
    _add_in_order(totals, batch)
    return totals


def nonzero_counts(link_bytes: np.ndarray, link_busy: np.ndarray) -> Counts:
    """(links, bytes, busy) of the links with bytes or busy time."""
    links = np.flatnonzero((link_bytes != 0) | (link_busy != 0))
    return links, link_bytes[links], link_busy[links]


def _add_in_order(totals: tuple[np.ndarray, np.ndarray], batch: list[Counts]) -> None:
    """Add each (links, bytes, busy) of *batch* to *totals* (bytes, busy), in batch order."""
    if batch:
        links = np.concatenate([b[0] for b in batch])
        np.add.at(totals[0], links, np.concatenate([b[1] for b in batch]))
        np.add.at(totals[1], links, np.concatenate([b[2] for b in batch]))
