"""The periodic reduction: time a prefix of a schedule declared as one step repeated, extend it.

A ring declares its ``2(p-1)`` steps as one template repeated
(:func:`atpsim.collectives.schedule.repeat`): same transfers, same bytes. When links are
shared and routes differ in latency (a ring whose hops change torus row take one hop more),
ranks drift apart by fractions of a step and the event engine meets every distinct time; but
after a transient of a few steps the run settles into a steady state in which step ``k + P``
is step ``k`` delayed by ``delta``: every flow starts and finishes ``delta`` later, so every
link carries the same flows at the same rates ``delta`` later.

Causality makes a prefix enough. Dependencies only point to earlier steps, so a run of the
first ``K0`` steps is the full run until a flow of step ``K0 - 1`` first finishes; and once
the state repeats, the full run is the prefix run with the periodic stretch made longer by
``K - K0`` steps: steps before the stretch as in the prefix, steps inside it shifted by whole
periods, and the ending (whose flows see the contention fall away) as the prefix's ending,
``(K - K0) / P * delta`` later. Every link carries ``K / K0`` times the prefix's bytes.

The state repeats when, over a window of at least :data:`MIN_PERIODS` periods, every flow's
start and finish move by the same ``delta`` from step ``k`` to ``k + P`` (within
:data:`PERIOD_RTOL` of the run's time span), the flows in flight at the window's two
comparison times all lie inside it, and no flow of the window runs past the first finish of
the prefix's last step. Otherwise the prefix doubles, up to the whole schedule.

The extension needs every flow's start and finish, so it stands in front of the event-driven
solver (:class:`Periodic`); the longest-path solver is one cheap pass over the steps already.
Its path label is ``periodic+event`` where a prefix was extended, ``event`` where the prefix
grew to the whole schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from atpsim.engine.problem import Problem, Solution
from atpsim.engine.solvers.event import (
    EventDriven,
    FlatFlows,
    dependencies,
    done_by_id,
    flatten,
    prefix_of,
)
from atpsim.engine.solvers.event_loop import FlowTimeline

NAME = "periodic"

#: Steps simulated in the first prefix (doubled while no steady state shows).
FIRST_PREFIX_STEPS = 48
#: Periods (in steps) looked for.
MAX_PERIOD_STEPS = 4
#: The periodic window must hold this many periods.
MIN_PERIODS = 4
#: Times agree when they differ by at most this fraction of the prefix run's span.
PERIOD_RTOL = 1e-11


@dataclass(frozen=True)
class SteadyState:
    """Steps ``first .. last`` of the prefix repeat with *period* steps and *delta_s* seconds."""

    first: int
    last: int
    period: int
    delta_s: float


def _periodic_rows(start: np.ndarray, finish: np.ndarray, period: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per step k: does step ``k + period`` repeat step ``k`` shifted in time, and by how much."""
    d_finish = finish[period:] - finish[:-period]
    d_start = start[period:] - start[:-period]
    delta = d_finish[:, 0]
    ok = (np.ptp(d_finish, axis=1) <= tol) & (np.abs(d_start - delta[:, None]).max(axis=1) <= tol)
    return ok, delta


def _confined(start: np.ndarray, finish: np.ndarray, first: int, last: int, period: int, delta: float) -> bool:
    """The flows in flight when steps ``<= first + period - 1`` are all done (and one period
    later) belong to steps of the window ``first .. last``."""
    t_star = finish[: first + period].max()
    later = start[last - period + 1:]
    return bool(later.size == 0 or later.min() > t_star + delta)


