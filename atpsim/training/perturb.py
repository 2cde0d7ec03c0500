"""A job's perturbation drawn from a seed: stragglers among its GPUs and degraded NIC ports
among the NICs those GPUs use (:func:`draw_perturbation`), so the same seed gives the same
ranks and cables. The engine applies what is drawn (:class:`~atpsim.engine.joint.perturb.
Perturbation`: slower compute per rank, less bandwidth per cable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from atpsim.compute.hardware import HardwareProfile
from atpsim.engine.joint.network import JointNetwork
from atpsim.engine.joint.perturb import Perturbation
from atpsim.engine.step.run import comm_spec
from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology
from atpsim.topology.queries import nic_ports
from atpsim.training.config import JobConfig
from atpsim.training.passes import JobPrograms, OpCosts, StageGroups

__all__ = ["PERTURB_KEYS", "Perturbation", "draw_perturbation", "job_perturbation", "replica_costs"]

#: The keys of a perturbation drawn for a job (:func:`draw_perturbation`'s arguments).
PERTURB_KEYS = ("seed", "stragglers", "straggler_factor", "slow_nics", "nic_factor", "gpus", "links")


def job_perturbation(topology: Topology, config: JobConfig,
                     perturb: Perturbation | Mapping[str, Any] | None) -> Perturbation | None:
    """*perturb* as a :class:`Perturbation` over the job's GPUs (drawn from its keys)."""
    if perturb is None or isinstance(perturb, Perturbation):
        return perturb
    unknown = sorted(set(perturb) - set(PERTURB_KEYS))
    if unknown:
        raise SimulationError(f"unknown perturb key {unknown[0]!r}; expected one of {', '.join(PERTURB_KEYS)}",
                              key="perturb")  # fmt: skip
    first = getattr(config.layout, "offset", 0)
    return draw_perturbation(topology, range(first, first + config.layout.size), **dict(perturb))


def draw_perturbation(topology: Topology, ranks: Sequence[int], *, seed: int = 0,
                      stragglers: int = 0, straggler_factor: float = 1.0, slow_nics: int = 0,
                      nic_factor: float = 1.0, gpus: Iterable[tuple[int, float]] = (),
                      links: Iterable[tuple[str, str, float]] = ()) -> Perturbation:
    """*stragglers* GPUs of *ranks* at *straggler_factor* and *slow_nics* NIC ports (the
    cable from a NIC the job's GPUs reach to its switch, :func:`~atpsim.topology.queries.
    nic_ports`) at *nic_factor*, drawn with *seed*; plus the listed *gpus* and *links*."""
    rng = np.random.default_rng(seed)
    pool = np.asarray(sorted(set(ranks)), dtype=np.int64)
    if stragglers > len(pool):
        raise SimulationError(f"{stragglers} stragglers among {len(pool)} GPUs", key="perturb.stragglers")
    chosen = rng.choice(pool, size=stragglers, replace=False) if stragglers else np.zeros(0, np.int64)
    drawn_gpus = [(int(r), float(straggler_factor)) for r in sorted(chosen.tolist())]
    ports = nic_ports(topology, pool.tolist())
    if slow_nics > len(ports):
        raise SimulationError(f"{slow_nics} slow NICs among the {len(ports)} the job uses",
                              key="perturb.slow_nics")  # fmt: skip
    picked: list[int] = rng.choice(len(ports), size=slow_nics, replace=False).tolist() if slow_nics else []
    drawn_links = [(*ports[int(i)], float(nic_factor)) for i in sorted(picked)]
    return Perturbation(tuple(drawn_gpus) + tuple((int(r), float(f)) for r, f in gpus),
                        tuple(drawn_links) + tuple((str(a), str(b), float(f)) for a, b, f in links))


def replica_costs(topology: Topology, machine: JointNetwork, profile: HardwareProfile,
                   programs: JobPrograms, nominal: OpCosts, perturb: Perturbation | None
                   ) -> Callable[[int, int], OpCosts]:
    """``costs(replica, stage)``: the nominal op costs, or, for a stage with a slow GPU or a
    slow link of its TP groups, its own TP groups timed with its ranks' factors on the links
    as they run."""
    if perturb is None or perturb.empty:
        return lambda replica, stage: nominal
    config = programs.config
    scale = perturb.compute_scale(topology.n_gpus)
    slow = np.zeros(len(topology.links), dtype=bool)
    slow[perturb.slow_links(topology)] = True
    own: dict[tuple[int, int], OpCosts] = {}

    def costs(replica: int, stage: int) -> OpCosts:
        if (replica, stage) not in own:
            source = StageGroups(config.layout, replica, stage)
            ranks = source.ranks
            if np.all(scale[ranks] == 1.0) and not (slow.any() and _crosses_slow_link(machine, source, programs, slow)):
                own[(replica, stage)] = nominal
            else:
                own[(replica, stage)] = OpCosts(machine.topology, profile, programs, source, scale[ranks])
        return own[(replica, stage)]

    return costs


def _crosses_slow_link(machine: JointNetwork, source: StageGroups, programs: JobPrograms, slow: np.ndarray) -> bool:
    """Whether the stage's TP groups cross a slow link."""
    for op in {op for p in programs.all() for op in p.comm_ops()}:
        groups = source.groups(op.dim)
        if len(groups[0]) > 1:
            plan = machine.plan(comm_spec(op, groups, programs.config.algorithm))
            if slow[plan.links_of(range(len(groups)))].any():
                return True
    return False
