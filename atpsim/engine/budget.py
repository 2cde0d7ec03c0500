"""What a plain reference run will cost before it starts, and a refusal where it cannot fit.

The ``reference`` engine (:func:`atpsim.engine.pipeline.solve_reference`) materializes every
flow of every group: its schedule, each pair's route and the event loop's per-flow state. The
reductions of ``auto`` never do (a ring of 4096 ranks stays two small arrays), so only the
reference run can be asked for more than the machine holds, e.g. a ring all-reduce on
``torus:64x64`` is 33.5 million flows. Its size is known from the algorithm's pattern alone,
so it is checked before anything is built.

:data:`BYTES_PER_REFERENCE_FLOW` was measured as the difference in peak RSS of two reference
runs (``/usr/bin/time -f %M atpsim collective -t torus:16x16 --engine reference --bytes 1G``
and the same on ``torus:24x24``: 232 MB for 130,560 flows, 419 MB for 662,400 flows, so
about 350 bytes a flow), rounded up to 400 to cover longer routes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from atpsim.collectives.registry import pattern
from atpsim.errors import AtpsimError

#: Peak memory per flow of a plain reference run, bytes (module docstring).
BYTES_PER_REFERENCE_FLOW = 400
#: The environment variable that caps a process's memory (set by the commands; bytes).
MEMORY_ENV = "ATPSIM_MAX_MEMORY"
#: Share of physical memory a run may take when no cap is set.
MEMORY_SHARE = 0.8


def reference_flows(op: str, algorithm: str, groups: Sequence[Sequence[int]], nbytes: float) -> int:
    """How many flows the plain run of *op* by *algorithm* on *groups* simulates."""
    sizes: dict[int, int] = {}
    for group in groups:
        if len(group) > 1:
            sizes[len(group)] = sizes.get(len(group), 0) + 1
    return sum(count * _pattern_flows(op, algorithm, p, nbytes) for p, count in sizes.items())


def _pattern_flows(op: str, algorithm: str, p: int, nbytes: float) -> int:
    return sum(len(template) * uses for template, uses in pattern(op, algorithm, p, nbytes).in_use())


def check_reference_budget(op: str, algorithm: str, groups: Sequence[Sequence[int]],
                           nbytes: float) -> None:
    """Refuse (AtpsimError at ``--engine``, exit 2) a reference run whose flows would need
    more memory than this process may use (:func:`memory_limit_bytes`)."""
    limit = memory_limit_bytes()
    flows = reference_flows(op, algorithm, groups, nbytes)
    need = flows * BYTES_PER_REFERENCE_FLOW
    if limit is not None and need > limit:
        raise AtpsimError(
            f"the plain reference run of {op} by {algorithm.split('@')[0]} is {flows:,} flows, about "
            f"{need / 1e9:.1f} GB, over this process's {limit / 1e9:.1f} GB; use --engine auto "
            f"(the same answer through exact shortcuts) or raise {MEMORY_ENV} (bytes)",
            key="--engine",
        )


def memory_limit_bytes() -> int | None:
    """The memory this process may use: ``ATPSIM_MAX_MEMORY`` when set to a number, else
    :data:`MEMORY_SHARE` of physical memory; None where neither is known."""
    text = os.environ.get(MEMORY_ENV, "")
    try:
        return int(float(text))
    except ValueError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * MEMORY_SHARE)
    except (AttributeError, ValueError, OSError):
        return None
