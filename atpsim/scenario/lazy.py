"""A sweep's points expanded lazily: made again at each iteration rather than held in a list
(issue 15: a sweep or a search of 100,000 points stays cheap on the driver). A scenario's
points are :class:`atpsim.scenario.sweep.SweepPoints`; ``atpsim search`` makes its pruned
design space one too (:mod:`atpsim.api.search`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any


class LazyPoints(Collection[Any]):
    """Points made again at each iteration by *generate* (a function returning an iterator of
    points, or of strings: the reason a candidate is left out), so a sweep of 100,000 points
    costs the memory of a few. The first iteration (which ``len()`` runs to its end) makes and
    checks every point, counts the candidates left out by reason (:attr:`pruned`) and notes
    which items to skip, the left-out ones and the points whose key an earlier point has (1
    byte an item); later ones skip those without computing keys or reasons again."""

    def __init__(self, generate: Callable[[], Iterator[Any]]):
        self._generate = generate
        self._skip: bytearray | None = None
        self._count: int | None = None
        self._pruned: dict[str, int] = {}

    @property
    def pruned(self) -> dict[str, int]:
        """Candidates left out, by reason (the first pass runs if it has not)."""
        len(self)
        return dict(self._pruned)

    def __len__(self) -> int:
        if self._count is None:
            for _ in self._first_pass():
                pass
        return self._count or 0

    def __contains__(self, item: object) -> bool:
        return any(point == item for point in self)

    def __iter__(self) -> Iterator[Any]:
        if self._skip is None:
            yield from self._first_pass()
            return
        for skip, point in zip(self._skip, self._generate(), strict=True):
            if not skip:
                yield point

    def _first_pass(self) -> Iterator[Any]:
        seen: set[str] = set()
        skip, pruned = bytearray(), dict[str, int]()
        for item in self._generate():
            if isinstance(item, str):
                pruned[item] = pruned.get(item, 0) + 1
                skip.append(1)
                continue
            key = item.key()
            skip.append(key in seen)
            if key not in seen:
                seen.add(key)
                yield item
        self._skip, self._count, self._pruned = skip, len(seen), pruned
