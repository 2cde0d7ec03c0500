"""The machine a joint run shares: its links (capacities as they run, perhaps degraded), the
protocols' weights per link class, and every call planned once.

*topology* is the machine as it runs (a perturbation may have slowed links,
:mod:`atpsim.engine.joint.perturb`), *nominal* the machine as built: NCCL's tuner picks each
call's algorithm and protocol on the nominal one (it does not know a NIC is degraded), and
the call runs on the real one.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import numpy as np

from atpsim.engine.joint.calls import CallPlan, CallSpec, link_classes, plan_call, weight_table
from atpsim.engine.solvers.flow_network import Fabric
from atpsim.topology.graph import Topology


class JointNetwork:
    """Links and call plans of one joint run (module docstring)."""

    def __init__(self, topology: Topology, nominal: Topology | None = None):
        self.topology = topology
        self.nominal = nominal or topology
        self._plans: dict[CallSpec, CallPlan] = {}
        self._by_id: dict[int, tuple[CallSpec, CallPlan]] = {}
        #: A live episode's member's start-independent parts per (id(plan), groups)
        #: (:func:`atpsim.engine.joint.live.member_nodes`).
        self.member_parts: dict[tuple[int, tuple[int, ...]], tuple] = {}
        #: An episode's start-independent parts (its union of transfers, the symmetry found
        #: and the quotient) per its members' (id(plan), groups) in order
        #: (:func:`atpsim.engine.joint.episodes.solve_episode`).
        self.episode_parts: dict[tuple, tuple] = {}

    @cached_property
    def fabric(self) -> Fabric:
        table = self.topology.links
        return Fabric(np.asarray(table.bandwidth_Bps, dtype=np.float64),
                      link_classes(self.topology), weight_table(self.nominal))  # fmt: skip

    @property
    def n_links(self) -> int:
        return len(self.topology.links)

    def disjoint(self, owned: Iterable[tuple[CallSpec, np.ndarray]], others: Iterable[CallSpec]) -> bool:
        """Whether the groups *owned* (each call with the owner of each of its groups) cross
        no link that a group of another owner crosses, and none that any group of the calls
        *others* crosses: then each owner's traffic meets nothing but its own."""
        parts, owners = [], []
        for spec, by in owned:
            crossed = self.plan(spec).group_links
            lengths = np.fromiter(map(len, crossed), dtype=np.int64, count=len(crossed))
            parts.append(np.concatenate(crossed) if crossed else np.zeros(0, dtype=np.int64))
            owners.append(np.repeat(np.asarray(by, dtype=np.int64), lengths))
        links = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        who = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        order = np.lexsort((who, links))
        links, who = links[order], who[order]
        if np.any((links[1:] == links[:-1]) & (who[1:] != who[:-1])):
            return False  # a link two owners cross
        owner = np.full(self.n_links, -1, dtype=np.int64)
        owner[links] = who
        for spec in others:
            plan = self.plan(spec)
            if np.any(owner[plan.links_of(range(len(spec.groups)))] >= 0):
                return False
        return True

    def plan(self, spec: CallSpec) -> CallPlan:
        """*spec* planned on this machine (once per run; the same spec object is found by
        identity, since hashing a call of thousands of groups is slow)."""
        known = self._by_id.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        if spec not in self._plans:
            self._plans[spec] = plan_call(spec, self.topology, self.nominal)
        self._by_id[id(spec)] = (spec, self._plans[spec])
        return self._plans[spec]
