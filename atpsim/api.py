"""The one place the stages are chained: scenario point -> topology -> program -> engine -> row."""

from __future__ import annotations

from typing import Any

from atpsim.errors import SimulationError
from atpsim.scenario.point import SweepPoint


def simulate_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one sweep point and return its results row (columns of the results schema)."""
    raise SimulationError("simulating a point is not implemented yet (issue 4)")
