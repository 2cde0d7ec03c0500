"""Per-rank variation: GPUs that compute slower (stragglers) and links that carry less
(a degraded NIC port, a flaky cable), fixed or drawn from a seed.

A :class:`Perturbation` holds *gpus* ``(rank, factor)`` (the rank's compute takes ``factor``
times as long; > 1 is slower) and *links* ``(node, node, factor)`` (the cable between two
nodes of the topology carries ``factor`` of its bandwidth in each direction; < 1 is slower).
The training layer draws them for a job from a seed (:func:`atpsim.training.perturb.
draw_perturbation`); the engine only applies them. :meth:`Perturbation.apply` gives the
topology as it runs; the nominal one stays what NCCL's tuner plans for.

It breaks the symmetry of the layout (one replica falls behind, one ring is slow), so it is
the joint engine's worst case: fewer calls meet their twins, and episodes lose their shift.
"""

from __future__ import annotations

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
