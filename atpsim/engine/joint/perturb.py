"""Per-rank variation: GPUs that compute slower (stragglers) and links that carry less
(a degraded NIC port, a flaky cable), fixed or drawn from a seed.

A :class:`Perturbation` holds *gpus* ``(rank, factor)`` (the rank's compute takes ``factor``
times as long; > 1 is slower) and *links* ``(node, node, factor)`` (the cable between two
nodes of the topology carries ``factor`` of its bandwidth in each direction; < 1 is slower).
:func:`draw_perturbation` picks stragglers among a job's GPUs and degraded NIC ports among
the NICs those GPUs use, with a seeded generator, so the same seed gives the same ranks.
:meth:`Perturbation.apply` gives the topology as it runs; the nominal one stays what NCCL's
tuner plans for.

It breaks the symmetry of the layout (one replica falls behind, one ring is slow), so it is
the joint engine's worst case: fewer calls meet their twins, and episodes lose their shift.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from atpsim.errors import SimulationError
from atpsim.topology.graph import Topology


@dataclass(frozen=True)
class Perturbation:
    """Slow GPUs ``(rank, compute time factor)`` and slow cables ``(node, node, bandwidth
    factor)`` (module docstring)."""

    gpus: tuple[tuple[int, float], ...] = ()
    links: tuple[tuple[str, str, float], ...] = ()

    def __post_init__(self) -> None:
        for rank, factor in self.gpus:
            if not factor > 0:
                raise SimulationError(f"GPU {rank}'s compute factor is {factor}; expected > 0",
                                      key="perturb.gpus")  # fmt: skip
        for a, b, factor in self.links:
            if not factor > 0:
                raise SimulationError(f"link {a}-{b}'s bandwidth factor is {factor}; expected > 0",
                                      key="perturb.links")  # fmt: skip

    @property
    def empty(self) -> bool:
        return not self.gpus and not self.links

    def compute_scale(self, n_ranks: int) -> np.ndarray:
        """Each rank's compute time factor (1 where unperturbed)."""
        scale = np.ones(n_ranks)
        for rank, factor in self.gpus:
            if not 0 <= rank < n_ranks:
                raise SimulationError(f"GPU {rank} is not one of the job's {n_ranks}", key="perturb.gpus")
            scale[rank] *= factor
        return scale

    def apply(self, topology: Topology) -> Topology:
        """*topology* with the slow cables' bandwidth scaled (itself when there are none)."""
        if not self.links:
            return topology
        graph = topology.graph.copy()
        for a, b, factor in self.links:
            if not graph.has_edge(a, b):
                raise SimulationError(f"{topology.name} has no link {a}-{b}", key="perturb.links")
            graph.edges[a, b]["bandwidth_Bps"] = graph.edges[a, b]["bandwidth_Bps"] * factor
        return Topology(f"{topology.name}[perturbed]", graph, topology.router,
                        topology.description, topology.meta)  # fmt: skip

    def slow_links(self, topology: Topology) -> np.ndarray:
        """Directed link ids of the slow cables (both directions)."""
        ids = []
        for a, b, _ in self.links:
            ids += [topology.link_id(a, b), topology.link_id(b, a)]
        return np.array(sorted(ids), dtype=np.int64)


def draw_perturbation(topology: Topology, ranks: Sequence[int], *, seed: int = 0,
                      stragglers: int = 0, straggler_factor: float = 1.0, slow_nics: int = 0,
                      nic_factor: float = 1.0, gpus: Iterable[tuple[int, float]] = (),
                      links: Iterable[tuple[str, str, float]] = ()) -> Perturbation:
    """*stragglers* GPUs of *ranks* at *straggler_factor* and *slow_nics* NIC ports (the
    cable from a NIC the job's GPUs reach to its switch) at *nic_factor*, drawn with *seed*;
    plus the listed *gpus* and *links*."""
    rng = np.random.default_rng(seed)
    pool = np.asarray(sorted(set(ranks)), dtype=np.int64)
    if stragglers > len(pool):
        raise SimulationError(f"{stragglers} stragglers among {len(pool)} GPUs", key="perturb.stragglers")
    chosen = rng.choice(pool, size=stragglers, replace=False) if stragglers else np.zeros(0, np.int64)
    drawn_gpus = [(int(r), float(straggler_factor)) for r in sorted(chosen.tolist())]
    ports = _nic_ports(topology, pool)
    if slow_nics > len(ports):
        raise SimulationError(f"{slow_nics} slow NICs among the {len(ports)} the job uses",
                              key="perturb.slow_nics")  # fmt: skip
    picked: list[int] = rng.choice(len(ports), size=slow_nics, replace=False).tolist() if slow_nics else []
    drawn_links = [(*ports[int(i)], float(nic_factor)) for i in sorted(picked)]
    return Perturbation(tuple(drawn_gpus) + tuple((int(r), float(f)) for r, f in gpus),
                        tuple(drawn_links) + tuple((str(a), str(b), float(f)) for a, b, f in links))


def _nic_ports(topology: Topology, ranks: np.ndarray) -> list[tuple[str, str]]:
    """(NIC, switch) cables of the NICs the GPUs *ranks* are wired to, in rank order."""
    graph = topology.graph
    ports: list[tuple[str, str]] = []
    for rank in ranks.tolist():
        gpu = topology.gpu_nodes[rank]
        for nic in sorted(n for n in graph.neighbors(gpu) if graph.nodes[n].get("kind") == "nic"):
            for switch in sorted(graph.neighbors(nic)):
                if graph.nodes[switch].get("kind") not in ("gpu", "nic") and (nic, switch) not in ports:
                    ports.append((nic, switch))
    return ports