def find_steady_state(start: np.ndarray, finish: np.ndarray) -> SteadyState | None:
    """A window of the prefix (arrays of shape steps x flows per step) that repeats."""
    n_steps = start.shape[0]
    span = float(finish.max() - start.min())
    tol = PERIOD_RTOL * max(span, 1e-30)
    safe_until = finish[-1].min()  # the prefix equals the full run before this
    unsafe = np.flatnonzero(finish.max(axis=1) >= safe_until)
    last_safe = int(unsafe[0]) - 1
    if last_safe < 1:
        return None
    for period in range(1, min(MAX_PERIOD_STEPS, n_steps // (MIN_PERIODS + 1)) + 1):
        ok, delta = _periodic_rows(start[: last_safe + 1], finish[: last_safe + 1], period, tol)
        if not len(ok) or not ok[-1]:
            continue
        same = ok & (np.abs(delta - delta[-1]) <= tol)
        breaks = np.flatnonzero(~same)
        first = int(breaks.max()) + 1 if len(breaks) else 0
        last = last_safe
        if last - first < MIN_PERIODS * period:
            continue
        if _confined(start, finish, first, last, period, float(delta[-1])):
            return SteadyState(first, last, period, float(np.mean(delta[first:])))
    return None


@dataclass(frozen=True)
class PeriodicRun:
    """The event run of the first *prefix_steps* steps; the full run's last steps are its
    last steps *shift_s* seconds later (0 when the prefix is the whole schedule)."""

    prefix: FlowTimeline
    prefix_steps: int
    shift_s: float


def run_periodic(n_steps: int, per_step: int, simulate: Callable[[int], FlowTimeline]) -> PeriodicRun:
    """Simulate prefixes of the *n_steps* steps (step-major flows, *per_step* each;
    ``simulate(k)`` runs the first ``k``) until one shows a steady state, or the whole."""
    prefix = min(n_steps, FIRST_PREFIX_STEPS)
    while True:
        run = simulate(prefix)
        if prefix == n_steps:
            return PeriodicRun(run, prefix, 0.0)
        state = find_steady_state(run.start_s.reshape(prefix, per_step),
                                  run.finish_s.reshape(prefix, per_step))
        inserted = n_steps - prefix
        if state is None:
            prefix = min(n_steps, 2 * prefix)
        elif inserted % state.period:
            prefix += inserted % state.period  # insert a whole number of periods
        else:
            return PeriodicRun(run, prefix, inserted // state.period * state.delta_s)


class Periodic:
    """The event-driven solver behind the periodic reduction: a problem whose steps are declared
    as one template repeated is shrunk to a prefix, timed, and its answer extended; any other
    problem goes to the event-driven solver whole. It always answers."""

    name = f"{NAME}+{EventDriven.name}"

    def __init__(self, inner: EventDriven | None = None):
        self.inner = inner or EventDriven()

    def solve(self, problem: Problem) -> Solution:
        if not problem.steps.repeated:
            return self.inner.solve(problem)
        n_steps, last = len(problem.steps), problem.steps[-1]
        run = run_periodic(n_steps, len(last), PrefixRuns(problem, self.inner).timeline)
        return extend(problem, run)


class PrefixRuns:
    """Event runs of prefixes of one problem. The first is set up on its own (it often
    settles); after it, the whole schedule's flows and dependencies are built once and each
    longer prefix is cut from them (:func:`~atpsim.engine.solvers.event.prefix_of`), instead of
    building every doubling anew. The first runs on the event loop its own size calls for
    (most settle there: a process that needs nothing else does not load the compiled kernel);
    every longer one on the loop the whole problem would run on (the compiled kernel where the
    whole has enough flows: measured 4-10x faster than the simpy loop on the prefixes of
    NCCL's channel rings over 4096 GPUs). Which loop runs is a matter of the problem alone."""

    def __init__(self, problem: Problem, inner: EventDriven):
        self.problem, self.inner = problem, inner
        self.runs = 0
        self.whole: tuple[FlatFlows, tuple[np.ndarray, np.ndarray]] | None = None
        self.n_flows = sum(len(t) * count for t, count in problem.steps.in_use())

    def timeline(self, n_steps: int) -> FlowTimeline:
        """The event run of the first *n_steps* steps. It is the whole run's beginning until
        a flow of its last step finishes (no flow of a later step starts before), so only
        until then may it stop at a horizon (:func:`~atpsim.engine.solvers.event_loop.
        horizon`)."""
        self.runs += 1
        prefix = self.problem.prefix(n_steps)
        n_flows = sum(len(s) for s in prefix.steps)
        guard = n_flows - len(prefix.steps[-1]) if n_steps < len(self.problem.steps) else None
        if self.runs == 1:
            return self.inner.timeline(prefix, guard=guard)
        if self.whole is None:
            flows = flatten(self.problem.steps)
            self.whole = flows, dependencies(self.problem, flows)
        return self.inner.timeline(prefix, prefix_of(*self.whole, n_flows),
                                   loop_flows=self.n_flows, guard=guard)


def extend(problem: Problem, run: PeriodicRun) -> Solution:
    """The full run from its prefix (module docstring): every rank's last flow is in the last
    step, which ends *shift_s* later than the prefix's; links carry ``K / K0`` times the bytes."""
    last = problem.steps[-1]
    finish = run.prefix.finish_s[-len(last):] + run.shift_s if len(last) else np.zeros(0)
    scale = len(problem.steps) / run.prefix_steps
    ids = problem.rank_of
    done = done_by_id(ids(last.src), ids(last.dst), finish, problem.n_ids)
    solution = Solution(done, run.prefix.link_bytes * scale,
                        float(run.prefix.delivered.sum()) * scale, EventDriven.name)
    return solution.relabel(NAME) if run.prefix_steps < len(problem.steps) else solution
