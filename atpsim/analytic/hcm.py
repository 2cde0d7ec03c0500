"""The hierarchical communication matrix (paper Section 3.4, Figure 7), derived from a topology.

Layers go from the top: at layer 1 the ranks are the largest groups of GPUs (e.g. the nodes of a
cluster, the rings of a 2D torus), at the last layer single GPUs. Each layer holds one or more
*groups* (the parents: the whole system at layer 1, one node at layer 2, ...); a group's ranks
have a P2P matrix (aggregate bandwidth between two ranks) and a group bandwidth per rank
(aggregate bandwidth from the rank to the rest of its group). Which GPUs form the ranks is found
by :mod:`atpsim.analytic.grouping` (bandwidth thresholds, torus slices, shared switches); the
bandwidths by :mod:`atpsim.analytic.bandwidths` (max-flows on the group's fabric).

**Units and the paper's convention.** Every bandwidth here is bytes/s *per direction*, as on
the topology's links (house style). The paper mixes conventions: it quotes NVLink3 as "50 GB/s
per link", which is the bidirectional figure (25 GB/s each way), while "200 Gbps HDR" is
25 GB/s each way. So Figure 7(a)'s 200 GB/s P2P and 600 GB/s group bandwidth are reproduced
by a graph built with the paper's numbers as given (50 GB/s per NVLink, 4 per GPU pair); the
``ib-cluster`` builder's Figure 7(a) node, with the vendor's 25 GB/s per direction, gives
100 and 300 GB/s. Eq. 2-4 use any consistent unit, so the mesh ranking is unaffected as long
as a topology is built in one convention.

**Cost.** Grouping O(E log E + V x distinct link bandwidths); bandwidths O(E) per group for
direct-link fabrics and O(classes^2) max-flows per group for switched ones (see the modules).
A 16x16 torus, a 256-GPU NVLink-Network switch or a 32-node cluster take well under a second.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from atpsim.analytic.bandwidths import RankBandwidths, rank_bandwidths
from atpsim.analytic.grouping import GroupNode, group_tree
from atpsim.errors import AtpsimError
from atpsim.topology.graph import Topology

#: (layer number from 1, group index in the layer, rank index in the group)
Position = tuple[int, int, int]


@dataclass(frozen=True, eq=False)
class HcmGroup:
    """One parent group of a layer: its GPUs, its ranks (GPU ranks of each), how it was found,
    and the P2P / group bandwidths of its ranks (bytes/s per direction)."""

    gpus: tuple[int, ...]
    ranks: tuple[tuple[int, ...], ...]
    formed_by: str
    bandwidths: RankBandwidths

    @property
    def n_ranks(self) -> int:
        return len(self.ranks)

    def p2p_Bps(self, a: int, b: int) -> float:
        """Aggregate bandwidth between ranks *a* and *b* of this group (0 for a == b)."""
        if a == b:
            return 0.0
        classes = self.bandwidths.rank_class
        return float(self.bandwidths.class_p2p_Bps[classes[a], classes[b]])

    def group_Bps(self, a: int) -> float:
        """Aggregate bandwidth from rank *a* to the other ranks of this group."""
        return float(self.bandwidths.class_group_Bps[self.bandwidths.rank_class[a]])

    def p2p_sums_Bps(self, ranks: list[int]) -> np.ndarray:
        """For each of *ranks*, the sum of its P2P bandwidth to the other *ranks* (by class
        counts: O(len(ranks) x classes), so a 4096-GPU switch is one multiply)."""
        table = self.bandwidths.class_p2p_Bps
        classes = self.bandwidths.rank_class[ranks]
        counts = np.bincount(classes, minlength=len(table))
        return table[classes] @ counts - table[classes, classes]

    def p2p_matrix_Bps(self) -> np.ndarray:
        """The dense R x R P2P matrix (zero diagonal)."""
        classes = self.bandwidths.rank_class
        matrix = self.bandwidths.class_p2p_Bps[np.ix_(classes, classes)].copy()
        np.fill_diagonal(matrix, 0.0)
        return matrix

    def group_bandwidths_Bps(self) -> np.ndarray:
        """Group bandwidth of every rank, in rank order."""
        return self.bandwidths.class_group_Bps[self.bandwidths.rank_class].copy()


@dataclass(frozen=True)
class HcmLayer:
    """Layer *number* (1 = top) and its parent groups."""

    number: int
    groups: tuple[HcmGroup, ...]

    @property
    def ranks_per_group(self) -> tuple[int, ...]:
        """The distinct R_j of this layer's groups (one value for a regular hierarchy)."""
        return tuple(sorted({group.n_ranks for group in self.groups}))


@dataclass(frozen=True, eq=False)
class HierarchicalCommMatrix:
    """The layers of a topology's hierarchical communication matrix, top first."""

    topology_name: str
    n_gpus: int
    layers: tuple[HcmLayer, ...]
    _positions: dict[int, tuple[Position, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        positions: dict[int, list[Position]] = {gpu: [] for gpu in range(self.n_gpus)}
        for layer in self.layers:
            for g, group in enumerate(layer.groups):
                for r, rank in enumerate(group.ranks):
                    for gpu in rank:
                        positions[gpu].append((layer.number, g, r))
        object.__setattr__(self, "_positions", {k: tuple(v) for k, v in positions.items()})

    def positions(self, gpu: int) -> tuple[Position, ...]:
        """(layer, group, rank) of *gpu* at every layer where it is in a group, top first."""
        if gpu not in self._positions:
            raise AtpsimError(f"GPU {gpu} is not in {self.topology_name} (0..{self.n_gpus - 1})")
        return self._positions[gpu]

    def group(self, layer: int, index: int) -> HcmGroup:
        return self.layers[layer - 1].groups[index]


_CACHE: weakref.WeakKeyDictionary[Topology, HierarchicalCommMatrix] = weakref.WeakKeyDictionary()


def derive_hcm(topology: Topology) -> HierarchicalCommMatrix:
    """The hierarchical communication matrix of *topology* (memoized per topology object)."""
    cached = _CACHE.get(topology)
    if cached is None:
        cached = _derive(topology)
        _CACHE[topology] = cached
    return cached


def _derive(topology: Topology) -> HierarchicalCommMatrix:
    root = group_tree(topology)
    by_depth: list[list[HcmGroup]] = []
    level = [root] if not root.is_leaf else []
    while level:
        by_depth.append([_hcm_group(topology, group) for group in level])
        level = [child for group in level for child in group.children if not child.is_leaf]
    layers = tuple(HcmLayer(i + 1, tuple(groups)) for i, groups in enumerate(by_depth))
    return HierarchicalCommMatrix(topology.name, topology.n_gpus, layers)


def _hcm_group(topology: Topology, group: GroupNode) -> HcmGroup:
    ranks = tuple(child.gpus for child in group.children)
    return HcmGroup(group.gpus, ranks, group.formed_by, rank_bandwidths(topology, group))
