"""What a solver is given and what it gives back, at every stage of the engine's pipeline.

A :class:`Problem` is the flows of a schedule's steps (with the templates the schedule declares)
over the routes of their pairs, the topology's directed links, and the rank ids the
rendezvous rule is kept over: the GPU ranks themselves, or, in a symmetry quotient, one id per
orbit position. A :class:`Solution` is each rank id's finish time, the bytes every link carried
and the bytes delivered in all, with the *path* that produced it: the reductions that shrank the
problem and the solver that timed it (``symmetry+longest-path``, ``periodic+event``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from atpsim.collectives.schedule import Steps
from atpsim.engine.routes import PairRoutes
from atpsim.topology.graph import LinkTable

RankMap = Callable[[np.ndarray], np.ndarray]


def same_rank(ranks: np.ndarray) -> np.ndarray:
    """The identity rank map: each GPU rank is its own id."""
    return ranks


@dataclass(frozen=True)
class Problem:
    """Flows of *steps* over *routes*, on the topology's directed *links* (bandwidth in
    bytes/s, latency in s). Transfers rendezvous over ``rank_of(rank)``, ids
    ``0 .. n_ids - 1``."""

    steps: Steps
    routes: PairRoutes
    links: LinkTable
    rank_of: RankMap
    n_ids: int

    @classmethod
    def of(cls, steps: Steps, routes: PairRoutes, links: LinkTable) -> Problem:
        """A problem over GPU ranks (every rank its own id)."""
        return cls(steps, routes, links, same_rank, routes.n_gpus)

    @property
    def n_links(self) -> int:
        return len(self.links)

    def prefix(self, n_steps: int) -> Problem:
        """The same problem cut after its first *n_steps* steps."""
        return replace(self, steps=self.steps[:n_steps])


@dataclass(frozen=True)
class Solution:
    """*done_s[i]*: when rank id ``i`` finished its last transfer (s); *link_bytes[l]*: bytes
    that crossed directed link ``l``; *delivered_bytes*: bytes moved in all; *path*: how."""

    done_s: np.ndarray
    link_bytes: np.ndarray
    delivered_bytes: float
    path: str

    def relabel(self, reduction: str) -> Solution:
        """The same answer, its path prefixed by the *reduction* that expanded it."""
        return replace(self, path=f"{reduction}+{self.path}")
