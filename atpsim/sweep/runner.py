"""Run a sweep: simulate every point (in parallel processes with *jobs* > 1, or on a Dask
cluster with a *scheduler*, :mod:`atpsim.sweep.dask_executor`), keep each finished row at once
in ``results.partial.csv``, and write the sorted table at the end (:mod:`atpsim.sweep.table`).
The driver holds a key and a position per point and a few points in flight, never the rows: a
sweep of 100,000 points (expanded lazily, :class:`atpsim.scenario.sweep.SweepPoints`) runs in
about the memory of one of 10,000.

Safety: each finished point is appended (and flushed to the operating system) before the next
is counted, so Ctrl-C or a crash of the process loses at most the points in flight (the file is
fsync'ed every :data:`atpsim.results.io.SYNC_EVERY_S`, so a crash of the machine loses at most
that much more); ``resume=True`` reads the partial file (or a
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
import re
import signal
import threading
import time
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from itertools import islice
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from atpsim.errors import AtpsimError, WorkerDiedError, param
from atpsim.results.io import (
    PARTIAL_CSV,
    RESULTS_CSV,
    RowAppender,
    iter_rows,
    read_results,
    schema_for,
)
from atpsim.results.schema import STEP_SCHEMA
from atpsim.sweep.progress import SweepProgress
from atpsim.sweep.rows import Point, Simulate, WorkerLost, simulate_row
from atpsim.sweep.table import PointIndex, SweepTable, write_table

log = logging.getLogger(__name__)

#: Where ``fresh=True`` keeps an interrupted run's rows instead of deleting them.
DISCARDED_CSV = "results.partial.discarded.csv"


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a KeyboardInterrupt from a point) stopped the sweep; *kept* of *total*
    points are saved in *partial_path* and a rerun with resume continues from there."""

    def __init__(self, kept: int, total: int, partial_path: Path):
        self.kept, self.total, self.partial_path = kept, total, partial_path
        super().__init__(self.message())

    def message(self) -> str:
        return (
            f"interrupted: {self.kept} of {self.total} points kept in {self.partial_path}; "
            f"rerun with {param('resume', True)} to continue"
        )


def run_sweep(points: Collection[Point], out_dir: Path | str, **options: Any) -> pd.DataFrame:
    """Simulate *points* (:func:`stream_sweep`, which takes the same *options*) and return the
    results table (one row per point, in point order) as written to ``out_dir/results.csv``
    and read back. For a sweep too large to hold as a table, call :func:`stream_sweep`."""
    return read_results(stream_sweep(points, out_dir, **options).path)


def stream_sweep(
    points: Collection[Point],
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
) -> SweepTable:
    """Simulate *points* and write ``out_dir/results.csv`` (and ``.parquet``): one row per
    point, in point order. *points* is a sequence or a collection that expands them lazily
    (:class:`atpsim.scenario.sweep.SweepPoints`): it is iterated twice, once for the keys and
    once to simulate, and must give the same points in the same order each time; the driver
    keeps a key and a position per point, and the rows only on disk (:mod:`atpsim.sweep.table`).
    *simulate* must be a module-level function when *jobs* > 1 (it is pickled to the worker
    processes). With a *scheduler* (``local``: a Dask cluster of *jobs* processes here; else a
    Dask scheduler's address such as ``tcp://host:8786``) the points run on that cluster.
    Raises :class:`SweepInterrupted` on Ctrl-C and WorkerDiedError when a worker process
    dies, after saving what finished."""
    check_jobs(jobs, scheduler)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / PARTIAL_CSV
    schema = next(iter(points)).schema if points else STEP_SCHEMA
    if not resume:
        _set_aside(partial, fresh)
    index, todo, done = _plan(points, out, resume)
    n_todo = todo.count(1)
    bar = SweepProgress(index.unique, done, enabled=progress, console=console)
    failures = _FailureLog()
    try:
        with bar, RowAppender(partial, schema) as saved, closing(
            _results(_todo(points, todo), n_todo, simulate, jobs, scheduler)
        ) as rows:
            for row in rows:
                saved.append(row)
                failures(row)
                bar.advance(failed=row["status"] == "failed")
    except KeyboardInterrupt:
        raise SweepInterrupted(_kept(out, index), index.unique, partial) from None
    except (BrokenProcessPool, WorkerLost):
        raise WorkerDiedError(
            f"a worker process died (killed, out of memory?) with {_kept(out, index)} of "
            f"{index.unique} points kept in {partial}; rerun with {param('resume', True)} (and fewer jobs)"
        ) from None
    except AtpsimError as error:  # from the executor: a cluster that cannot run the points
        raise _with_kept(error, _kept(out, index), index.unique, partial) from None
    failures.summary(n_todo)
    sources = [(out / RESULTS_CSV, False)] if resume else []
    table = write_table(out, [*sources, (partial, True)], index, schema, parquet)
    partial.unlink(missing_ok=True)
    return table


