"""A collective as data: steps of plain transfer records (src, dst, bytes), no simulation inside.

An algorithm is planned once per group size as a *pattern*: :class:`Steps` over local ranks
``0..p-1`` (position in the group), which declare the distinct template steps and the order they
run in (a ring: one template, ``2(p - 1)`` times). :func:`map_pattern` places the pattern on the
GPU ranks of every group, and the result is a :class:`Schedule` whose step ``k`` holds the
transfers of step ``k`` of every group, with the pattern's templates kept.

Dependencies (one rule for every algorithm, a rendezvous): a transfer of step ``k`` from ``s``
to ``d`` may start once both ``s`` and ``d`` have finished every transfer of earlier steps they
take part in. For the ring this is the brief's "own step k-1 send and receive" plus the
receiver's previous step (MPI's large-message rendezvous, NCCL's buffer credits); with uniform
steps it changes nothing, and it makes the fold of non-power-of-two Rabenseifner free of
overlap. :meth:`Schedule.dependencies` spells the rule out as a per-transfer CSR.
Reductions' compute cost is ignored: a transfer is done when its bytes have arrived.

*Lanes*: an algorithm made of independent sub-collectives running side by side (the two
directions of the bidirectional ring) puts each in its own lane; the rule above then reads
"every transfer of earlier steps *of the same lane* they take part in", so one lane never
waits for another (each lane is its own schedule, as a separate NCCL channel is).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import overload

import numpy as np


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Step:
    """Transfers that belong to one step: ``src[i] -> dst[i]`` carries ``nbytes[i]`` bytes.

    *group* is the index of each transfer's group in the schedule (0 in a pattern); *lane*
    the independent sub-schedule each transfer belongs to (module docstring; 0 by default).
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lane: np.ndarray | None = None

    @property
    def lanes(self) -> np.ndarray:
        """The lane of each transfer (zeros when the step has a single lane)."""
        return np.zeros(len(self.src), dtype=np.int64) if self.lane is None else self.lane

    def __len__(self) -> int:
        return len(self.src)


def step(src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
         nbytes: float | Sequence[float] | np.ndarray,
         lane: int | Sequence[int] | np.ndarray | None = None) -> Step:
    """A pattern step over local ranks; *nbytes* (and *lane*) may be one value for all."""
    src_a = np.asarray(src, dtype=np.int64)
    dst_a = np.asarray(dst, dtype=np.int64)
    size = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src_a.shape).copy()
    zeros = np.zeros(len(src_a), dtype=np.int64)
    lanes = None
    if lane is not None:
        lanes = _frozen(np.broadcast_to(np.asarray(lane, dtype=np.int64), src_a.shape).copy())
    return Step(_frozen(src_a), _frozen(dst_a.copy()), _frozen(size), _frozen(zeros), lanes)


@dataclass(frozen=True, eq=False)
class Steps(Sequence[Step]):
    """The steps of a collective as its algorithm declares them: distinct *templates* and the
    *order* they run in (step ``k`` is ``templates[order[k]]``).

    A ring declares one template run ``2(p - 1)`` times (:func:`repeat`), so a ring of 4096
    ranks is two small arrays, not 8190 steps, and the engine knows from the declaration, not
    from array identity, that every step is alike (its periodic extension). Steps built with
    :meth:`of` are declared apart, even where they happen to be equal: they are simulated step
    by step, which is exact too.
    """

    templates: tuple[Step, ...]
    order: tuple[int, ...]

    @classmethod
    def of(cls, steps: Iterable[Step]) -> Steps:
        """Each of *steps* its own template."""
        listed = tuple(steps)
        return cls(listed, tuple(range(len(listed))))

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[Step]:
        return (self.templates[i] for i in self.order)

    @overload
    def __getitem__(self, k: int) -> Step: ...

    @overload
    def __getitem__(self, k: slice) -> Steps: ...

    def __getitem__(self, k: int | slice) -> Step | Steps:
        if isinstance(k, slice):
            return Steps(self.templates, self.order[k])
        return self.templates[self.order[k]]

    @property
    def repeated(self) -> bool:
        """True when the steps are declared as one template run two times or more."""
        return len(self.order) >= 2 and all(i == self.order[0] for i in self.order)

    def in_use(self) -> list[tuple[Step, int]]:
        """Each template that runs, in order of first use, with how many steps run it."""
        counts = Counter(self.order)
        return [(self.templates[i], counts[i]) for i in dict.fromkeys(self.order)]

    def map(self, fn: Callable[[Step], Step]) -> Steps:
        """*fn* applied to every template once; the order (and so the declaration) is kept."""
        return Steps(tuple(fn(t) for t in self.templates), self.order)


def repeat(template: Step, n_steps: int) -> Steps:
    """*template* run *n_steps* times, declared as such."""
    return Steps((template,), (0,) * n_steps)


#: An algorithm's steps for one group, over local ranks ``0..p-1``.
Pattern = Steps


