"""From schedule steps to an event run: flatten (some of) the flows, build the rendezvous
dependencies, run the event engine, and use the periodic extension where the steps repeat.

:func:`event_run` serves the plain joint run of the auto engine and the one-flow-per-orbit
run of :mod:`atpsim.engine.symmetry`; ``engine="event"`` does not come here (it is the plain
reference, with no shortcut).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from atpsim.collectives.schedule import Step, rendezvous_dependencies
from atpsim.engine.event import FlowTimeline, run_event
from atpsim.engine.periodic import run_periodic, uniform_steps
from atpsim.engine.routes import PairRoutes


@dataclass(frozen=True)
class FlatFlows:
    """Flows in step-major order: ends (GPU ranks), bytes, lane and step of each."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    lane: np.ndarray
    step: np.ndarray


def flatten(steps: tuple[Step, ...]) -> FlatFlows:
    """The flows of *steps*, step by step."""
    parts = []
    for k, s in enumerate(steps):
        parts.append((s.src, s.dst, s.nbytes, s.lanes, np.full(len(s.src), k, dtype=np.int64)))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return FlatFlows(empty, empty, np.zeros(0), empty, empty)
    return FlatFlows(*(np.concatenate([p[i] for p in parts]) for i in range(5)))


@dataclass(frozen=True)
class StepsRun:
    """What an event run of a schedule's flows gives back: *done_s[r]*, the finish of the
    last flow rank id ``r`` takes part in (ids as ``rank_of`` gives them), bytes per link
    and delivered in all, and the event count."""

    done_s: np.ndarray
    link_bytes: np.ndarray
    delivered: float
    events: int


def event_run(
    steps: tuple[Step, ...],
    routes: PairRoutes,
    capacity_Bps: np.ndarray,
    *,
    rank_of: Callable[[np.ndarray], np.ndarray] | None = None,
    n_ids: int | None = None,
) -> StepsRun:
    """Run the flows of *steps* on *routes*; dependencies follow the
    rendezvous rule over ``rank_of(rank)`` (the rank itself by default; *n_ids* of them, by
    default the GPUs of *routes*). Where all steps are
    alike, only a prefix is simulated and extended (:mod:`atpsim.engine.periodic`); a rank's
    last flow is then in the last step, which the extension gives exactly."""
    ids = rank_of if rank_of is not None else (lambda ranks: ranks)
    size = routes.n_gpus if n_ids is None else n_ids

    def simulate(n_steps: int) -> FlowTimeline:
        flows = flatten(steps[:n_steps])
        deps = rendezvous_dependencies(ids(flows.src), ids(flows.dst), flows.step, flows.lane)
        return run_event(routes, capacity_Bps, routes.index(flows.src, flows.dst), flows.nbytes, deps)

    if not uniform_steps(steps):
        run = simulate(len(steps))
        flows = flatten(steps)
        return StepsRun(_done(ids(flows.src), ids(flows.dst), run.finish_s, size), run.link_bytes,
                        float(run.delivered.sum()), run.events)
    last = flatten(steps[-1:])
    periodic = run_periodic(len(steps), len(last.src), simulate)
    finish = periodic.prefix.finish_s[-len(last.src):] + periodic.shift_s if len(last.src) else np.zeros(0)
    scale = len(steps) / periodic.prefix_steps
    return StepsRun(_done(ids(last.src), ids(last.dst), finish, size), periodic.prefix.link_bytes * scale,
                    float(periodic.prefix.delivered.sum()) * scale, periodic.prefix.events)


def _done(src: np.ndarray, dst: np.ndarray, finish: np.ndarray, size: int) -> np.ndarray:
    done = np.zeros(size)
    np.maximum.at(done, src, finish)
    np.maximum.at(done, dst, finish)
    return done
