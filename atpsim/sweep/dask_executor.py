"""Simulate a sweep's points on a Dask distributed cluster (``atpsim run --scheduler``).

The scheduler is ``local`` (a :class:`distributed.LocalCluster` of single-threaded worker
processes on this machine, started and stopped with the sweep) or the address of a running
``dask scheduler`` (``tcp://host:8786``) whose workers have atpsim installed. The driver keeps
its guarantees (:mod:`atpsim.sweep.runner`): it yields one row per point as its task
finishes, and the runner appends each to ``results.partial.csv`` at once.

Points travel as specs (the frozen point objects, a few hundred bytes each), never as built
graphs: a worker builds each topology itself and memoizes it (``atpsim.topology.spec``).

Batching: a Dask task costs the scheduler, the driver and a worker a round trip (1.7 ms an
empty task on an idle 2-worker cluster, 3-4 ms with the driver busy writing rows, on 2
cores), 100 times a cheap point's simulation and a tenth of a small ``des`` point's. So a
task simulates a batch of points worth about :data:`BATCH_TARGET_S` seconds by
:mod:`atpsim.sweep.estimate`, few enough that every worker thread still gets
:data:`MIN_TASKS_PER_THREAD` tasks to balance the tail. Measured on the 10,000 cheap points
of ``bench/bench_executors.py`` (2 workers, 2 loaded cores, :data:`BATCH_TARGET_S` varied),
whole sweeps per point: one point a task 3.6-4.1 ms,
5 a task 2.9 ms, 28 a task 0.9 ms, 56 a task (what the estimate gives them) 0.47-0.53 ms,
227 a task 0.43 ms, against 0.44 ms with ``-j 2``'s process pool. Points stream in (a sweep
expanded lazily is never all in memory): each topology and size has its open batch, so a
batch's points share their topology and its worker builds it once (and reuses the engine's
memo of collectives on it); the driver keeps :func:`in_flight` tasks submitted and cuts the
next batch as one finishes. The price of a batch is its granularity: Ctrl-C, or a worker
that dies, loses at most one batch per worker thread (about a second of work by the
estimate), and rows reach the partial file a batch at a time.

Workers: before the first point is sent, every worker must import atpsim in the driver's
version, and so must each worker that joins later (:mod:`atpsim.sweep.dask_workers`), else
one line naming the worker, exit 2.

Failures: a point that raises is a failed row (:func:`~atpsim.sweep.runner.simulate_row`); a
worker that dies takes its batch along, and the scheduler reruns the batch on another worker
(``distributed.scheduler.allowed-failures`` times, 3 by default) before the sweep stops with
:class:`~atpsim.sweep.runner.WorkerLost`. Leaving early (Ctrl-C, an error) cancels the
futures and closes the client and the local cluster.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
import uuid
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client, Future, KilledWorker, LocalCluster, as_completed
from distributed.comm.addressing import get_address_host_port, parse_address
from distributed.comm.registry import get_backend
from distributed.diagnostics.plugin import WorkerPlugin

from atpsim.errors import AtpsimError
from atpsim.sweep.dask_workers import WorkerCheck
from atpsim.sweep.estimate import point_seconds
from atpsim.sweep.rows import Point, Simulate, WorkerLost, simulate_row

log = logging.getLogger(__name__)

#: The --scheduler value that starts a cluster on this machine.
LOCAL = "local"
#: Seconds the driver waits for a remote scheduler to answer before giving up.
CONNECT_TIMEOUT_S = 10.0
#: Estimated seconds of simulation per task (see the module docstring).
BATCH_TARGET_S = 1.0
#: A batch is small enough that each worker thread gets at least this many tasks.
MIN_TASKS_PER_THREAD = 4

Batch = list[tuple[int, Point]]


def dask_results(
    todo: Iterable[tuple[int, Point]],
    n_todo: int,
    simulate: Simulate,
    scheduler: str,
    workers: int,
) -> Generator[dict[str, Any], None, None]:
    """The row of every ``(index, point)`` of *todo* (*n_todo* of them), in completion order,
    simulated by *simulate* on the Dask cluster *scheduler* (``local``: *workers* processes
    here). Batches are cut from *todo* as tasks finish, :func:`in_flight` tasks at a time, so
    a lazily expanded sweep is never all in memory."""
    with _connect(scheduler, workers) as client:
        workers_seen = WorkerCheck(client)
        cut = batches(todo, n_todo, workers_seen.threads)
        sweep, running = uuid.uuid4().hex[:8], set[Future]()
        finished = as_completed(loop=client.loop)
        try:
            while _refill(client, finished, running, cut, sweep, simulate,
                          in_flight(workers_seen.threads)):  # fmt: skip
                for future in _ready(finished, workers_seen):
                    running.discard(future)
                    yield from _rows_of(future)
                    future.release()
        except BaseException:
            client.cancel(list(running))
            raise


#: Seconds between two looks at the finished tasks while none is.
POLL_S = 0.005


def _ready(finished: as_completed, workers_seen: WorkerCheck) -> list[Future]:
    """The tasks finished, once one is; meanwhile workers that join are checked."""
    while not finished.has_ready():
        workers_seen.check_when_due()
        time.sleep(POLL_S)
    return list(finished.next_batch(block=False))


def in_flight(threads: int) -> int:
    """Tasks the driver keeps submitted for *threads* worker threads: twice
    :data:`MIN_TASKS_PER_THREAD` each, so no thread waits for the driver to cut a batch."""
    return 2 * MIN_TASKS_PER_THREAD * max(threads, 1)


def _refill(client: Client, finished: as_completed, running: set[Future],
            cut: Iterator[Batch], sweep: str, simulate: Simulate, limit: int) -> bool:
    """Submit batches of *cut* until *limit* tasks run; whether any still runs."""
    while len(running) < limit:
        batch = next(cut, None)
        if batch is None:
            break
        future = client.submit(simulate_batch, simulate, batch, key=_key(sweep, batch), pure=False)
        running.add(future)
        finished.add(future)
    return bool(running)


def simulate_batch(simulate: Simulate, batch: Batch) -> list[dict[str, Any]]:
    """The rows of the ``(index, point)`` pairs of *batch*, simulated one after another."""
    return [simulate_row(simulate, point, index) for index, point in batch]


@contextmanager
def _connect(scheduler: str, workers: int) -> Iterator[Client]:
    """A client of *scheduler*, closed (with the local cluster it started) on leaving."""
    if scheduler == LOCAL:
        with _local_cluster(workers) as cluster, Client(cluster, set_as_default=False) as client:
            client.register_plugin(IgnoreInterrupts())
            yield client
        return
    with _remote_client(scheduler) as client:
        yield client


@contextmanager
def _local_cluster(workers: int) -> Iterator[LocalCluster]:
    """*workers* single-threaded worker processes on this machine (any free port for the
    scheduler's web server: two local sweeps can run at once); Dask's own
    warnings about cancelled tasks (after Ctrl-C) are kept quiet."""
    log.info("starting a local Dask cluster of %d worker processes", workers)
    cluster = LocalCluster(
        n_workers=max(workers, 1),
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    with cluster:
        yield cluster


class IgnoreInterrupts(WorkerPlugin):
    """Makes a local worker process ignore SIGINT, as the process pool's workers do: Ctrl-C
    in a terminal reaches every process of the group, and only the driver should act on it
    (it cancels the tasks and stops the cluster). Registered with the scheduler, so a worker
    the nanny restarts gets it too. Remote workers keep their own Ctrl-C."""

    def setup(self, worker: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _remote_client(address: str) -> Iterator[Client]:
    """A client of the running scheduler at *address*; a malformed address, or one that does
    not answer within :data:`CONNECT_TIMEOUT_S`, is an AtpsimError naming ``--scheduler``."""
    _check_address(address)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except OSError as error:
        raise AtpsimError(
            f"cannot reach a Dask scheduler at {address!r} ({_reason(error)}); expected "
            f"'{LOCAL}' or the address of a running `dask scheduler`, e.g. tcp://host:8786",
            param="scheduler",
        ) from None
    with client:
        log.info("simulating on the Dask cluster at %s", address)
        yield client


def _check_address(address: str) -> None:
    """Refuse an address Dask cannot parse before a client is made of it (a client that
    fails on a malformed address hangs the interpreter's exit for 20 s)."""
    try:
        scheme, _ = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            get_address_host_port(address)
    except ValueError as error:
        raise AtpsimError(
            f"expected '{LOCAL}' or a scheduler address such as tcp://host:8786, got "
            f"{address!r} ({_reason(error)})",
            param="scheduler",
        ) from None


def _reason(error: Exception) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())


def _key(sweep: str, batch: Batch) -> str:
    """``atpsim-<sweep>-points-<first>-<last>``: the task's name in Dask's logs and dashboard."""
    return f"atpsim-{sweep}-points-{batch[0][0]}-{batch[-1][0]}"


def batches(todo: Iterable[tuple[int, Point]], n_todo: int, threads: int) -> Iterator[Batch]:
    """*todo* (*n_todo* points) cut into batches, each of points of one topology and size: a
    batch is open per topology while its points come, and leaves when it holds about
    :data:`BATCH_TARGET_S` seconds of work by :func:`~atpsim.sweep.estimate.point_seconds`
    (at least one point), or :func:`most_per_batch` points; the open ones leave at the end."""
    most = most_per_batch(n_todo, threads)
    open_batches: dict[tuple[str, int], tuple[Batch, list[float]]] = {}
    for item in todo:
        batch, seconds = open_batches.setdefault(_topology_of(item[1]), ([], [0.0]))
        cost = point_seconds(item[1])
        if batch and (seconds[0] + cost > BATCH_TARGET_S or len(batch) == most):
            yield batch
            batch, seconds = open_batches[_topology_of(item[1])] = ([], [0.0])
        batch.append(item)
        seconds[0] += cost
    for batch, _ in sorted(open_batches.values(), key=lambda b: b[0][0][0]):
        if batch:
            yield batch


def most_per_batch(n_todo: int, threads: int) -> int:
    """The most points a batch holds: few enough that each of *threads* worker threads gets
    :data:`MIN_TASKS_PER_THREAD` tasks to balance the tail of the sweep."""
    return max(math.ceil(n_todo / (max(threads, 1) * MIN_TASKS_PER_THREAD)), 1)


def _topology_of(point: Point) -> tuple[str, int]:
    """The point's topology label and GPU count: the key its topology is memoized under."""
    return str(getattr(point, "topology_label", "")), int(getattr(point, "n_devices", 0) or 0)


def _rows_of(future: Future) -> list[dict[str, Any]]:
    """The rows a finished task returned; a batch whose workers kept dying is WorkerLost. (A
    worker without atpsim never gets here: its tasks cannot be unpickled and wait, so the
    workers are checked first, :mod:`atpsim.sweep.dask_workers`.)"""
    try:
        return list(future.result())
    except KilledWorker as error:
        raise WorkerLost(f"the cluster lost the workers running {future.key} ({error})") from None