@dataclass(frozen=True, eq=False)
class Schedule:
    """Every transfer of a collective on a set of groups, step by step (GPU ranks).

    Steps of different groups with the same index are merged; groups run concurrently.
    *steps* keeps the algorithm's templates (:class:`Steps`), so a schedule of millions of
    transfers stays small until :attr:`src` etc. flatten it.
    """

    op: str
    algorithm: str
    groups: tuple[tuple[int, ...], ...]
    nbytes: float
    steps: Steps

    @property
    def n_transfers(self) -> int:
        return sum(len(s) for s in self.steps)

    @property
    def bytes_total(self) -> float:
        """Bytes offered by all transfers together."""
        return float(sum(s.nbytes.sum() for s in self.steps))

    @cached_property
    def src(self) -> np.ndarray:
        return self._flat("src", np.int64)

    @cached_property
    def dst(self) -> np.ndarray:
        return self._flat("dst", np.int64)

    @cached_property
    def transfer_bytes(self) -> np.ndarray:
        return self._flat("nbytes", np.float64)

    @cached_property
    def lane(self) -> np.ndarray:
        """The lane of each transfer in flat order."""
        parts = [s.lanes for s in self.steps]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    @cached_property
    def step_index(self) -> np.ndarray:
        """The step of each transfer in flat order."""
        sizes = [len(s) for s in self.steps]
        return np.repeat(np.arange(len(self.steps), dtype=np.int64), sizes)

    def _flat(self, name: str, dtype: type) -> np.ndarray:
        parts = [getattr(s, name) for s in self.steps]
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

    def dependencies(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(indptr, indices)``: transfer ``i`` waits for ``indices[indptr[i]:indptr[i+1]]``.

        The rendezvous rule of the module docstring: for each end ``r`` of transfer ``i`` in
        step ``k``, the transfers of the latest step before ``k`` in which ``r`` took part.
        A transfer that shares both ends' previous step lists it twice (harmless for counting).
        With lanes, "rank" reads "(rank, lane)".
        """
        return rendezvous_dependencies(self.src, self.dst, self.step_index, self.lane)


def rendezvous_dependencies(
    src: np.ndarray, dst: np.ndarray, step_index: np.ndarray, lane: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the rendezvous rule for flat transfers (see :meth:`Schedule.dependencies`);
    *lane* (optional) keeps each lane's ranks apart."""
    n = len(src)
    flows = np.concatenate([np.arange(n), np.arange(n)])
    ranks = np.concatenate([src, dst])
    if lane is not None and len(lane) and lane.any():
        span = int(ranks.max()) + 1
        ranks = ranks + span * np.concatenate([lane, lane])
    steps = np.concatenate([step_index, step_index])
    order = np.lexsort((flows, steps, ranks))
    ranks, steps, flows = ranks[order], steps[order], flows[order]
    # blocks of equal (rank, step); each block's predecessor is the previous block of the rank
    new_block = np.ones(len(ranks), dtype=bool)
    new_block[1:] = (ranks[1:] != ranks[:-1]) | (steps[1:] != steps[:-1])
    starts = np.flatnonzero(new_block)
    ends = np.append(starts[1:], len(ranks))
    block_of = np.cumsum(new_block) - 1
    prev = np.arange(len(starts)) - 1
    first_of_rank = np.ones(len(starts), dtype=bool)
    first_of_rank[1:] = ranks[starts[1:]] != ranks[starts[:-1]]
    prev[first_of_rank] = -1
    entry_prev = prev[block_of]
    lo = np.where(entry_prev >= 0, starts[entry_prev], 0)
    hi = np.where(entry_prev >= 0, ends[entry_prev], 0)
    counts = hi - lo
    per_flow = np.bincount(flows, weights=counts, minlength=n).astype(np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_flow, out=indptr[1:])
    by_flow = np.argsort(flows, kind="stable")
    lo, counts = lo[by_flow], counts[by_flow]
    total = int(counts.sum())
    offsets = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    indices = flows[np.arange(total) + offsets] if total else np.zeros(0, dtype=np.int64)
    return indptr, indices


def map_pattern(pattern: Pattern, groups: np.ndarray, group_ids: np.ndarray | None = None) -> Steps:
    """Place *pattern* (local ranks) on every row of *groups* (an ``(n_groups, p)`` array).

    Each template is placed once, so the schedule declares the pattern's repeats.
    """
    n_groups = groups.shape[0]
    ids = np.arange(n_groups, dtype=np.int64) if group_ids is None else group_ids
    group_of: dict[int, np.ndarray] = {}

    def place(s: Step) -> Step:
        if len(s) not in group_of:
            group_of[len(s)] = _frozen(np.repeat(ids, len(s)))
        return Step(_frozen(groups[:, s.src].reshape(-1)), _frozen(groups[:, s.dst].reshape(-1)),
                    _frozen(np.tile(s.nbytes, n_groups)), group_of[len(s)],
                    None if s.lane is None else _frozen(np.tile(s.lane, n_groups)))

    return pattern.map(place)


def merge_steps(parts: list[Steps]) -> Steps:
    """Merge the steps of groups of different sizes: step ``k`` of each, concatenated. The
    merged steps are declared apart (one template each)."""
    if len(parts) == 1:
        return parts[0]
    merged = []
    for k in range(max(len(p) for p in parts)):
        here = [p[k] for p in parts if k < len(p)]
        laned = any(s.lane is not None for s in here)
        merged.append(
            Step(
                _frozen(np.concatenate([s.src for s in here])),
                _frozen(np.concatenate([s.dst for s in here])),
                _frozen(np.concatenate([s.nbytes for s in here])),
                _frozen(np.concatenate([s.group for s in here])),
                _frozen(np.concatenate([s.lanes for s in here])) if laned else None,
            )
        )
    return Steps.of(merged)
