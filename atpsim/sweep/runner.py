"""Run a sweep: simulate every point (in parallel processes with *jobs* > 1, or on a Dask
cluster with a *scheduler*, :mod:`atpsim.sweep.dask_executor`), keep each finished row at once
in ``results.partial.csv``, and write the sorted table at the end.

Safety: each finished point is appended and fsync'ed before the next is counted, so Ctrl-C or
a crash loses at most the points in flight; ``resume=True`` reads the partial file (or a
previous ``results.csv``) and simulates only the points whose key has no successful row there
(failed points are retried). A point whose simulation raises becomes a row with
``status=failed`` and the error, is logged with its parameters, and the sweep goes on.
Points with equal keys are simulated once and share the row.

A point is a step (:class:`~atpsim.scenario.point.SweepPoint`) or a whole job
(:class:`~atpsim.scenario.job_point.JobPoint`): each names its results schema, and a sweep's
rows follow its points' schema.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pandas as pd
from rich.console import Console

from atpsim.errors import AtpsimError, WorkerDiedError
from atpsim.results.io import (
    PARTIAL_CSV,
    RESULTS_CSV,
    append_row,
    read_results,
    read_rows,
    schema_for,
    to_frame,
    write_results,
)
from atpsim.results.schema import STEP_SCHEMA, ResultsSchema
from atpsim.sweep.progress import SweepProgress

log = logging.getLogger(__name__)

#: Where ``fresh=True`` keeps an interrupted run's rows instead of deleting them.
DISCARDED_CSV = "results.partial.discarded.csv"



class Point(Protocol):
    """What the runner needs of a sweep point: its results *schema*, a stable :meth:`key`
    and the :meth:`columns` that describe it as the *index*-th point of its sweep."""

    schema: ClassVar[ResultsSchema]

    def key(self) -> str: ...

    def columns(self, index: int) -> dict[str, Any]: ...


#: A point -> its result columns (a module-level function when jobs > 1: it is pickled).
Simulate = Callable[[Any], Mapping[str, Any]]


class WorkerLost(Exception):
    """An executor lost a worker it could not replace (a Dask batch whose workers kept dying):
    the sweep stops as it does when a process pool breaks."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a KeyboardInterrupt from a point) stopped the sweep; *kept* of *total*
    points are saved in *partial_path* and a rerun with resume continues from there."""

    def __init__(self, kept: int, total: int, partial_path: Path):
        self.kept, self.total, self.partial_path = kept, total, partial_path
        super().__init__(self.message())

    def message(self) -> str:
        return (
            f"interrupted: {self.kept} of {self.total} points kept in {self.partial_path}; "
            "rerun with --resume to continue"
        )


def run_sweep(
    points: Sequence[Point],
    out_dir: Path | str,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    fresh: bool = False,
    simulate: Simulate,
    progress: bool = True,
    console: Console | None = None,
    parquet: bool = True,
) -> pd.DataFrame:
    """Simulate *points* and return the results table (one row per point, in point order) as
    written to ``out_dir/results.csv`` (and ``.parquet``) and read back. *simulate* must be a
    module-level function when *jobs* > 1 (it is pickled to the worker processes). With a
    *scheduler* (``local``: a Dask cluster of *jobs* processes here; else a Dask scheduler's
    address such as ``tcp://host:8786``) the points run on that cluster instead.
    Raises :class:`SweepInterrupted` on Ctrl-C and WorkerDiedError when a worker process
    dies, after saving what finished."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / PARTIAL_CSV
    schema = points[0].schema if points else STEP_SCHEMA
    unique = _unique_points(points)
    done = _load_done(out, partial, unique) if resume else {}
    if not resume:
        _set_aside(partial, fresh)
    todo = [(i, p) for key, (i, p) in unique.items() if key not in done]
    if done:
        log.info("resuming: %d of %d points already done", len(done), len(unique))
    bar = SweepProgress(len(unique), len(done), enabled=progress, console=console)
    failures = _FailureLog()
    try:
        with bar, closing(_results(todo, simulate, jobs, scheduler)) as rows:
            for row in rows:
                append_row(partial, row, schema)
                done[row["point_key"]] = row
                failures(row)
                bar.advance(failed=row["status"] == "failed")
    except KeyboardInterrupt:
        kept = len(_load_done(out, partial, unique, quiet=True))
        raise SweepInterrupted(kept, len(unique), partial) from None
    except (BrokenProcessPool, WorkerLost):
        kept = len(_load_done(out, partial, unique, quiet=True))
        raise WorkerDiedError(
            f"a worker process died (killed, out of memory?) with {kept} of {len(unique)} "
            f"points kept in {partial}; rerun with --resume (and fewer jobs)"
        ) from None
    failures.summary(len(todo))
    write_results(out, _final_frame(points, done, schema), parquet=parquet)
    partial.unlink(missing_ok=True)
    return read_results(out / RESULTS_CSV)


def _set_aside(partial: Path, fresh: bool) -> None:
    """Before a run that does not resume: refuse to start over an interrupted run's rows
    unless *fresh*, which keeps them as ``results.partial.discarded.csv``."""
    if not partial.exists():
        return
    if not fresh:
        rows = max(sum(1 for _ in partial.open(encoding="utf-8", errors="replace")) - 1, 0)
        raise AtpsimError(
            f"holds {rows} rows of an interrupted run; rerun with --resume to keep them, or "
            "with --fresh to set them aside and start over",
            source=str(partial),
        )
    discarded = partial.with_name(DISCARDED_CSV)
    partial.replace(discarded)
    log.warning("set aside the interrupted run's rows in %s", discarded)


def _unique_points(points: Sequence[Point]) -> dict[str, tuple[int, Point]]:
    """Key -> (index of its first occurrence, point), in point order."""
    unique: dict[str, tuple[int, Point]] = {}
    for index, point in enumerate(points):
        unique.setdefault(point.key(), (index, point))
    if len(unique) < len(points):
        log.info("%d duplicate points are simulated once", len(points) - len(unique))
    return unique


def _load_done(
    out: Path, partial: Path, unique: Mapping[str, tuple[int, Point]], quiet: bool = False
) -> dict[str, dict[str, Any]]:
    """Successful rows saved so far (final table first, then the partial file), keyed by point
    key, for the points of this sweep only: what a resumed run keeps."""
    rows: list[dict[str, Any]] = []
    for path, is_partial in ((out / RESULTS_CSV, False), (partial, True)):
        if path.exists():
            rows += read_rows(path, partial=is_partial)
    done = {r["point_key"]: r for r in rows if r["status"] == "ok" and r["point_key"] in unique}
    stale = {r["point_key"] for r in rows} - set(unique)
    if stale and not quiet:
        log.warning("ignoring %d saved rows of points not in this sweep", len(stale))
    return done


def _final_frame(
    points: Sequence[Point], done: Mapping[str, Mapping[str, Any]], schema: ResultsSchema
) -> pd.DataFrame:
    """One row per point, in point order, each with its own index."""
    return to_frame(({**done[p.key()], "point_index": i} for i, p in enumerate(points)), schema)


def _results(
    todo: Sequence[tuple[int, Point]], simulate: Simulate, jobs: int, scheduler: str | None
) -> Generator[dict[str, Any], None, None]:
    """Rows of *todo*: on the Dask cluster *scheduler* when one is given (dask is imported
    only then), else in *jobs* processes, or in this one."""
    if scheduler is not None and todo:
        from atpsim.sweep.dask_executor import dask_results

        yield from dask_results(todo, simulate, scheduler, workers=jobs)
        return
    if jobs <= 1 or len(todo) <= 1:
        for index, point in todo:
            yield simulate_row(simulate, point, index)
        return
    yield from _parallel_results(todo, simulate, jobs)


def _parallel_results(
    todo: Sequence[tuple[int, Point]], simulate: Simulate, jobs: int
) -> Generator[dict[str, Any], None, None]:
    """Rows in completion order from a pool of *jobs* worker processes (which ignore SIGINT,
    so Ctrl-C reaches only this process, which stops them)."""
    executor = ProcessPoolExecutor(
        max_workers=min(jobs, len(todo)), initializer=_init_worker, initargs=(os.getpid(),)
    )
    try:
        futures = [executor.submit(simulate_row, simulate, point, index) for index, point in todo]
        for future in as_completed(futures):
            yield future.result()
    except BaseException:
        _stop_workers(executor)
        raise
    executor.shutdown(wait=True)


def _init_worker(parent_pid: int) -> None:
    """A worker ignores SIGINT (the parent stops it) and exits when its parent is gone, however
    the parent died (a killed run must not leave its workers behind)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


#: How often (seconds) a worker checks that its parent is alive.
PARENT_POLL_S = 0.5


def _exit_with_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(EXIT_ORPHANED)


#: A worker's exit status when its parent died.
EXIT_ORPHANED = 4


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """Cancel what has not started and terminate the workers (there is no public API for the
    second before Python 3.14's ``terminate_workers``)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


def simulate_row(simulate: Simulate, point: Point, index: int) -> dict[str, Any]:
    """The results row of *point* (the *index*-th of its sweep): its parameter columns, then
    what *simulate* returned; an exception becomes a failed row (KeyboardInterrupt propagates)."""
    base, schema = point.columns(index), point.schema
    try:
        values = {**base, **dict(simulate(point)), "point_index": index}
        values.setdefault("status", "ok")
        return schema.normalize_row(values)
    except Exception as error:  # a failed point must not kill the sweep
        return schema.normalize_row({**base, "status": "failed", "error": _error_text(error)})


class _FailureLog:
    """Logs a failed point with its parameters: the first point of each distinct error at
    WARNING, later ones with the same error at DEBUG; :meth:`summary` counts them all."""

    def __init__(self) -> None:
        self.count = 0
        self.seen: set[str] = set()

    def __call__(self, row: Mapping[str, Any]) -> None:
        if row["status"] != "failed":
            return
        self.count += 1
        level = logging.DEBUG if row["error"] in self.seen else logging.WARNING
        self.seen.add(row["error"])
        where = describe_point(row)
        log.log(level, "point %d failed (%s): %s", row["point_index"], where, row["error"])

    def summary(self, total: int) -> None:
        if self.count:
            log.warning(
                "%d of %d points failed (%d distinct errors); their rows have status=failed",
                self.count,
                total,
                len(self.seen),
            )


def _error_text(error: Exception) -> str:
    text = error.format() if isinstance(error, AtpsimError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())


def describe_point(columns: Mapping[str, Any]) -> str:
    """The parameters of a point on one line, e.g. ``topology=ic1 model=M2 mesh=2x4 ...``
    (the describing columns of the row's schema)."""
    names = schema_for(columns).describe
    return " ".join(f"{name}={columns[name]}" for name in names)
