"""Export a step timeline as a Chrome trace (chrome://tracing, Perfetto JSON).

One process per rank with two threads (compute, comm), plus one process "collectives" with a
thread per mesh dimension showing when each collective ran on the first group of that
dimension. Times are microseconds, as the Trace Event Format expects. A whole iteration on the
joint network (:func:`graph_trace`) has a process per track of its task graph (each stage of
a replica with its micro-batches' passes, its TP collectives, each pipeline hop's sends, each
stage's gradient stream) and counter tracks of the busiest links (how many calls are in
flight on each).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from atpsim.engine.step.scheduler import StepTimeline
from atpsim.program import CommOp, Task

_STREAM_TID = {"compute": 0, "comm": 1}


def chrome_trace(timeline: StepTimeline, ranks: list[int] | None = None) -> dict[str, Any]:
    """Trace events for *ranks* (default: the first 8 and the critical rank)."""
    chosen = ranks if ranks is not None else _default_ranks(timeline)
    events: list[dict[str, Any]] = []
    for rank in chosen:
        events += _name_events(rank, f"rank {rank}", {0: "compute", 1: "comm"})
        events += [_task_event(timeline, task, rank, rank) for task in timeline.program.tasks]
    collectives_pid = timeline.n_ranks
    events += _name_events(collectives_pid, "collectives", {1: "mesh dim 1", 2: "mesh dim 2", 3: "mesh dim 3 (depth)"})
    first = chosen[0] if chosen else 0
    for task in timeline.program.tasks:
        if isinstance(task.op, CommOp):
            event = _task_event(timeline, task, first, collectives_pid)
            event["tid"] = task.op.dim
            events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(
    timeline: StepTimeline, path: str | Path, ranks: list[int] | None = None
) -> Path:
    """Write :func:`chrome_trace` to *path* as JSON; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(chrome_trace(timeline, ranks), indent=None, sort_keys=True))
    return target


def _default_ranks(timeline: StepTimeline) -> list[int]:
    ranks = list(range(min(8, timeline.n_ranks)))
    critical = timeline.critical_rank()
    return ranks if critical in ranks else [*ranks, critical]


def _task_event(timeline: StepTimeline, task: Task, rank: int, pid: int) -> dict[str, Any]:
    start_s = float(timeline.start_s[task.id, rank])
    finish_s = float(timeline.finish_s[task.id, rank])
    op = task.op
    args: dict[str, Any] = {"chunk": task.chunk}
    if isinstance(op, CommOp):
        args.update(collective=op.collective, dim=op.dim, bytes=op.bytes)
    else:
        args.update(flops=op.flops, m=op.m, n=op.n, k=op.k, batch=op.batch)
    return {
        "name": op.name,
        "cat": task.phase,
        "ph": "X",
        "pid": pid,
        "tid": _STREAM_TID[task.stream],
        "ts": start_s * 1e6,
        "dur": (finish_s - start_s) * 1e6,
        "args": args,
    }


def _name_events(pid: int, name: str, threads: dict[int, str]) -> list[dict[str, Any]]:
    events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}]
    events += [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}}
        for tid, label in threads.items()
    ]
    return events


def graph_trace(labels: Sequence[tuple[str, str]], start_s: np.ndarray, finish_s: np.ndarray,
                counters: Mapping[str, Sequence[tuple[float, int]]], max_tracks: int = 64) -> dict[str, Any]:
    """Trace events of a task graph's run: one process per track of the *labels* (``(track,
    name)`` per task, :func:`graph_intervals`; tasks without a track or time are left out;
    the first *max_tracks* tracks), and one counter track per entry of *counters* (``name ->
    [(time s, value)]``, e.g. the calls in flight on one of the busiest links)."""
    tracks: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for track, name, start, finish in graph_intervals(labels, start_s, finish_s):
        if track not in tracks:
            if len(tracks) >= max_tracks:
                continue
            tracks[track] = len(tracks)
            events += _name_events(tracks[track], track, {0: track})
        events.append({"name": name, "cat": track.split(" ")[0], "ph": "X", "pid": tracks[track],
                       "tid": 0, "ts": start * 1e6, "dur": (finish - start) * 1e6})  # fmt: skip
    counter_pid = len(tracks)
    events += _name_events(counter_pid, "busiest links", {})
    for name, points in counters.items():
        events += [{"name": name, "ph": "C", "pid": counter_pid, "ts": t * 1e6, "args": {"calls in flight": v}}
                   for t, v in points]  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms"}


#: Name suffixes of the zero-length tasks that open and close a span of many tasks (a pass
#: built of its program's tasks: ``F3 start`` ... ``F3 end``).
SPAN_OPEN, SPAN_CLOSE = " start", " end"


def graph_intervals(labels: Sequence[tuple[str, str]], start_s: np.ndarray, finish_s: np.ndarray
                    ) -> list[tuple[str, str, float, float]]:
    """``(track, name, start s, finish s)`` of each labelled task that took time, in task
    order; a task named ``NAME start`` opens a span NAME on its track that lasts until the
    finish of the last ``NAME end`` on that track before the next ``NAME start``."""
    spans: list[list[Any]] = []
    open_spans: dict[tuple[str, str], list[Any]] = {}
    for task, (track, name) in enumerate(labels):
        if not track:
            continue
        times = [float(start_s[task]), float(finish_s[task])]
        if name.endswith(SPAN_OPEN):
            span = [track, name.removesuffix(SPAN_OPEN), *times]
            open_spans[(track, name.removesuffix(SPAN_OPEN))] = span
            spans.append(span)
        elif name.endswith(SPAN_CLOSE) and (track, name.removesuffix(SPAN_CLOSE)) in open_spans:
            open_spans[(track, name.removesuffix(SPAN_CLOSE))][3] = times[1]
        else:
            spans.append([track, name, *times])
    return [(track, name, start, finish) for track, name, start, finish in spans if finish > start]


def write_graph_trace(path: str | Path, *args: Any, **kwargs: Any) -> Path:
    """Write :func:`graph_trace` to *path* as JSON; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(graph_trace(*args, **kwargs), indent=None, sort_keys=True))
    return target
