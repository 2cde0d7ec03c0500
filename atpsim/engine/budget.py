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

from collections.abc import Sequence

from atpsim.collectives.registry import pattern
from atpsim.errors import AtpsimError, machine_memory_bytes, param

#: Peak memory per flow of a plain reference run, bytes (module docstring).
BYTES_PER_REFERENCE_FLOW = 400


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
                           nbytes: float, memory_bytes: int | None = None) -> None:
    """Refuse (AtpsimError about the *engine* parameter, exit 2) a reference run whose flows
    would need more than *memory_bytes* (default :func:`~atpsim.errors.machine_memory_bytes`)."""
    limit = machine_memory_bytes() if memory_bytes is None else memory_bytes
    flows = reference_flows(op, algorithm, groups, nbytes)
    need = flows * BYTES_PER_REFERENCE_FLOW
    if limit is not None and need > limit:
        raise AtpsimError(
            f"the plain reference run of {op} by {algorithm.split('@')[0]} is {flows:,} flows, about "
            f"{need / 1e9:.1f} GB, over this process's {limit / 1e9:.1f} GB; use "
            f"{param('engine', 'auto')} (the same answer through exact shortcuts) or raise "
            f"{param('memory_bytes')} (bytes)",
            param="engine",
        )

