"""The joint engine's records (:mod:`~atpsim.engine.joint.engine`): a call's cohort shape, an
episode simulated ahead, and the run's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from atpsim.engine.joint.calls import CallPlan
from atpsim.engine.joint.episodes import Answer, Cohort

#: No link (read-only).
NO_LINKS = np.zeros(0, dtype=np.int64)
NO_LINKS.flags.writeable = False


@dataclass(eq=False, slots=True)
class SolvedEpisode:
    """Members (cohorts) simulated together, the tasks each member ends, the links each
    crosses and when each ends (s), when the last ends, and the joint answer (None: one
    member, timed alone)."""

    members: list[Cohort]
    tasks: list[list[tuple[int, np.ndarray]]]
    member_links: list[np.ndarray]
    member_end: list[float]
    answer: Answer | None = None
    t0: float = 0.0
    alive: bool = True
    #: The shape of a lone cohort that met nothing (:meth:`~atpsim.engine.joint.engine._Comm._alone_fast`), else None.
    shape: CallShape | None = None

    @property
    def end_s(self) -> float:
        return max(self.member_end)

    def meets(self, marked: np.ndarray, now: float) -> bool:
        """Whether a member still running *now* crosses a link *marked* (True per link)."""
        return any(end > now and marked[links].any() for links, end in zip(self.member_links, self.member_end,
                                                                          strict=True))  # fmt: skip

    def live_links(self, now: float) -> np.ndarray:
        """The links of the members still running *now* (a newcomer meets only those: the
        others' flows are done)."""
        if len(self.member_links) == 1:  # a call's links are sorted and unique already
            return self.member_links[0] if self.member_end[0] > now else NO_LINKS
        parts = [links for links, end in zip(self.member_links, self.member_end, strict=True) if end > now]
        return np.unique(np.concatenate(parts)) if parts else NO_LINKS


@dataclass
class RunStats:
    """What a joint run did: its calls alone, episodes solved (from the memo, by symmetry),
    flows, rate solves, largest episode and live replays (:attr:`~atpsim.engine.joint.graph.
    GraphTimeline.stats`)."""

    alone: int = 0
    episodes: int = 0
    memo_hits: int = 0
    symmetric: int = 0
    flows: int = 0
    rate_solves: int = 0
    largest: int = 0
    replays: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"calls_alone": self.alone, "episodes_solved": self.episodes,
                "episode_memo_hits": self.memo_hits, "episodes_symmetric": self.symmetric,
                "flows": self.flows, "rate_solves": self.rate_solves,
                "largest_episode": self.largest, "live_replays": self.replays}  # fmt: skip


@dataclass(eq=False)
class CallShape:
    """A call's cohort of given groups: its *plan*, the *links* it crosses (sorted, unique),
    each group's time *alone* (s) and their maximum, and the end (relative) of a task that
    holds every group, per block size (0: not uniform)."""

    plan: CallPlan
    links: np.ndarray
    alone: np.ndarray
    alone_max: float
    _last: dict[int, float] = field(default_factory=dict)
    #: The links it loads alone and their bytes and busy seconds (:meth:`~atpsim.engine.joint.engine._Comm.link_totals`).
    counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: Its number in the compiled clock's table (:class:`~atpsim.engine.joint.lone_kinds.LoneKinds`), None: not there.
    index: int | None = None

    def end(self, start: float) -> float:
        """When the cohort ends, started at *start* (s): its slowest group's time alone after."""
        return start + self.alone_max if len(self.alone) else start

    def episode(self, cohort: Cohort, owned: list[tuple[int, np.ndarray]]) -> SolvedEpisode:
        """The episode of *cohort* (of this shape) alone, with its tasks *owned*."""
        return SolvedEpisode([cohort], [owned], [self.links], [self.end(cohort.start_s)], None, cohort.start_s,
                        shape=self)  # fmt: skip

    def last(self, task: int, uniform: np.ndarray | None, last_of: Callable[[int, np.ndarray], float]) -> float:
        """When task *task*, holding every group, ends (relative): *last_of* (the task and its
        groups' ends: when the last ends) of its groups alone, once per uniform block size
        (*uniform*: the graph's, None where no task is uniform)."""
        block = int(uniform[task]) if uniform is not None else 0
        if block not in self._last:
            self._last[block] = last_of(task, self.alone)
        return self._last[block]
