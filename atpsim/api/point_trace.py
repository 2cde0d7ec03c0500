"""Timelines of chosen sweep points: ``atpsim run SCENARIO --trace SELECTOR``.

A SELECTOR picks points of the sweep by the results table's point columns (the step
schema's :data:`atpsim.results.schema.POINT_COLUMNS`, a job's
:data:`~atpsim.results.schema.JOB_POINT_COLUMNS`), checked before anything is simulated:

* ``COLUMN=VALUE[,COLUMN=VALUE...]``: every point whose columns have those values
  (``model=M2,mesh=2x4,chunks=2``; ``tp_mesh=4x2,pp=8``; ``point_index=3`` for one point);
* ``best``: the point with the shortest time of the whole sweep (step_time_s, a job's
  iteration_time_s; known after it ran); with conditions (``topology=ic1,best``), the
  shortest among the points that meet them.

Each workload says what its timeline is (:class:`Timeline`, one per entry of
:data:`atpsim.api.workloads.WORKLOADS`): a step point's needs the event simulation
(``mode=des``) and is its per-rank timeline (:func:`atpsim.report.trace.write_chrome_trace`);
a job point's needs the joint network and is its iteration's stages, micro-batches,
collectives and busiest links (:func:`atpsim.api.job_trace.write_job_point_trace`). Each
chosen point that ran is simulated once more (the same deterministic run as its row) and its
timeline written to ``<out>/traces/<point_key>.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
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
class Timeline:
    """What a workload's trace is: the selectors' *columns* (its schema's point columns),
    the *time_column* ``best`` minimizes, *traced* whether a point (by its columns) has a
    timeline, *untraced* what the points without one are (for the error), and *write* a
    point's timeline into a folder, returning the file."""

    columns: tuple[str, ...]
    time_column: str
    traced: Callable[[Mapping[str, Any]], bool]
    untraced: str
    write: Callable[[Any, Path], Path]


@dataclass(frozen=True)
class TraceSelection:
    """The points one selector matched (indices into the sweep), whether it keeps only the
    fastest of them, and the workload's *timeline*."""

    text: str
    indices: tuple[int, ...]
    best: bool
    timeline: Timeline


def parse_selector(text: str, columns: Sequence[str] = POINT_COLUMNS) -> tuple[dict[str, str], bool]:
    """``"model=M2,best"`` -> ``({"model": "M2"}, True)``; a column must be one of
    *columns*; errors name the column."""
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
        if column not in columns:
            raise AtpsimError(f"unknown column {column!r} in {text!r}; one of "
                              f"{', '.join(columns)}{did_you_mean(column, columns)}",
                              param="trace")  # fmt: skip
        conditions[column] = value.strip()
    return conditions, best


def select_trace_points(points: Sequence[Any], selectors: Sequence[str],
                        timeline: Timeline | None = None) -> list[TraceSelection]:  # fmt: skip
    """Check every selector against the sweep's *points* before they are simulated: each
    must be well formed (a column of the *timeline*'s, default the step's) and match at least
    one point that has a timeline."""
    if not selectors:
        return []
    timeline = timeline or STEP_TIMELINE
    columns = [p.columns(i) for i, p in enumerate(points)]
    selections = []
    for text in selectors:
        conditions, best = parse_selector(text, timeline.columns)
        matched = [i for i, c in enumerate(columns) if _matches(c, conditions)]
        if not matched:
            raise AtpsimError(f"{text!r} matches no point of the sweep", param="trace")
        traceable = tuple(i for i in matched if timeline.traced(columns[i]))
        if not traceable:
            raise AtpsimError(f"{text!r} matches only {timeline.untraced}", param="trace")
        selections.append(TraceSelection(text, traceable, best, timeline))
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
    """Write the timeline of every selected point that ran (module docstring), the fastest
    by its timeline's time column for ``best``; nothing, and no look at *frame*, without
    *selections*."""
    if not selections:
        return []
    chosen: dict[int, Timeline] = {}
    for selection in selections:
        ok = _times(frame, selection.timeline.time_column)
        ran = [i for i in selection.indices if i in ok]
        if not ran:
            log.warning("%s %r: none of its points ran; no trace written", param("trace"), selection.text)
        elif selection.best:
            chosen[min(ran, key=lambda i: (ok[i], i))] = selection.timeline
        else:
            chosen.update(dict.fromkeys(ran, selection.timeline))
    return [timeline.write(points[i], out / TRACES_DIR) for i, timeline in chosen.items()]


def _times(frame: pd.DataFrame, column: str) -> dict[int, float]:
    """Each point that ran: its *column* (a time) by point index."""
    return {int(r.point_index): float(getattr(r, column)) for r in frame.itertuples()
            if r.status == "ok" and pd.notna(getattr(r, column))}  # fmt: skip


def write_point_trace(point: SweepPoint, folder: Path) -> Path:
    """Simulate *point* (mode des) and write its timeline to ``folder/<point_key>.json``."""
    result = simulate_des_step(topology_for(point), hardware_profile(point.hardware), point.model,
                               point.tp, point.chunks, point.algorithm)  # fmt: skip
    return write_chrome_trace(result.timeline, folder / f"{point.key()}.json")


#: A step point's timeline: the event simulation's per-rank tasks.
STEP_TIMELINE = Timeline(POINT_COLUMNS, "step_time_s", lambda c: c["mode"] == "des",
                         "analytic points (a timeline needs mode des)", write_point_trace)  # fmt: skip
