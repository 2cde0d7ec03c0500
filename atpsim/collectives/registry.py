"""Collective algorithms registered by (op, name), so scenarios and the CLI can list them.

An algorithm is a function ``(p, nbytes) -> Pattern`` over local ranks; :func:`build_schedule`
places it on every group. *nbytes* is each rank's buffer in nccl-tests' convention: all-reduce,
the buffer reduced; all-gather, the full output; reduce-scatter, the full input; broadcast, the
buffer; all-to-all, the whole send buffer; sendrecv (each rank's buffer to the next of its
group, :mod:`atpsim.collectives.sendrecv`), the buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from atpsim.collectives.all_to_all import pairwise_all_to_all
from atpsim.collectives.broadcast import binomial_broadcast, ring_broadcast
from atpsim.collectives.nvls import NVLS_OPS, nvls_all_reduce
from atpsim.collectives.planned import PlannedPattern
from atpsim.collectives.rabenseifner import (
    rabenseifner_all_gather,
    rabenseifner_all_reduce,
    rabenseifner_reduce_scatter,
)
from atpsim.collectives.reduce import binomial_reduce, ring_reduce
from atpsim.collectives.ring import (
    bidirectional_all_gather,
    bidirectional_all_reduce,
    bidirectional_reduce_scatter,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from atpsim.collectives.schedule import Pattern, Schedule, Steps, map_pattern, merge_steps
from atpsim.collectives.sendrecv import ring_sendrecv
from atpsim.errors import SimulationError, did_you_mean

PatternFn = Callable[[int, float], Pattern]

BIDIRECTIONAL = "bidirectional-ring"

_ALGORITHMS: dict[str, dict[str, PatternFn]] = {
    "all_reduce": {"ring": ring_all_reduce, "rabenseifner": rabenseifner_all_reduce,
                   BIDIRECTIONAL: bidirectional_all_reduce},
    "reduce_scatter": {"ring": ring_reduce_scatter, "rabenseifner": rabenseifner_reduce_scatter,
                       BIDIRECTIONAL: bidirectional_reduce_scatter},
    "all_gather": {"ring": ring_all_gather, "rabenseifner": rabenseifner_all_gather,
                   BIDIRECTIONAL: bidirectional_all_gather},
    "broadcast": {"ring": ring_broadcast, "binomial": binomial_broadcast},
    "reduce": {"ring": ring_reduce, "binomial": binomial_reduce},
    "all_to_all": {"pairwise": pairwise_all_to_all},
    "sendrecv": {"ring": ring_sendrecv},
}
#: Patterns valid by name but not listed: NVLS (all-reduce, reduce-scatter, all-gather), which
#: only NVSwitch machines run (atpsim.collectives.nccl checks). Patterns planned for one machine (NCCL's channel rings,
#: trees) are not named here: they come as :class:`~atpsim.collectives.planned.PlannedPattern`.
_UNLISTED: dict[str, dict[str, PatternFn]] = {op: {"nvls": nvls_all_reduce} for op in NVLS_OPS}
_DEFAULTS = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
             "broadcast": "ring", "reduce": "ring", "all_to_all": "pairwise", "sendrecv": "ring"}


def register_algorithm(op: str, name: str) -> Callable[[PatternFn], PatternFn]:
    """Register *fn* as algorithm *name* of collective *op*."""

    def decorate(fn: PatternFn) -> PatternFn:
        _ALGORITHMS.setdefault(op, {})[name] = fn
        pattern.cache_clear()
        return fn

    return decorate


def op_names() -> list[str]:
    """Collective operations, in a fixed order."""
    return list(_ALGORITHMS)


def algorithm_names(op: str | None = None) -> list[str]:
    """Algorithm names valid for *op*, or for any op when *op* is None (sorted)."""
    if op is None:
        return sorted({name for table in _ALGORITHMS.values() for name in table})
    _table(op)
    return sorted(_ALGORITHMS[op])


def default_algorithm(op: str) -> str:
    """The algorithm used when none is named (ring, or pairwise for all-to-all)."""
    _table(op)
    return _DEFAULTS.get(op, algorithm_names(op)[0])


def _table(op: str) -> dict[str, PatternFn]:
    if op not in _ALGORITHMS:
        raise SimulationError(f"unknown collective {op!r}{did_you_mean(op, _ALGORITHMS)}")
    return {**_ALGORITHMS[op], **_UNLISTED.get(op, {})}


def check_algorithm(op: str, algorithm: str) -> None:
    """Raise a :class:`SimulationError` naming the valid choices when *algorithm* is unknown
    (a :class:`~atpsim.collectives.planned.PlannedPattern` is known for the op it was planned
    for)."""
    table = _table(op)
    planned = isinstance(algorithm, PlannedPattern) and algorithm.op == op
    if not planned and algorithm not in table:
        raise SimulationError(
            f"unknown algorithm {algorithm!r} for {op}{did_you_mean(algorithm, _ALGORITHMS[op])}"
        )


@lru_cache(maxsize=256)
def pattern(op: str, algorithm: str, p: int, nbytes: float) -> Pattern:
    """The steps of *algorithm* (a registry name or a planned pattern) for one group of *p*
    ranks (local ranks; cached)."""
    check_algorithm(op, algorithm)
    if isinstance(algorithm, PlannedPattern):
        return algorithm.pattern(p, float(nbytes))
    return _table(op)[algorithm](p, float(nbytes))


def check_groups(groups: Sequence[Sequence[int]], n_gpus: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Groups as tuples; each non-empty, no rank twice across groups, ranks in range."""
    out = tuple(tuple(int(r) for r in g) for g in groups)
    seen: set[int] = set()
    for i, group in enumerate(out):
        if not group:
            raise SimulationError("a group must hold at least one rank", key=f"groups[{i}]")
        for rank in group:
            if rank in seen:
                raise SimulationError(
                    f"rank {rank} appears twice; groups must be disjoint", key=f"groups[{i}]"
                )
            if rank < 0 or (n_gpus is not None and rank >= n_gpus):
                raise SimulationError(
                    f"rank {rank} out of range 0..{(n_gpus or 1) - 1}", key=f"groups[{i}]"
                )
            seen.add(rank)
    return out


def build_schedule(op: str, algorithm: str, groups: Sequence[Sequence[int]], nbytes: float) -> Schedule:
    """The schedule of *op* by *algorithm* on every group at once (groups run concurrently)."""
    if not nbytes >= 0:
        raise SimulationError(f"expected a buffer size >= 0 bytes, got {nbytes!r}")
    check_algorithm(op, algorithm)
    checked = check_groups(groups)
    by_size: dict[int, list[int]] = {}
    for i, group in enumerate(checked):
        by_size.setdefault(len(group), []).append(i)
    parts = []
    for p, ids in sorted(by_size.items()):
        rows = np.array([checked[i] for i in ids], dtype=np.int64).reshape(len(ids), p)
        steps = map_pattern(pattern(op, algorithm, p, float(nbytes)), rows, np.array(ids, dtype=np.int64))
        if steps:
            parts.append(steps)
    steps_merged = merge_steps(parts) if parts else Steps.of(())
    return Schedule(op, algorithm, checked, float(nbytes), steps_merged)
