"""Which event loop a joint run's episodes get: the reference loop
(:class:`~atpsim.engine.solvers.flow_loop.Loop`) or the compiled one
(:class:`~atpsim.engine.solvers.joint_loop.CompiledLoop`), the same numbers either way.

Loading numba and the compiled functions costs a process about half a second, more than a run
whose episodes do little spends on the reference loop. A run (:func:`loop_choice`, mode
``busy``) therefore starts on reference loops and counts their rate solves (:func:`counted`);
it goes over to compiled loops once it is busy: it has made :data:`BUSY_EVENTS` of them, or
after :data:`PREDICT_AFTER` its pace says it will (:meth:`Choice.is_busy`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from atpsim.engine.solvers import event_loop, joint_kernel
from atpsim.engine.solvers.flow_loop import Loop

#: Rate solves the reference loops of a run make before its loops are compiled (mode
#: ``busy``, :func:`loop_choice`): about 0.5-1 s of the reference loop's work (150-300 us a
#: solve with hundreds of flows in flight), what loading numba and the compiled functions
#: costs a process (0.9-1.2 s; compiling them once after an install about 15 s: numba caches
#: the machine code on disk). A run whose episodes do less never loads them.
BUSY_EVENTS = 3_000

#: Rate solves after which a run that tells its progress (:func:`loop_choice`) is judged by
#: its course: busy where its solves per task ended since its first solve, over the tasks
#: left, bring it to :data:`BUSY_EVENTS`. The 512-H100 interleaved job is on course to 15 k
#: solves after its first 200 (at 6 % of its tasks); the 1024-A100 job, whose few hundred
#: solves come in one burst, to 213.
PREDICT_AFTER = 200

REFERENCE, COMPILED, BUSY = "reference", "compiled", "busy"

@dataclass
class Choice:
    """Which loops :func:`~atpsim.engine.solvers.joint_loop.joint_loop` makes (*mode*), the rate solves the reference loops
    of the run made so far (*events*), the run's (tasks ended, tasks in all) where it tells
    them (*progress*), the tasks ended at its first solve, and whether the run was judged
    busy (it stays so)."""

    mode: str
    events: int = 0
    progress: Callable[[], tuple[int, int]] | None = None
    first_ended: int | None = None
    busy: bool = False

    def is_busy(self) -> bool:
        """Whether the run has made :data:`BUSY_EVENTS` rate solves or, past
        :data:`PREDICT_AFTER`, is on course to (once busy, always)."""
        if not self.busy:
            self.busy = self.events >= BUSY_EVENTS or (self.events >= PREDICT_AFTER
                                                      and self._course() >= BUSY_EVENTS)  # fmt: skip
        return self.busy

    def _course(self) -> float:
        """The rate solves the run will have made at its end at its pace since its first
        (inf where no task ended since; 0 where it tells no progress)."""
        if self.progress is None or self.first_ended is None:
            return 0.0
        ended, total = self.progress()
        since = ended - self.first_ended
        return self.events + self.events * (total - ended) / since if since > 0 else float("inf")


_CHOICE: ContextVar[Choice | None] = ContextVar("atpsim_joint_loops", default=None)


def current() -> Choice:
    """The current choice (outside :func:`loop_choice`: reference loops, nothing counted)."""
    return _CHOICE.get() or Choice(REFERENCE)


@contextmanager
def loop_choice(mode: str, progress: Callable[[], tuple[int, int]] | None = None) -> Iterator[None]:
    """Within it, :func:`~atpsim.engine.solvers.joint_loop.joint_loop` makes reference loops (``reference``, also the default
    outside), compiled ones (``compiled``, where numba is installed and ``ATPSIM_EVENT_LOOP``
    is not ``reference``) or reference ones until the run is busy and compiled ones after, a
    busy loop taken over by a compiled one where its owner asks (``busy``:
    :func:`~atpsim.engine.solvers.joint_loop.compiled_if_busy`). Busy: its reference loops have made :data:`BUSY_EVENTS` rate
    solves, or are on course to (*progress*: gives the run's tasks ended and in all;
    :data:`PREDICT_AFTER`). The same numbers every way."""
    token = _CHOICE.set(Choice(mode, progress=progress))
    try:
        yield
    finally:
        _CHOICE.reset(token)


def compiled_functions() -> dict[str, Callable[..., Any]] | None:
    """The compiled functions, where the current choice wants them now and they exist."""
    choice = current()
    wanted = choice.mode == COMPILED or (choice.mode == BUSY and choice.is_busy())
    return joint_kernel.compiled() if wanted and event_loop.use_kernel else None


def counted(loop: object, before: int) -> None:
    """Count the rate solves a reference *loop* made since it had made *before*."""
    if isinstance(loop, Loop) and loop.n_events > before:
        choice = current()
        if choice.first_ended is None and choice.progress is not None:
            choice.first_ended = choice.progress()[0]
        choice.events += loop.n_events - before
