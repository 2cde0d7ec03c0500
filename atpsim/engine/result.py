"""The one answer of a collective run, whatever path produced it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from atpsim.collectives.closed_form import bus_factor

#: The path of a call with nothing to move (zero bytes, or every group a single rank).
NOTHING = "none"


@dataclass(frozen=True)
class CollectiveResult:
    """What a collective cost. Times in seconds; all groups start at t = 0.

    *group_time_s[i]* is when group ``i`` finished, *time_s* the last of them; *n_flows* the
    transfers of the schedule, *bytes_sent* the bytes they offer and *bytes_delivered* the bytes
    the engine moved; *link_bytes[l]* the bytes that crossed directed link ``l`` of the
    topology. *path* names the reductions and the solver that produced the answer
    (:mod:`atpsim.engine`), e.g. ``replicated+symmetry+longest-path`` or ``reference``.
    """

    time_s: float
    group_time_s: tuple[float, ...]
    n_flows: int
    bytes_sent: float
    bytes_delivered: float
    path: str
    link_bytes: np.ndarray = field(compare=False, repr=False)

    @classmethod
    def of(cls, group_time_s: np.ndarray, n_flows: int, bytes_sent: float,
           bytes_delivered: float, path: str, link_bytes: np.ndarray) -> CollectiveResult:
        """A result whose *time_s* is the last group's finish."""
        return cls(float(group_time_s.max()), tuple(group_time_s.tolist()), n_flows, bytes_sent,
                   bytes_delivered, path, link_bytes)

    @classmethod
    def nothing(cls, n_groups: int, n_links: int) -> CollectiveResult:
        """The answer of a call with nothing to move: every group done at t = 0."""
        return cls(0.0, (0.0,) * n_groups, 0, 0.0, 0.0, NOTHING, np.zeros(n_links))

    def algbw_Bps(self, nbytes: float) -> float:
        """nccl-tests' algorithm bandwidth: buffer bytes / time."""
        return nbytes / self.time_s if self.time_s > 0 else float("inf")

    def busbw_Bps(self, op: str, p: int, nbytes: float) -> float:
        """nccl-tests' bus bandwidth: algbw times the op's factor (2(p-1)/p for all-reduce)."""
        return self.algbw_Bps(nbytes) * bus_factor(op, p)
