"""The simulation methods by name: the one place that says how a point is simulated.

Every choice of method a user or a caller makes is a name of one *choice* here, and each
entry point looks the name up instead of keeping its own table:

- ``engine`` (one collective call, :func:`atpsim.engine.collective.run_collective`):
  ``auto`` (exact shortcuts: replication, symmetry, then the solvers in order),
  ``reference`` (the plain run of every flow) and ``longest-path`` (one shortcut alone, an
  error where it is not exact);
- ``backend`` (each collective call of a step, :mod:`atpsim.engine.backends`): ``nccl``,
  ``event`` and ``closed-form``, registered beside their timers (they run the collective
  level, which sits below this module's users) by :func:`atpsim.engine.backends.register_backend`;
- ``network`` (a training job, :func:`atpsim.training.job.run_job`): ``joint`` (every call of
  the iteration on one network) or ``isolated`` (each call alone);
- ``granularity`` (the joint job's passes, :func:`atpsim.training.job.joint_job`): ``auto``,
  ``passes`` or ``tasks``;
- ``mode`` (one sweep point, :func:`atpsim.api.point.simulate_point_on`): ``des`` or
  ``analytic``.

A :class:`Method` says what *kind* of run it is (:data:`KINDS`), whether it is *exact*
(equal to the plain run of its level wherever it answers) and what the code dispatches on:
the *solvers* an engine tries, a backend's *timer* and traits. Which loop of the event
solver runs a flow network (the compiled kernel or the reference loop,
:mod:`atpsim.engine.solvers.event_loop`) is not a method: both are the same exact run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from atpsim.engine.problem import Problem, Solution
from atpsim.engine.reductions.periodic import Periodic
from atpsim.engine.solvers.longest_path import LongestPath
from atpsim.topology.graph import Topology

#: The kinds of run a method is.
PLAIN = "the plain run"
SHORTCUTS = "exact shortcuts"
ALONE = "each call alone"
CLOSED_FORM = "closed form"
ANALYTIC = "analytic model"
KINDS = (PLAIN, SHORTCUTS, ALONE, CLOSED_FORM, ANALYTIC)

#: Each choice and the level it simulates.
CHOICES = {"engine": "collective call", "backend": "step", "network": "job",
           "granularity": "job", "mode": "point"}  # fmt: skip

#: ``timer(topology, op, algorithm, groups, nbytes)``: each group's time (s) of one call.
CollectiveTimer = Callable[[Topology, str, str, Sequence[Sequence[int]], float], tuple[float, ...]]


class Solver(Protocol):
    """Times a problem; answers None where its answer would not be exact."""

    name: str

    def solve(self, problem: Problem) -> Solution | None: ...


#: The solvers the ``auto`` engine tries, in order: one vectorized pass over the steps, exact
#: when no link carries two flows at once; the event-driven solver behind the periodic
#: extension of schedules declared as one step repeated (always exact).
SOLVERS: tuple[Solver, ...] = (LongestPath(), Periodic())


@dataclass(frozen=True)
class Method:
    """Method *name* of *choice* (:data:`CHOICES`): a run of *kind*, *exact* where it
    answers; *strict*: an error where its shortcut is not exact (rather than another run).
    An engine's *solvers* (none: the plain run); a backend's *timer*, whether its calls are
    flows on the flow network (*on_network*: a call's plan holds its time) and whether it
    runs each call as NCCL does where NCCL runs (*nccl*: NCCL's own algorithm and per-call
    cost)."""

    name: str
    choice: str
    kind: str
    exact: bool
    what: str
    strict: bool = False
    solvers: tuple[Solver, ...] = ()
    timer: CollectiveTimer | None = None
    on_network: bool = False
    nccl: bool = False

    @property
    def level(self) -> str:
        """What one run of the method times: a collective call, a step, a job or a point."""
        return CHOICES[self.choice]


_METHODS: dict[tuple[str, str], Method] = {}


def register(method: Method) -> Method:
    """Register *method* (replacing one of its choice and name); returns it."""
    if method.choice not in CHOICES or method.kind not in KINDS:
        raise ValueError(f"expected a choice of {list(CHOICES)} and a kind of {list(KINDS)}, "
                         f"got {method.choice!r} and {method.kind!r}")  # fmt: skip
    _METHODS[(method.choice, method.name)] = method
    return method


def find(choice: str, name: object) -> Method | None:
    """The method *name* of *choice*; None when there is none."""
    return _METHODS.get((choice, name)) if isinstance(name, str) else None


def names(choice: str) -> list[str]:
    """The names of *choice*, in the order they were registered."""
    return [name for (c, name) in _METHODS if c == choice]


_BUILT_IN = (
    Method("auto", "engine", SHORTCUTS, True, "replication, symmetry or mirror, then the "
           "first exact solver", solvers=SOLVERS),
    Method("reference", "engine", PLAIN, True, "every flow of every group in one event run"),
    Method("longest-path", "engine", SHORTCUTS, True, "the longest-path solver alone",
           strict=True, solvers=(LongestPath(),)),
    Method("joint", "network", SHORTCUTS, True, "every call of the iteration on one network"),
    Method("isolated", "network", ALONE, False, "every call alone (equal where no two meet)"),
    Method("auto", "granularity", SHORTCUTS, True, "a pass is one delay where its TP "
           "traffic is proven to meet nothing else"),
    Method("passes", "granularity", SHORTCUTS, True, "every pass one delay", strict=True),
    Method("tasks", "granularity", PLAIN, True, "every pass its own tasks"),
    Method("des", "mode", SHORTCUTS, True, "the step's program on every rank's streams, "
           "each collective on the engine"),
    Method("analytic", "mode", ANALYTIC, False, "the paper's Eq. 2 plus serial compute"),
)  # fmt: skip
for _method in _BUILT_IN:
    register(_method)
