"""The workers of a Dask cluster, checked before they get a point: each must import atpsim in
the driver's version (``atpsim run --scheduler``, :mod:`atpsim.sweep.dask_executor`).

Why up front: a worker without atpsim cannot unpickle a task that names atpsim's functions,
and Dask does not turn that into an error of the task: the worker logs it and the task waits
forever (dask/distributed 2026.8). So the driver asks every worker the version it imports
(``pkgutil.resolve_name`` of :data:`VERSION_PROBE`: a standard-library function any worker can
unpickle) before the first point is sent, and asks each worker that joins later while the
sweep waits for results (every :data:`CHECK_EVERY_S`). A worker that cannot answer, or gives
another version, is one AtpsimError naming it (exit 2); the rows saved so far stay.
"""

from __future__ import annotations

import logging
import pkgutil
import time
from typing import Any

from distributed import Client

from atpsim.errors import AtpsimError

log = logging.getLogger(__name__)

#: What a worker is asked to prove it has atpsim: the version it imports.
VERSION_PROBE = "atpsim:__version__"
#: Seconds between two looks for workers that joined, while the driver waits for results.
CHECK_EVERY_S = 2.0


class WorkerCheck:
    """The workers of *client*'s cluster checked so far, and their threads."""

    def __init__(self, client: Client):
        self.client = client
        self.version = pkgutil.resolve_name(VERSION_PROBE)
        self.checked: set[str] = set()
        self.threads = 0
        self.next_check_s = 0.0
        self.check()
        if not self.checked:
            log.warning("the Dask scheduler has no workers yet: the points wait for `dask worker`s")

    def check(self) -> None:
        """Check the workers that joined since the last call (:func:`check_answers`)."""
        nthreads = self.client.nthreads()
        self.threads = sum(nthreads.values())
        self.next_check_s = time.monotonic() + CHECK_EVERY_S
        new = sorted(set(nthreads) - self.checked)
        if new:
            answers = self.client.run(pkgutil.resolve_name, VERSION_PROBE, workers=new,
                                      on_error="return")  # fmt: skip
            check_answers(answers, self.version)
            self.checked.update(new)

    def check_when_due(self) -> None:
        """:meth:`check`, at most every :data:`CHECK_EVERY_S`."""
        if time.monotonic() >= self.next_check_s:
            self.check()


def check_answers(answers: dict[str, Any], version: str) -> None:
    """Each worker's answer to the probe (its atpsim version, or the exception it raised)
    against the driver's *version*: the first worker that differs is an AtpsimError."""
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            reason = " ".join(f"{type(answer).__name__}: {answer}".split())
            raise AtpsimError(
                f"the Dask worker at {worker} cannot import atpsim ({reason}); install atpsim "
                f"{version} on every worker",
                param="scheduler",
            )
        if answer != version:
            raise AtpsimError(
                f"the Dask worker at {worker} runs atpsim {answer}, this driver {version}; "
                "install the same version on every worker",
                param="scheduler",
            )
