"""Timelines of chosen sweep points: ``atpsim run SCENARIO --trace SELECTOR``.

A SELECTOR picks points of the sweep by the results table's point columns
(:data:`atpsim.results.schema.POINT_COLUMNS`), checked before anything is simulated:

* ``COLUMN=VALUE[,COLUMN=VALUE...]``: every point whose columns have those values
  (``model=M2,mesh=2x4,chunks=2``; ``point_index=3`` for one point by its row);
* ``best``: the point with the shortest step time of the whole sweep (known after it ran);
  with conditions (``topology=ic1,best``), the shortest among the points that meet them.

Only points of the event simulation (``mode=des``) have a timeline; the analytic mode's are
left out. Each chosen point that ran is simulated once more (the same deterministic run as
its row) and its per-rank timeline written as a Chrome/Perfetto trace
(:func:`atpsim.report.trace.write_chrome_trace`) to ``<out>/traces/<point_key>.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from atpsim.api.point import topology_for
from atpsim.compute.hardware import hardware_profile
from atpsim.engine.step.run import simulate_des_step
from atpsim.errors import AtpsimError, did_you_mean, param
from atpsim.report.trace import write_chrome_trace
from atpsim.results.schema import POINT_COLUMNS
from atpsim.scenario.point import SweepPoint
from atpsim.sweep.estimate import format_duration, sweep_seconds

log = logging.getLogger(__name__)

BEST = "best"
TRACES_DIR = "traces"


@dataclass(frozen=True)
class TraceSelection:
    """The points one selector matched (indices into the sweep) and whether it keeps only
    the fastest of them."""

    text: str
    indices: tuple[int, ...]
    best: bool


def parse_selector(text: str) -> tuple[dict[str, str], bool]:
    """``"model=M2,best"`` -> ``({"model": "M2"}, True)``; errors name the column."""
    conditions: dict[str, str] = {}
    best = False
    for part in (p.strip() for p in text.split(",")):
        if part == BEST:
            best = True
            continue
        column, sep, value = part.partition("=")
        column = column.strip()
        if not sep or not column or not value.strip():
            raise AtpsimError(f"expected COLUMN=VALUE or 'best' in {text!r}, got {part!r}",
                              param="trace")  # fmt: skip
        if column not in POINT_COLUMNS:
            raise AtpsimError(f"unknown column {column!r} in {text!r}; one of "
                              f"{', '.join(POINT_COLUMNS)}{did_you_mean(column, POINT_COLUMNS)}",
                              param="trace")  # fmt: skip
        conditions[column] = value.strip()
    return conditions, best


def select_trace_points(points: Sequence[Any], selectors: Sequence[str]) -> list[TraceSelection]:
    """Check every selector against the step sweep's *points* before they are simulated: each
    must be well formed and match at least one point of the event simulation (a job
    scenario's: :func:`atpsim.api.workloads.no_traces`)."""
    if not selectors:
        return []
    columns = [p.columns(i) for i, p in enumerate(points)]
    selections = []
    for text in selectors:
        conditions, best = parse_selector(text)
        matched = [i for i, c in enumerate(columns) if _matches(c, conditions)]
        if not matched:
            raise AtpsimError(f"{text!r} matches no point of the sweep", param="trace")
        traceable = tuple(i for i in matched if columns[i]["mode"] == "des")
        if not traceable:
            raise AtpsimError(f"{text!r} matches only analytic points (a timeline needs mode "
                              "des)", param="trace")  # fmt: skip
        selections.append(TraceSelection(text, traceable, best))
    _warn_many(selections, points)
    return selections


#: More traces than this are announced: each is a point simulated once more after the sweep.
MANY_TRACES = 16


def _warn_many(selections: Sequence[TraceSelection], points: Sequence[Any]) -> None:
    chosen = {i for s in selections if not s.best for i in s.indices}
    if len(chosen) > MANY_TRACES:
        seconds = sweep_seconds([points[i] for i in chosen])
        log.warning("%s selects %d points: each is simulated once more after the sweep for "
                    "its timeline (roughly %s); add conditions or 'best' to write fewer",
                    param("trace"), len(chosen), format_duration(seconds))  # fmt: skip


def _matches(columns: dict[str, Any], conditions: dict[str, str]) -> bool:
    return all(_same(columns.get(name), value) for name, value in conditions.items())


def _same(actual: Any, wanted: str) -> bool:
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return str(actual).lower() == wanted.lower()
    try:
        return float(actual) == float(wanted)
    except ValueError:
        return False


def write_point_traces(out: Path, frame: pd.DataFrame, points: Sequence[Any],
                       selections: Sequence[TraceSelection]) -> list[Path]:  # fmt: skip
    """Write the timeline of every selected point that ran (module docstring); nothing, and
    no look at *frame*, without *selections* (a job table has no step columns)."""
    if not selections:
        return []
    chosen: dict[int, None] = {}
    ok = {int(r.point_index): float(r.step_time_s) for r in frame.itertuples()
          if r.status == "ok" and pd.notna(r.step_time_s)}  # fmt: skip
    for selection in selections:
        ran = [i for i in selection.indices if i in ok]
        if not ran:
            log.warning("%s %r: none of its points ran; no trace written", param("trace"), selection.text)
        elif selection.best:
            chosen[min(ran, key=lambda i: (ok[i], i))] = None
        else:
            chosen.update(dict.fromkeys(ran))
    return [write_point_trace(points[i], out / TRACES_DIR) for i in chosen]


def write_point_trace(point: SweepPoint, folder: Path) -> Path:
    """Simulate *point* (mode des) and write its timeline to ``folder/<point_key>.json``."""
    result = simulate_des_step(topology_for(point), hardware_profile(point.hardware), point.model,
                               point.tp, point.chunks, point.algorithm)  # fmt: skip
    return write_chrome_trace(result.timeline, folder / f"{point.key()}.json")
