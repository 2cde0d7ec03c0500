"""What a sweep will cost before it runs: a rough time per point from its GPU count and mode.

The constants are fitted by eye to timings of the committed scenarios on one core (quickstart,
fig12, scaling; 8 to 4096 GPUs): a ``des`` point takes about 20 ms plus 0.4 ms per GPU and
chunk, an ``analytic`` one about 10 ms plus 0.05 ms per GPU. The estimate is for warnings
("about 4 hours"), not for scheduling; it is within a factor of a few.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from atpsim.errors import param

DES_BASE_S = 0.02
DES_PER_GPU_CHUNK_S = 4e-4
ANALYTIC_BASE_S = 0.01
ANALYTIC_PER_GPU_S = 5e-5
#: A sweep estimated to take longer than this (seconds, at its -j) is announced with a warning.
WARN_AFTER_S = 180.0


def point_seconds(point: Any) -> float:
    """Rough seconds to simulate one sweep *point* (a SweepPoint) on one core."""
    n = int(getattr(point, "n_devices", 1) or 1)
    if getattr(point, "mode", "des") == "analytic":
        return ANALYTIC_BASE_S + ANALYTIC_PER_GPU_S * n
    chunks = int(getattr(point, "chunks", 1) or 1)
    return DES_BASE_S + DES_PER_GPU_CHUNK_S * n * chunks


def sweep_seconds(points: Iterable[Any], jobs: int = 1) -> float:
    """Rough wall-clock seconds for *points* over *jobs* processes."""
    return sum(point_seconds(p) for p in points) / max(jobs, 1)


def format_duration(seconds: float) -> str:
    """'40 s', '12 min', '4.0 hours', '3.2 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


RESUME_HINT = f"Ctrl-C keeps the finished points and {param('resume', True)} continues"


def long_sweep_warning(
    points: Collection[Any], jobs: int, what: str = "sweep", hint: str = RESUME_HINT,
    copies: int = 1,
) -> str | None:
    """The warning for a *what* of *points* (each simulated *copies* times) estimated past
    :data:`WARN_AFTER_S`, else None. *points* may be expanded lazily: it is iterated once."""
    seconds = sweep_seconds(points, jobs) * copies
    if seconds <= WARN_AFTER_S:
        return None
    return (
        f"this {what} of {len(points) * copies:,} points will take roughly "
        f"{format_duration(seconds)} at -j {jobs} (an estimate from its GPU counts); {hint}"
    )
