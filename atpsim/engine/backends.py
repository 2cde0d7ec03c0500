"""Collective timer backends: one interface, chosen by name, for the step scheduler and tests.

A backend is a function ``(topology, op, algorithm, groups, nbytes) -> group times (s)``: how
long each group of one collective call takes when all the groups run at once. Two are
registered (ASTRA-sim's analytical and congestion-aware network backends behind one API):

- ``nccl`` (the step simulator's default): on a machine NCCL runs on
  (:func:`atpsim.collectives.protocols.runs_nccl`), the collective as NCCL runs it
  (:func:`atpsim.engine.nccl.run_nccl`): channel rings laid over NVLink, PCIe and one per NIC
  rail, the protocol (LL, LL128, Simple) and algorithm (ring, tree, NVLS) NCCL's tuner would
  pick for the size, each protocol's latency and bandwidth efficiency; its time then includes
  the per-call cost (NCCL's latency model and the machine's fitted overhead,
  :func:`charges_call_cost`). An algorithm NCCL does not run for the op (a scenario's
  all-reduce algorithm on an all-gather) becomes ``auto``. On the paper's theory fabrics and
  custom graphs it is ``event`` (rings for ``auto``).
- ``event``: the link-level engine (:func:`atpsim.engine.collective.run_collective`, engine
  ``auto``): every transfer a flow over the topology's directed links at max-min fair rates.
  Its shortcuts are exact, so its answer is the event-driven simulation's.
- ``closed-form``: each algorithm's closed form
  (:func:`atpsim.collectives.closed_form.collective_time_s`) per group. It assumes no
  contention: no link is shared, within the group or with other groups, and every transfer
  costs ``alpha + bytes / B`` with ``B`` the lowest bottleneck bandwidth and ``alpha`` the
  highest path latency over the (src, dst) pairs the algorithm's schedule uses in that group
  (routed on the topology). Where every such path is alike and nothing is shared (one group on
  a non-blocking switch, a ring on a torus ring) it equals ``event``; elsewhere they differ
  (shared links make ``event`` slower, uneven paths make every transfer here as slow as the
  worst). The bidirectional ring's form assumes its two directions use different links (a
  torus); on a switch they share each GPU's link and ``event`` gives the plain ring's time.

:func:`register_backend` adds one, as a ``backend`` method of :mod:`atpsim.engine.methods`
(the one registry of how things are simulated, where each backend's kind, exactness and
traits are read); :func:`get_backend` fails with the valid names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from atpsim.collectives.closed_form import collective_time_s
from atpsim.collectives.nccl import nccl_algorithm_names
from atpsim.collectives.protocols import runs_nccl
from atpsim.collectives.registry import algorithm_names, pattern
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import (
    CLOSED_FORM,
    SHORTCUTS,
    CollectiveTimer,
    Method,
    find,
    names,
    register,
)
from atpsim.engine.nccl import run_nccl
from atpsim.engine.reductions.replicate import local_pairs
from atpsim.engine.routes import route_pairs
from atpsim.errors import SimulationError, did_you_mean
from atpsim.topology.graph import Topology


def charges_call_cost(backend: str, topology: Topology) -> bool:
    """Whether *backend*'s times on *topology* already hold a call's fixed cost, so the step
    simulator does not add the hardware profile's ``collective_overhead_s`` on top: a backend
    that runs calls as NCCL does (``nccl``), on a machine NCCL runs on (NCCL's latency model
    is that cost). False for a name no backend has."""
    method = find("backend", backend)
    return method is not None and method.nccl and runs_nccl(topology)


def register_backend(name: str, timer: CollectiveTimer, *, kind: str = CLOSED_FORM,
                     exact: bool = False, what: str = "a registered timer",
                     on_network: bool = False, nccl: bool = False) -> CollectiveTimer:
    """Register *timer* as backend *name* (replacing one of that name, traits and all): a
    ``backend`` method (:class:`~atpsim.engine.methods.Method`) of *kind*, *exact* or not,
    whose calls are flows on the network (*on_network*) and run as NCCL runs them (*nccl*);
    by default a timer of its own, like the closed forms. Returns *timer*."""
    register(Method(name, "backend", kind, exact, what, timer=timer, on_network=on_network,
                    nccl=nccl))
    return timer


def backend_names() -> list[str]:
    """The registered backends, sorted."""
    return sorted(names("backend"))


def backend_method(name: str) -> Method:
    """The ``backend`` method called *name*; a SimulationError naming the valid ones otherwise."""
    method = find("backend", name)
    if method is None or method.timer is None:
        hint = did_you_mean(name, names("backend"))
        valid = "" if hint.startswith(";") else f"; expected one of {backend_names()}"
        raise SimulationError(f"unknown collective backend {name!r}{hint}{valid}")
    return method


def get_backend(name: str) -> CollectiveTimer:
    """The timer of the backend called *name*; a SimulationError naming the valid ones
    otherwise."""
    return cast(CollectiveTimer, backend_method(name).timer)


def event_times(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
                nbytes: float) -> tuple[float, ...]:
    """Group times from the link-level engine (engine ``auto``)."""
    return run_collective(topology, op, algorithm, groups, nbytes).group_time_s


def nccl_times(topology: Topology, op: str, algorithm: str, groups: Sequence[Sequence[int]],
               nbytes: float) -> tuple[float, ...]:
    """Group times of the call as NCCL runs it (module docstring), protocol ``auto``; the
    ``event`` backend's where NCCL does not run."""
    if not runs_nccl(topology):
        return event_times(topology, op, algorithm if algorithm in algorithm_names(op) else "ring",
                           groups, nbytes)
    chosen = algorithm if algorithm in nccl_algorithm_names(op) else "auto"
    return run_nccl(topology, op, chosen, groups, nbytes).group_time_s


def closed_form_times(topology: Topology, op: str, algorithm: str,
                      groups: Sequence[Sequence[int]], nbytes: float) -> tuple[float, ...]:
    """Group times from the closed forms, on each group's worst path (module docstring)."""
    times = []
    for group in groups:
        bandwidth_Bps, latency_s = _worst_path(topology, op, algorithm, group, nbytes)
        times.append(collective_time_s(op, algorithm, len(group), nbytes, bandwidth_Bps, latency_s))
    return tuple(times)


def _worst_path(topology: Topology, op: str, algorithm: str, group: Sequence[int],
                nbytes: float) -> tuple[float, float]:
    """(lowest bottleneck bandwidth in bytes/s, highest path latency in s) over the pairs the
    algorithm's pattern uses in *group*; ``(inf, 0)`` for a group with no transfer."""
    if len(group) < 2:
        return float("inf"), 0.0
    src, dst = local_pairs(pattern(op, algorithm, len(group), float(nbytes)))
    ranks = np.asarray(group, dtype=np.int64)
    keys = np.unique(ranks[src] * topology.n_gpus + ranks[dst])
    routes = route_pairs(topology, keys)
    if not len(routes):
        return float("inf"), 0.0
    return float(routes.bottleneck_Bps.min()), float(routes.latency_s.max())


register_backend("nccl", nccl_times, kind=SHORTCUTS, exact=True, on_network=True, nccl=True,
                 what="each call as NCCL runs it (channels, protocol, algorithm) on the engine")
register_backend("event", event_times, kind=SHORTCUTS, exact=True, on_network=True,
                 what="each call on the engine (engine 'auto')")
register_backend("closed-form", closed_form_times,
                 what="each algorithm's closed form on each group's worst path")
