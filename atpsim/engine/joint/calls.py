"""A collective call in the joint network: what it runs (schedule, protocol, fixed latency),
how long it takes alone, and the links each of its groups crosses.

A :class:`CallSpec` is a call as the step or job asks for it: a collective timer *backend*
(:mod:`atpsim.engine.backends`), the op, the algorithm, every group and the buffer, and the
profile's per-call cost where the backend has none of its own. :func:`plan_call` turns it
into a :class:`CallPlan` for one machine:

- ``nccl`` on a machine NCCL runs on: the algorithm and protocol NCCL's tuner picks for the
  whole call (:func:`atpsim.engine.nccl.run_nccl`), its schedule (the planned channel rings,
  tree, ...), the protocol's fixed latency as a delay before the first byte, and its
  efficiency as the flows' weights (:mod:`~atpsim.engine.joint.sharing`);
- ``event`` (and ``nccl`` elsewhere): the registry algorithm on bare links, the per-call cost
  as the delay.

Its *alone_s* are the backend's own group times (plus the per-call cost where charged), the
numbers the list schedule uses; a subset of the groups alone is timed by the same engine.
The closed-form backend moves no bytes, so it has no place in a joint network.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from atpsim.collectives.nccl import nccl_algorithm_names
from atpsim.collectives.nccl.candidates import port_bound_s
from atpsim.collectives.protocols import (
    LINK_CLASS,
    LINK_ROWS,
    effective_topology,
    link_row,
    runs_nccl,
    topology_profile,
)
from atpsim.collectives.registry import algorithm_names, build_schedule
from atpsim.collectives.schedule import Schedule, Steps
from atpsim.engine.backends import backend_method
from atpsim.engine.collective import run_collective
from atpsim.engine.methods import find, names
from atpsim.engine.nccl import run_nccl
from atpsim.engine.routes import route_pairs
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology

#: Weight-table rows: bare links, then NCCL's protocols, then NVLS (an NVLS call with Simple:
#: :func:`~atpsim.collectives.protocols.link_row`).
PROTOCOL_ROWS = ("none", *LINK_ROWS)
#: Weight-table columns: the protocols' link classes.
CLASSES = ("nvlink", "pcie", "net")


@dataclass(frozen=True)
class CallSpec:
    """One collective call: *op* by *algorithm* on every group of *groups*, *nbytes* per
    rank, timed by *backend*; *overhead_s* is added to every group's time where the backend
    charges no per-call cost of its own (the list schedule's rule)."""

    backend: str
    op: str
    algorithm: str
    groups: tuple[tuple[int, ...], ...]
    nbytes: float
    overhead_s: float = 0.0


@dataclass(frozen=True, eq=False)
class CallPlan:
    """*spec* on *topology* (the machine the call runs on; *nominal* the one it was planned
    for): *name* the algorithm of its schedule (a registry name, or NCCL's plan as a
    :class:`~atpsim.collectives.planned.PlannedPattern`), *protocol* its weight-table row,
    *fixed_s* the delay before its first byte, *alone_s[g]* group ``g``'s time with every
    group running at once and nothing else (s)."""

    spec: CallSpec
    topology: Topology
    nominal: Topology
    name: str
    protocol: str
    fixed_s: float
    alone_s: np.ndarray
    _subsets: dict = field(default_factory=dict, repr=False)

    @property
    def moves_bytes(self) -> bool:
        return self.spec.nbytes > 0 and any(len(g) > 1 for g in self.spec.groups)

    @property
    def timed_on(self) -> Topology:
        """The topology the engine times this call's flows on alone (scaled by protocol)."""
        if self.protocol == "none":
            return self.topology
        return effective_topology(self.topology, self.protocol, topology_profile(self.nominal))

    def schedule(self, groups: tuple[int, ...]) -> Schedule:
        """The schedule of the groups *groups* (indices into the spec's) alone (cached)."""
        key = ("schedule", groups)
        if key not in self._subsets:
            chosen = [self.spec.groups[g] for g in groups]
            self._subsets[key] = build_schedule(self.spec.op, self.name, chosen, self.spec.nbytes)
        return self._subsets[key]

    def alone(self, groups: tuple[int, ...]) -> np.ndarray:
        """Each of *groups*' time when only they run, starting together (s): the call's own
        numbers for all its groups, else the engine on the subset."""
        if len(groups) == len(self.spec.groups):
            return self.alone_s
        key = ("alone", groups)
        if key not in self._subsets:
            chosen = [self.spec.groups[g] for g in groups]
            result = run_collective(self.timed_on, self.spec.op, self.name, chosen, self.spec.nbytes)
            times = np.asarray(result.group_time_s)
            self._subsets[key] = np.where(times > 0, times + self.fixed_s, 0.0) \
                if self.protocol != "none" else times + self.fixed_s
        return self._subsets[key]

    @cached_property
    def group_links(self) -> list[np.ndarray]:
        """The directed links each group's transfers cross (sorted link ids)."""
        n = self.topology.n_gpus
        if not self.moves_bytes:
            return [np.zeros(0, dtype=np.int64) for _ in self.spec.groups]
        schedule = self.schedule(tuple(range(len(self.spec.groups))))
        parts = [(t.group, t.src * n + t.dst) for t, _ in schedule.steps.in_use()]
        group = np.concatenate([p[0] for p in parts])
        keys = np.concatenate([p[1] for p in parts])
        both = np.unique(group * n * n + keys)
        group, keys = both // (n * n), both % (n * n)
        routes = route_pairs(self.topology, np.unique(keys))
        owner, links = routes.flow_links(routes.index(keys // n, keys % n))
        by_group = group[owner]
        order = np.lexsort((links, by_group))
        by_group, links = by_group[order], links[order]
        first = np.ones(len(links), dtype=bool)  # sorted by (group, link): repeats are adjacent
        first[1:] = (links[1:] != links[:-1]) | (by_group[1:] != by_group[:-1])
        by_group, links = by_group[first], links[first]
        links.flags.writeable = False  # each group's links are a view of it, shared
        bounds = np.searchsorted(by_group, np.arange(len(self.spec.groups) + 1))
        return [links[bounds[g]:bounds[g + 1]] for g in range(len(self.spec.groups))]

    @cached_property
    def lower_bound_s(self) -> float:
        """Seconds no group of this call can beat, whatever else shares the links: its fixed
        latency, then the longer of what its GPUs' own links need at their full
        (protocol-scaled) bandwidth (:func:`~atpsim.collectives.nccl.candidates.
        port_bound_s`: the GPU that moves the fewest) and what its busiest link needs for the
        group's bytes on it (:meth:`_link_bound_s`: the group whose busiest link needs the
        least), so a bound for every group, not only the slowest; 0 where a group has one rank
        (it moves nothing and takes no time)."""
        if not self.moves_bytes or any(len(g) < 2 for g in self.spec.groups):
            return 0.0
        steps = self.schedule(tuple(range(len(self.spec.groups)))).steps
        pushed = port_bound_s(steps, self.timed_on)
        moving = pushed[pushed > 0]
        if not len(moving):
            return 0.0
        return self.fixed_s + max(float(moving.min()), self._link_bound_s(steps))

    def _link_bound_s(self, steps: Steps) -> float:
        """The least over the groups of the longest any one link needs to carry the group's
        bytes of *steps* (every transfer on its route) at its bandwidth in :attr:`timed_on`:
        the call's flows on a link share at most that bandwidth, however the rest is used."""
        n, n_links = self.topology.n_gpus, len(self.topology.links)
        parts = [(t.group[t.src != t.dst], (t.src * n + t.dst)[t.src != t.dst], count * t.nbytes[t.src != t.dst])
                 for t, count in steps.in_use()]  # fmt: skip
        group, keys, nbytes = (np.concatenate([p[i] for p in parts]) for i in range(3))
        if not len(keys):
            return 0.0
        routes = route_pairs(self.topology, np.unique(keys))
        owner, links = routes.flow_links(routes.index(keys // n, keys % n))
        cells, where = np.unique(group[owner] * n_links + links, return_inverse=True)
        seconds = np.bincount(where, weights=nbytes[owner]) / self.timed_on.links.bandwidth_Bps[cells % n_links]
        worst = np.zeros(len(self.spec.groups))
        np.maximum.at(worst, cells // n_links, seconds)
        return float(worst.min())

    @cached_property
    def all_links(self) -> np.ndarray:
        """The links any of the call's groups crosses (sorted, unique; read-only)."""
        parts = self.group_links
        links = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        links.flags.writeable = False
        return links

    def links_of(self, groups: Sequence[int]) -> np.ndarray:
        """The links the groups *groups* cross, together (every group's, ``range(n)``: once)."""
        if isinstance(groups, range) and groups == range(len(self.spec.groups)):
            return self.all_links
        parts = [self.group_links[g] for g in groups]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


#: Plans of unperturbed machines, per topology (the step simulator and the joint network
#: share them, so a call is planned and timed once).
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def plan_call(spec: CallSpec, topology: Topology, nominal: Topology | None = None) -> CallPlan:
    """*spec* as it runs on *topology*, planned (algorithm, protocol) for *nominal* (the
    machine before any perturbation; default *topology*): module docstring."""
    if nominal is None or nominal is topology:
        kept = _PLANS.setdefault(topology, {})
        if spec not in kept:
            kept[spec] = _plan_call(spec, topology, topology)
        return kept[spec]
    return _plan_call(spec, topology, nominal)


def joint_backends() -> list[str]:
    """The backends whose calls move bytes over links (the joint network's): the ``backend``
    methods of :mod:`atpsim.engine.methods` that are ``on_network``."""
    return [name for name in names("backend") if backend_method(name).on_network]


def _plan_call(spec: CallSpec, topology: Topology, nominal: Topology) -> CallPlan:
    method = find("backend", spec.backend)
    if method is None or not method.on_network:
        raise SimulationError(f"the joint network runs the {' and '.join(joint_backends())} backends, "
                              f"not {spec.backend!r} (it moves no bytes)", key="backend")  # fmt: skip
    groups = [list(g) for g in spec.groups]
    if method.nccl and runs_nccl(nominal):
        return _nccl_plan(spec, topology, nominal, groups)
    name = spec.algorithm if spec.algorithm in algorithm_names(spec.op) else "ring"
    if max(len(g) for g in groups) < 2:
        alone = np.zeros(len(groups))
    else:
        alone = np.asarray(run_collective(topology, spec.op, name, groups, spec.nbytes).group_time_s)
        alone = alone + spec.overhead_s
    return CallPlan(spec, topology, nominal, name, "none", spec.overhead_s, alone)


def _nccl_plan(spec: CallSpec, topology: Topology, nominal: Topology, groups: list[list[int]]
               ) -> CallPlan:
    if max(len(g) for g in groups) < 2:
        return CallPlan(spec, topology, nominal, "ring", "none", 0.0, np.zeros(len(groups)))
    chosen = spec.algorithm if spec.algorithm in nccl_algorithm_names(spec.op) else "auto"
    call = run_nccl(nominal, spec.op, chosen, groups, spec.nbytes)
    name, row = call.schedule, link_row(call.algorithm, call.protocol)
    plan = CallPlan(spec, topology, nominal, name, row, call.latency_s,
                    np.asarray(call.group_time_s))  # fmt: skip
    if topology is nominal:
        return plan
    return CallPlan(spec, topology, nominal, name, row, call.latency_s,
                    _alone_all(plan, groups))  # fmt: skip


def _alone_all(plan: CallPlan, groups: list[list[int]]) -> np.ndarray:
    result = run_collective(plan.timed_on, plan.spec.op, plan.name, groups, plan.spec.nbytes)
    times = np.asarray(result.group_time_s)
    return np.where(times > 0, times + plan.fixed_s, 0.0)


def weight_table(topology: Topology) -> np.ndarray:
    """Wire bytes per data byte, ``[protocol row, class]``: 1 on bare links, ``1 / e`` for
    NCCL's protocol (or NVLS) with efficiency ``e`` on the class (the topology's NCCL profile)."""
    profile = topology_profile(topology)
    table = np.ones((len(PROTOCOL_ROWS), len(CLASSES)))
    for i, protocol in enumerate(LINK_ROWS, start=1):
        for j, name in enumerate(CLASSES):
            table[i, j] = 1.0 / profile.efficiency[protocol][name]
    return table


def link_classes(topology: Topology) -> np.ndarray:
    """Each directed link's class (a column of :func:`weight_table`)."""
    return np.array([CLASSES.index(LINK_CLASS.get(kind, "nvlink")) for kind in topology.links.kind],
                    dtype=np.int64)  # fmt: skip
