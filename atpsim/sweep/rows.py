"""What a sweep runs and what it makes of each point, whatever runs it (this process, a process
pool, or a Dask cluster, :mod:`atpsim.sweep.dask_executor`): the :class:`Point` protocol, the
:data:`Simulate` function, :func:`simulate_row` (a point's results row; a failure becomes a
failed row), and :class:`WorkerLost`, which an executor raises when it cannot go on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from atpsim.errors import AtpsimError
from atpsim.results.schema import ResultsSchema


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


def _error_text(error: Exception) -> str:
    text = error.format() if isinstance(error, AtpsimError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())