#: Worker processes per CPU a sweep may start: its points are CPU-bound pure Python, so more
#: only share the CPUs, while each process holds 80 MB once atpsim is imported (measured) and
#: up to about 300 MB simulating; ``-j 100000`` would start that many.
JOBS_PER_CPU = 4


#: A Dask scheduler's address as a sweep takes it: ``tcp://HOST:PORT`` (a host name, an IPv4
#: address or an IPv6 address in brackets). Dask's other schemes do not reach a cluster from
#: here: ``inproc://`` is another process's memory, ``tls://`` needs certificates a sweep does
#: not pass, ``ucx://`` a UCX build.
SCHEDULER_ADDRESS = re.compile(r"tcp://(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


def check_scheduler(scheduler: str | None) -> None:
    """Refuse, before anything is read or started, a *scheduler* that is neither ``local``
    nor a :data:`SCHEDULER_ADDRESS` with a port from 1 to 65535 (an AtpsimError about the
    *scheduler* parameter): a client made of any other address failed after some 24 s, and
    its ``__del__`` printed a traceback."""
    if scheduler is None or scheduler == "local":
        return
    match = SCHEDULER_ADDRESS.fullmatch(scheduler) if isinstance(scheduler, str) else None
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise AtpsimError(
            f"expected 'local' or a scheduler address such as tcp://host:8786, got {scheduler!r} "
            "(the address a running `dask scheduler` prints: tcp://HOST:PORT)",
            param="scheduler",
        )


def check_jobs(jobs: int, scheduler: str | None = None) -> None:
    """Refuse a bad *scheduler* (:func:`check_scheduler`) and more worker processes than
    :data:`JOBS_PER_CPU` per CPU of this machine (none are started here when *scheduler* is a
    remote cluster's address: -j is ignored then)."""
    check_scheduler(scheduler)
    if scheduler not in (None, "local"):
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = JOBS_PER_CPU * cpus
    if jobs > limit:
        raise AtpsimError(
            f"expected at most {limit} worker processes ({JOBS_PER_CPU} per CPU; this machine "
            f"has {cpus}), got {jobs}: more only share the CPUs, each holding 80-300 MB",
            param="jobs",
        )


def _set_aside(partial: Path, fresh: bool) -> None:
    """Before a run that does not resume: refuse to start over an interrupted run's rows
    unless *fresh*, which keeps them as ``results.partial.discarded.csv``."""
    if not partial.exists():
        return
    if not fresh:
        rows = max(sum(1 for _ in partial.open(encoding="utf-8", errors="replace")) - 1, 0)
        raise AtpsimError(
            f"holds {rows} rows of an interrupted run; rerun with {param('resume', True)} to keep "
            f"them, or with {param('fresh', True)} to set them aside and start over",
            source=str(partial),
        )
    discarded = partial.with_name(DISCARDED_CSV)
    partial.replace(discarded)
    log.warning("set aside the interrupted run's rows in %s", discarded)


def _plan(points: Iterable[Point], out: Path, resume: bool) -> tuple[PointIndex, bytearray, int]:
    """The index of *points*, a flag per point that is 1 where it is to be simulated (the
    first point of its key, without a successful row on disk when resuming), and how many
    points already have one."""
    ok, saved = _saved_keys(out) if resume else (set(), set())
    index, todo = PointIndex(), bytearray()
    for point in points:
        key = point.key()
        todo.append(index.add(key) and key not in ok)
    if index.count > index.unique:
        log.info("%d duplicate points are simulated once", index.count - index.unique)
    done = sum(key in index.first for key in ok)
    if done:
        log.info("resuming: %d of %d points already done", done, index.unique)
    stale = sum(key not in index.first for key in saved)
    if stale:
        log.warning("ignoring %d saved rows of points not in this sweep", stale)
    return index, todo, done


def _saved_keys(out: Path) -> tuple[set[str], set[str]]:
    """The keys with a successful row saved so far (final table, then the partial file), and
    every key with a row."""
    ok: set[str] = set()
    saved: set[str] = set()
    for path, is_partial in ((out / RESULTS_CSV, False), (out / PARTIAL_CSV, True)):
        for row in iter_rows(path, partial=is_partial) if path.exists() else ():
            saved.add(row["point_key"])
            if row["status"] == "ok":
                ok.add(row["point_key"])
    return ok, saved


def _kept(out: Path, index: PointIndex) -> int:
    """Points of *index* with a successful row on disk: what a resumed run keeps."""
    return sum(key in index.first for key in _saved_keys(out)[0])


def _with_kept(error: AtpsimError, kept: int, total: int, partial: Path) -> AtpsimError:
    """*error*, saying what is kept and how to go on when points were saved."""
    if not kept:
        return error
    note = f"; {kept} of {total} points kept in {partial}: rerun with {param('resume', True)} once fixed"
    return type(error)(error.message + note, source=error.source, key=error.key, param=error.param)


def _todo(points: Iterable[Point], todo: bytearray) -> Iterator[tuple[int, Point]]:
    """``(position, point)`` of the points flagged in *todo*."""
    for position, point in enumerate(points):
        if todo[position]:
            yield position, point


def _results(
    todo: Iterator[tuple[int, Point]],
    n_todo: int,
    simulate: Simulate,
    jobs: int,
    scheduler: str | None,
) -> Generator[dict[str, Any], None, None]:
    """Rows of the *n_todo* points of *todo*: on the Dask cluster *scheduler* when one is
    given (dask is imported only then), else in *jobs* processes, or in this one."""
    if scheduler is not None and n_todo:
        from atpsim.sweep.dask_executor import dask_results  # lazy: dask only with a scheduler

        yield from dask_results(todo, n_todo, simulate, scheduler, workers=jobs)
        return
    if jobs <= 1 or n_todo <= 1:
        for index, point in todo:
            yield simulate_row(simulate, point, index)
        return
    yield from _parallel_results(todo, simulate, min(jobs, n_todo))


#: Points a process pool holds per worker at once: enough to keep it busy, few enough that a
#: lazily expanded sweep is never all in memory.
IN_FLIGHT_PER_WORKER = 4


def _parallel_results(
    todo: Iterator[tuple[int, Point]], simulate: Simulate, jobs: int
) -> Generator[dict[str, Any], None, None]:
    """Rows in completion order from a pool of *jobs* worker processes (which ignore SIGINT,
    so Ctrl-C reaches only this process, which stops them), fed :data:`IN_FLIGHT_PER_WORKER`
    points per worker at a time."""
    executor = ProcessPoolExecutor(
        max_workers=jobs, initializer=_init_worker, initargs=(os.getpid(),)
    )
    pending: set[Future[dict[str, Any]]] = set()
    try:
        while True:
            for index, point in islice(todo, jobs * IN_FLIGHT_PER_WORKER - len(pending)):
                pending.add(executor.submit(simulate_row, simulate, point, index))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
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


def describe_point(columns: Mapping[str, Any]) -> str:
    """The parameters of a point on one line, e.g. ``topology=ic1 model=M2 mesh=2x4 ...``
    (the describing columns of the row's schema)."""
    names = schema_for(columns).describe
    return " ".join(f"{name}={columns[name]}" for name in names)
