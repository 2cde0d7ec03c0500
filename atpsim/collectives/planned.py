"""A pattern planned for one machine: an algorithm name that carries the data it was planned from.

NCCL's channel rings, its trees and the hierarchical all-reduce depend on where each group's
ranks sit (:mod:`atpsim.collectives.nccl`), so no registry entry can hold them. A
:class:`PlannedPattern` goes straight to the engine wherever an algorithm name is taken: it
*is* its name, a ``str`` such as ``ring@<digest>`` (the digest that of the plan's data), so memo
keys, schedules and messages see that name, and two plans of the same data are one; and
:func:`~atpsim.collectives.registry.pattern` builds its steps from the data it carries, with no
table to register into.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from atpsim.collectives.schedule import Pattern, Steps

#: Builds one group size's pattern from that size's plan and the buffer (bytes per rank).
Build = Callable[[Any, float], Pattern]


class PlannedPattern(str):
    """Algorithm *name* of *op*, planned per group size: *by_size[p]* is the plan of a group of
    ``p`` ranks and ``build(by_size[p], nbytes)`` its pattern. Make one with :meth:`of`."""

    op: str
    by_size: Mapping[int, Any]
    build: Build

    def __new__(cls, name: str, op: str, by_size: Mapping[int, Any], build: Build) -> PlannedPattern:
        planned = super().__new__(cls, name)
        planned.op, planned.by_size, planned.build = op, dict(by_size), build
        return planned

    def __getnewargs__(self) -> tuple[Any, ...]:
        return str(self), self.op, self.by_size, self.build

    @classmethod
    def of(cls, op: str, algorithm: str, by_size: Mapping[int, Any], build: Build) -> PlannedPattern:
        """*algorithm* planned as *by_size*, named ``{algorithm}@{digest}``: the first 12 hex
        digits of the SHA-1 of the sorted plans' ``repr``."""
        digest = hashlib.sha1(repr(sorted(by_size.items())).encode()).hexdigest()[:12]
        return cls(f"{algorithm}@{digest}", op, by_size, build)

    def pattern(self, p: int, nbytes: float) -> Pattern:
        """The steps of a group of *p* ranks (none for a size not planned)."""
        return self.build(self.by_size[p], nbytes) if p in self.by_size else Steps.of(())
